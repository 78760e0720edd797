#!/bin/bash
# Step 2 of the seed example: replace with your own launch command.
echo "job2 start: $(date)"
sleep 10
echo "job2 done"
