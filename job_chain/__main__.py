"""`python3 -m job_chain`: how a training image without the console script runs job-chain."""

from job_chain.cli import main

if __name__ == "__main__":
    main()
