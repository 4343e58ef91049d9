#!/bin/bash
python - <<'PY'
import json

text = open("/app/data/text.txt").read()
words = text.split()
report = {"lines": len(text.splitlines()), "words": len(words), "longest": max(words, key=len)}
json.dump(report, open("/app/report.json", "w"))
PY
