"""job-chain: chains of Baidu AIHC training jobs that advance themselves."""

__version__ = "0.1.0"
