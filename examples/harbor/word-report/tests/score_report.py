import json
import os

text = open("/app/data/text.txt").read()
words = text.split()
expected = {"lines": len(text.splitlines()), "words": len(words), "longest": max(words, key=len)}
try:
    report = json.load(open(os.environ["REPORT"]))
except (OSError, ValueError):
    report = {}
right = sum(1 for key, value in expected.items() if isinstance(report, dict) and report.get(key) == value)
print(json.dumps({"reward": right / len(expected), "fields_right": right}))
