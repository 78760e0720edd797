"""Small helpers on the standard library alone: files, JSON, terminal text, process trees."""
