#!/bin/bash
# Step 1 of the seed example: replace with your own launch command.
echo "job1 start: $(date)"
sleep 10
echo "job1 done"
