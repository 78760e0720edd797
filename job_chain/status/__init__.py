"""Where a run stands: its jobs from the API, their attempts, causes, GPU-hours and the outcome."""
