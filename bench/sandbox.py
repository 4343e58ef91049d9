"""Sandbox throughput and latency, side by side with plain ``python3 -c`` subprocesses.

Prints one JSON line:

- ``plain_subprocess``: each snippet as ``python3 -c`` (the same interpreter the sandbox
  uses inside), on 2 threads, no isolation;
- ``sandbox``: the same snippets through ``Sandbox(workers=2).map_python`` (warm interpreters
  forked per run, full isolation and limits);
- ``ratio``: sandbox snippets/s over plain snippets/s (the two alternate for ``--rounds``
  rounds; each figure is the median over rounds, so both see the same machine load);
- ``cpu_per_snippet``: CPU time per snippet on each side, every process counted (host,
  sandbox servers, runs; the interpreters of the plain side), and their ratio: unlike the
  rates, it does not depend on what else the machine is doing;
- ``cold_start_ms``: from ``Sandbox(workers=1)`` to its first result (a new bubblewrap
  sandbox and interpreter), and a bare ``bwrap ... true`` with the same namespaces;
- ``snapshot``: capturing a workspace of ``--snapshot-files`` files after a run, and
  starting a run from it (the reset time), each over a plain run;
- ``mixed_load``: throughput when 1 snippet in 10 is hostile (CPU loop, memory, fork and
  output floods, a daemon left behind);
- ``workspace_reset``: starting a command from a 200-file, 2 MB workspace (a task's repository
  restored from its snapshot) and running it, p50 and p99, beside the same command on an empty one;
- ``environment_import`` (with ``--env NAME``, an environment holding numpy): a run that imports
  numpy on the environment's warm interpreters, against a cold ``python -c "import numpy"`` of
  the environment's interpreter, p50 in ms;
- ``load_average_1m``: the machine's load before and after (other work on a shared machine
  slows both sides, the plain subprocesses more).

Usage: python bench/sandbox.py [--snippets 600] [--rounds 3] [--env NAME] [--only SECTION,...]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from veriloop.sandbox import Limits, Sandbox
from veriloop.sandbox._bwrap import launch_for
from veriloop.sandbox._python import find_python

WORKERS = 2
HOSTILE = (
    "while True: pass",
    "x = bytearray(1 << 34)",
    "import os\nwhile True: os.fork()",
    "while True: print('x' * 4096)",
    "import subprocess\nsubprocess.Popen(['sleep', '600'], start_new_session=True)",
)


def snippets(count: int) -> list[str]:
    return [f"print(sum(i * i for i in range({100 + k})))" for k in range(count)]


def _percentiles(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "p50_ms": round(1000 * ordered[len(ordered) // 2], 2),
        "p99_ms": round(1000 * ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))], 2),
    }


def _timed_calls(call, items: list[str]) -> list[float]:
    """Latency of each call, with WORKERS threads calling back to back."""
    latencies: list[float] = []
    lock = threading.Lock()

    def one(item: str) -> None:
        started = time.perf_counter()
        call(item)
        with lock:
            latencies.append(time.perf_counter() - started)

    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(one, items))
    return latencies


def plain_round(python: str, codes: list[str]) -> tuple[float, list[float]]:
    def run(code: str) -> None:
        done = subprocess.run([python, "-c", code], capture_output=True, timeout=30)
        assert done.returncode == 0, done.stderr

    started = time.perf_counter()
    latencies = _timed_calls(run, codes)
    return len(codes) / (time.perf_counter() - started), latencies


def sandbox_round(sb: Sandbox, codes: list[str]) -> tuple[float, list[float]]:
    started = time.perf_counter()
    results = sb.map_python(codes)
    per_s = len(codes) / (time.perf_counter() - started)
    assert all(r.ok for r in results), [r for r in results if not r.ok][:1]

    def run(code: str) -> None:
        assert sb.run_python(code).ok

    return per_s, _timed_calls(run, codes[: len(codes) // 2])


def _cpu_seconds() -> float:
    """CPU time of this process and of every descendant it has reaped."""
    own, reaped = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime


def cpu_per_snippet(python: str, codes: list[str]) -> dict[str, float]:
    """CPU milliseconds per snippet, all processes included, on each side: what a dedicated
    machine's throughput follows, whatever else runs on this one. A closed sandbox's
    processes have been reaped, so its whole tree is counted; its start is subtracted."""
    started = _cpu_seconds()
    plain_round(python, codes)
    plain = _cpu_seconds() - started
    starts = []
    for _ in range(3):
        started = _cpu_seconds()
        with Sandbox(workers=WORKERS):
            pass
        starts.append(_cpu_seconds() - started)
    empty = statistics.median(starts)
    started = _cpu_seconds()
    with Sandbox(workers=WORKERS) as sb:
        sb.map_python(codes)
    boxed = _cpu_seconds() - started - empty
    return {
        "plain_ms": round(1000 * plain / len(codes), 2),
        "sandbox_ms": round(1000 * boxed / len(codes), 2),
        "ratio": round(plain / boxed, 2),
    }


def cold_start(python_path: str, repeats: int = 5) -> dict[str, float]:
    firsts, bare = [], []
    for _ in range(repeats):
        started = time.perf_counter()
        with Sandbox(workers=1) as sb:
            assert sb.run_python("print(1)").ok
            firsts.append(time.perf_counter() - started)
    launch = launch_for(find_python(python_path), Limits(), network=False)
    for _ in range(repeats):
        argv = [*launch.head, *launch.tail[: launch.tail.index(python_path)], "/bin/true"]
        started = time.perf_counter()
        drop = {} if launch.run_as is None else {"user": launch.run_as, "group": launch.run_as, "extra_groups": []}
        subprocess.run(argv, check=True, **drop)
        bare.append(time.perf_counter() - started)
    return {
        "sandbox_first_result_ms": round(1000 * statistics.median(firsts), 1),
        "bare_bwrap_true_ms": round(1000 * statistics.median(bare), 1),
    }


def snapshot_times(sb: Sandbox, file_count: int, repeats: int = 20) -> dict[str, float]:
    files = {f"src/module_{i}.py": "x = 1\n" * 2000 for i in range(file_count)}
    made = sb.run_python("pass", files=files, capture=True)
    assert made.ok and made.snapshot is not None
    plain, capture, restore = [], [], []
    for _ in range(repeats):
        for bucket, kwargs in (
            (plain, {}),
            (capture, {"files": files, "capture": True}),
            (restore, {"snapshot": made.snapshot}),
        ):
            started = time.perf_counter()
            assert sb.run_python("pass", **kwargs).ok
            bucket.append(time.perf_counter() - started)
    base = statistics.median(plain)
    return {
        "files": file_count,
        "bytes": sum(len(c) for c in files.values()),
        "archive_bytes": len(made.snapshot.archive),
        "plain_run_ms": round(1000 * base, 2),
        "capture_ms": round(1000 * (statistics.median(capture) - base), 2),
        "restore_ms": round(1000 * (statistics.median(restore) - base), 2),
    }


def workspace_reset(sb: Sandbox, repeats: int = 100) -> dict[str, float]:
    from veriloop.core import Snapshot, snapshot_archive

    line = "value = 1  # a line of a module of a small repository\n"
    files = {f"pkg/sub_{i % 10}/module_{i}.py": (line * 200)[:10_000].encode() for i in range(200)}
    snapshot = Snapshot(archive=snapshot_archive(files))
    command = ["sh", "-c", "test -f pkg/sub_9/module_199.py"]
    empty, restored = [], []
    for _ in range(repeats):
        for bucket, kwargs in ((empty, {}), (restored, {"snapshot": snapshot})):
            started = time.perf_counter()
            assert sb.run(command, **kwargs).ok is (bucket is restored)
            bucket.append(time.perf_counter() - started)
    return {
        "files": len(files),
        "bytes": sum(map(len, files.values())),
        "command": " ".join(command),
        "restore_and_run": _percentiles(restored),
        "empty_workspace_run": _percentiles(empty),
    }


def environment_import(name: str, repeats: int = 30) -> dict[str, object]:
    from veriloop.sandbox._environments import load_environment

    environment = load_environment(name)
    cold = []
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run([environment.python, "-c", "import numpy"], check=True)
        cold.append(time.perf_counter() - started)
    with Sandbox(limits=Limits(timeout_s=30, memory_mb=1024), workers=1, environment=name) as sb:
        sb.run_python("pass")
        warm = []
        for _ in range(repeats):
            started = time.perf_counter()
            assert sb.run_python("import numpy\nnumpy.arange(3).sum()").ok
            warm.append(time.perf_counter() - started)
    return {
        "environment": name,
        "hash": environment.short_hash,
        "warm": list(environment.warm),
        "sandbox_run_p50_ms": round(1000 * statistics.median(warm), 2),
        "cold_python_p50_ms": round(1000 * statistics.median(cold), 2),
    }


def mixed_load(count: int) -> dict[str, object]:
    codes = snippets(count)
    for index in range(0, count, 10):
        codes[index] = HOSTILE[(index // 10) % len(HOSTILE)]
    limits = Limits(timeout_s=1, memory_mb=256, output_bytes=1 << 16)
    with Sandbox(limits=limits, workers=WORKERS) as sb:
        started = time.perf_counter()
        results = sb.map_python(codes)
        elapsed = time.perf_counter() - started
        clean = sb.run_python("import os; print(len(os.listdir('.')), len(os.listdir('/proc')))")
    statuses: dict[str, int] = {}
    for result in results:
        statuses[result.status] = statuses.get(result.status, 0) + 1
    benign_ok = sum(r.ok for i, r in enumerate(results) if i % 10)
    return {
        "snippets": count,
        "hostile": len(range(0, count, 10)),
        "per_s": round(count / elapsed, 1),
        "benign_ok": benign_ok,
        "statuses": statuses,
        "next_run_clean": clean.ok,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--snippets", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--snapshot-files", type=int, default=50)
    parser.add_argument("--env", default=None, help="an environment with numpy, for environment_import")
    parser.add_argument("--only", default=None, help="comma-separated sections: rates, workspace, environment")
    args = parser.parse_args()
    sections = set(args.only.split(",")) if args.only else {"rates", "workspace", "environment"}
    if sections - {"rates", "workspace", "environment"}:
        parser.error(
            f"--only: unknown section(s) {', '.join(sorted(sections - {'rates', 'workspace', 'environment'}))}"
        )
    load_before = os.getloadavg()[0]
    report: dict = {"bench": "sandbox"}
    if sections == {"rates", "workspace", "environment"}:
        report.update(rates(args, snapshot_and_reset=True))
        report["environment_import"] = environment_import(args.env) if args.env else None
        report["mixed_load"] = mixed_load(200)
    else:
        if "rates" in sections:
            report.update(rates(args, snapshot_and_reset=False))
        if "workspace" in sections:
            with Sandbox(limits=Limits(timeout_s=10, memory_mb=512), workers=1) as sb:
                sb.run(["true"])
                report["workspace_reset"] = workspace_reset(sb)
        if "environment" in sections and args.env:
            report["environment_import"] = environment_import(args.env)
    report["load_average_1m"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    print(json.dumps(report))


def rates(args: argparse.Namespace, snapshot_and_reset: bool) -> dict:
    """Sandbox vs plain subprocess rates (alternating rounds), CPU per snippet, cold start; with
    ``snapshot_and_reset`` also the snapshot and workspace-reset times on the same warm sandbox."""
    python = find_python()
    codes = snippets(args.snippets)
    plain_rates, box_rates, plain_lat, box_lat = [], [], [], []
    extra = {}
    with Sandbox(limits=Limits(timeout_s=10, memory_mb=512), workers=WORKERS) as sb:
        sb.map_python(codes[:50])
        plain_round(python.executable, codes[:20])
        for _ in range(args.rounds):
            rate, lat = plain_round(python.executable, codes)
            plain_rates.append(rate)
            plain_lat += lat
            rate, lat = sandbox_round(sb, codes)
            box_rates.append(rate)
            box_lat += lat
        if snapshot_and_reset:
            extra = {"snapshot": snapshot_times(sb, args.snapshot_files), "workspace_reset": workspace_reset(sb)}
    plain_rate, box_rate = statistics.median(plain_rates), statistics.median(box_rates)
    return {
        "workers": WORKERS,
        "python": python.executable,
        "python_version": python.version,
        "snippets_per_round": args.snippets,
        "rounds": args.rounds,
        "plain_subprocess": {"per_s": round(plain_rate, 1), **_percentiles(plain_lat)},
        "sandbox": {"per_s": round(box_rate, 1), **_percentiles(box_lat)},
        "ratio": round(box_rate / plain_rate, 2),
        "cpu_per_snippet": cpu_per_snippet(python.executable, codes),
        "cold_start_ms": cold_start(python.executable),
        **extra,
    }


if __name__ == "__main__":
    main()
