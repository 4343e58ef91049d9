#!/bin/bash
# Partial credit: the share of the report's fields that are right, in reward.json.
mkdir -p /logs/verifier
python /tests/score_report.py > /logs/verifier/reward.json
