"""What a failure is: the catalogue of known signatures and the classifier of log tails (pure)."""
