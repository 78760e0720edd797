"""How a run moves on: pure decisions over neutral facts (retries, plans, joins, checkpoints)."""
