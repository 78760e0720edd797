"""What runs inside a finishing job (`python3 -m job_chain.hop`); kept light to import."""
