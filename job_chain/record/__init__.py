"""The run record, FILE.runs/RUN/: the only code that knows its file names."""
