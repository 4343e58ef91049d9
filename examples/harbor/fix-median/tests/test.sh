#!/bin/bash
# No reward file: the exit code is the verdict (0 passes).
cd /app
python /tests/check_median.py
