"""aiak-gen: AIAK LLM training chains (convert → preprocess → train) from a short description."""
