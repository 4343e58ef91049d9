import sys

sys.path.insert(0, "/app")
from stats import median  # noqa: E402

CASES = [([3, 1, 2], 2), ([4, 1, 3, 2], 2.5), ([10, 20], 15), ([7], 7)]
wrong = [(values, expected, median(values)) for values, expected in CASES if median(values) != expected]
for values, expected, got in wrong:
    print(f"median({values}) = {got}, expected {expected}")
sys.exit(1 if wrong else 0)
