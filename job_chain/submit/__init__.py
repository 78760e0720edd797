"""One way to create a step's job: its request, its command, its idempotency token."""
