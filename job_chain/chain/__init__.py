"""Chains: load and validate chain files, rewrite step commands, submit and advance steps."""
