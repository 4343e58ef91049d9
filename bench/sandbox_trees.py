"""Sandbox snippet rates of two source trees (and plain subprocesses), side by side in one run.

Each round runs, one after another, a fresh process per tree (its ``src`` first on
``PYTHONPATH``) that starts ``Sandbox(workers=2)``, warms it up with 50 snippets and times
``map_python`` over ``--snippets`` snippets (those of ``bench/sandbox.py``), then a plain
round: the same snippets as ``python3 -c`` subprocesses on 2 threads. The order of the trees
flips every round (A B, B A, ...), so load from other work on a shared machine falls on both
alike; each figure is the median over ``--rounds``. Every process of a tree's sandbox is
counted in its CPU per snippet (the sandbox is closed, so its servers are reaped, and the CPU
of starting and closing an unused one is subtracted), except in trees from before closing
asked an idle server to end (``be0525e``): their servers were killed, and their templates'
CPU reached no account.

Prints one JSON line: per tree, snippets/s, its ratio to the plain rate, CPU ms per snippet
and every round's rate; and each tree's rate over the first's.

    .venv/bin/python bench/sandbox_trees.py --tree old=/tmp/old/src --tree new=src [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

WARMUP = 50


def snippets(count: int) -> list[str]:
    return [f"print(sum(i * i for i in range({100 + k})))" for k in range(count)]


def _cpu_seconds() -> float:
    own, reaped = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime


def measure_tree(count: int) -> dict[str, float]:
    """One round of the tree this process imports ``veriloop`` from (``--measure``)."""
    import veriloop
    from veriloop.sandbox import Limits, Sandbox

    limits = Limits(timeout_s=10, memory_mb=512)
    started = _cpu_seconds()
    with Sandbox(limits=limits, workers=2):
        pass
    empty = _cpu_seconds() - started
    codes = snippets(count)
    started = _cpu_seconds()
    with Sandbox(limits=limits, workers=2) as sb:
        sb.map_python(codes[:WARMUP])
        clock = time.perf_counter()
        results = sb.map_python(codes)
        elapsed = time.perf_counter() - clock
    used = _cpu_seconds() - started - empty
    failed = [r for r in results if not r.ok]
    if failed:
        raise SystemExit(f"a snippet failed: {failed[0]}")
    return {"per_s": count / elapsed, "cpu_ms": 1000 * used / (count + WARMUP), "package": veriloop.__file__}


def plain_round(python: str, count: int) -> float:
    from concurrent.futures import ThreadPoolExecutor

    def run(code: str) -> None:
        subprocess.run([python, "-c", code], capture_output=True, timeout=30, check=True)

    started = time.perf_counter()
    with ThreadPoolExecutor(2) as pool:
        list(pool.map(run, snippets(count)))
    return count / (time.perf_counter() - started)


def tree_round(src: Path, count: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(src))
    done = subprocess.run(
        [sys.executable, __file__, "--measure", "--snippets", str(count)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the tree at {src} failed its round:\n{done.stderr[-2000:]}")
    measured = json.loads(done.stdout)
    if not Path(measured.pop("package")).is_relative_to(src):
        raise SystemExit(f"the round meant for {src} imported veriloop from elsewhere")
    return measured


def parse_tree(text: str) -> tuple[str, Path]:
    name, sep, path = text.partition("=")
    src = Path(path)
    if not sep or not name or not (src / "veriloop" / "sandbox").is_dir():
        raise argparse.ArgumentTypeError(f"--tree {text!r}: expected NAME=PATH, PATH a src folder holding veriloop/")
    return name, src.resolve()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=parse_tree, action="append", default=[], help="NAME=SRC, given twice or more")
    parser.add_argument("--snippets", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure_tree(args.snippets)))
        return
    names = [name for name, _ in args.tree]
    if len(names) < 2 or len(set(names)) < len(names):
        parser.error("--tree: give at least two trees to compare, as NAME=SRC, each NAME once")
    from veriloop.sandbox._python import find_python

    python = find_python().executable
    load_before = os.getloadavg()[0]
    rounds: dict[str, list[dict[str, float]]] = {name: [] for name, _ in args.tree}
    plain: list[float] = []
    for index in range(args.rounds):
        order = args.tree if index % 2 == 0 else args.tree[::-1]
        for name, src in order:
            rounds[name].append(tree_round(src, args.snippets))
        plain.append(plain_round(python, args.snippets))
    plain_rate = statistics.median(plain)
    first = statistics.median(r["per_s"] for r in rounds[args.tree[0][0]])
    trees = {}
    for name, src in args.tree:
        rate = statistics.median(r["per_s"] for r in rounds[name])
        trees[name] = {
            "src": str(src),
            "per_s": round(rate, 1),
            "ratio_to_plain": round(rate / plain_rate, 2),
            "rate_over_first": round(rate / first, 3),
            "cpu_ms_per_snippet": round(statistics.median(r["cpu_ms"] for r in rounds[name]), 2),
            "rounds_per_s": [round(r["per_s"], 1) for r in rounds[name]],
        }
    report = {
        "bench": "sandbox_trees",
        "snippets_per_round": args.snippets,
        "rounds": args.rounds,
        "plain_subprocess_per_s": round(plain_rate, 1),
        "trees": trees,
        "cpu": _cpu_model(),
        "load_average_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }
    print(json.dumps(report))


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} x{os.cpu_count()}"
    except OSError:
        pass
    return f"unknown x{os.cpu_count()}"


if __name__ == "__main__":
    main()
