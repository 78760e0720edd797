#!/bin/bash
# Step 3 of the seed example: replace with your own launch command.
echo "job3 start: $(date)"
sleep 10
echo "job3 done"
