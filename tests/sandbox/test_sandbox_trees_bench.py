"""bench/sandbox_trees.py: two trees' sandbox rates side by side, each round in a process of its own."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "sandbox_trees.py"


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=600)


@pytest.mark.e2e
def test_each_tree_gets_its_rounds_in_alternating_order_and_a_rate_over_the_first():
    src = str(ROOT / "src")
    done = bench("--tree", f"a={src}", "--tree", f"b={src}", "--rounds", "2", "--snippets", "20")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert (report["bench"], report["rounds"], report["snippets_per_round"]) == ("sandbox_trees", 2, 20)
    assert list(report["trees"]) == ["a", "b"] and report["plain_subprocess_per_s"] > 0
    for tree in report["trees"].values():
        assert tree["src"] == src and len(tree["rounds_per_s"]) == 2
        assert tree["per_s"] > 0 and tree["cpu_ms_per_snippet"] > 0
        ratio = tree["per_s"] / report["plain_subprocess_per_s"]
        assert tree["ratio_to_plain"] == pytest.approx(ratio, abs=0.02)  # both rounded figures
    assert report["trees"]["a"]["rate_over_first"] == 1.0


@pytest.mark.parametrize(
    ("trees", "message"),
    [
        (["--tree", "a=/nonexistent"], "expected NAME=PATH"),
        (["--tree", f"a={ROOT / 'src'}"], "at least two trees"),
        (["--tree", f"a={ROOT / 'src'}", "--tree", f"a={ROOT / 'src'}"], "each NAME once"),
    ],
)
def test_a_bad_tree_is_named_and_exits_2(trees, message):
    done = bench(*trees)
    assert done.returncode == 2
    assert "--tree" in done.stderr and message in done.stderr
