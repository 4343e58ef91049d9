"""Math answer checks per second per core: veriloop's ``math`` kind against plain math-verify.

Both sides check the same corpus of ordinary answers in one run:

* reference: ``math_verify.parse`` of gold and answer, then ``math_verify.verify``, in the main
  thread with math-verify's own (signal-based, main-thread-only) timeouts;
* veriloop: ``veriloop.verifiers.verify`` on a ``math`` task, sequentially from one thread, with
  its hard timeouts (a killable worker process; works from any thread).

"per core" divides checks by the CPU seconds used by every process involved (caller and
workers), so the figure does not depend on how busy the shared machine is. A threaded run
(``--threads``, default 2) reports wall-clock throughput with that many callers and workers.
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


SHAPES = ("boxed_integer", "gsm8k_integer", "fraction", "decimal", "latex_surd", "negative_integer")


def corpus(size: int, seed: int) -> list[tuple[str, str]]:
    """``(gold, response)`` pairs, one shape of ``SHAPES`` in turn at random; about a third wrong."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(size):
        a, b = rng.randint(1, 999), rng.randint(2, 97)
        wrong = rng.random() < 0.35
        shape = rng.randrange(6)
        if shape == 0:
            gold, shown = str(a), str(a + wrong)
            response = f"Adding the parts gives {shown}.\nThe answer is \\boxed{{{shown}}}."
        elif shape == 1:
            gold, shown = str(a * b), str(a * b + wrong)
            response = f"Natalia sold {a} clips in {b} batches.\n#### {shown}"
        elif shape == 2:
            gold, shown = f"\\frac{{{a}}}{{{b}}}", f"{a + wrong}/{b}"
            response = f"Simplifying, the ratio is $\\boxed{{{shown}}}$"
        elif shape == 3:
            gold, shown = f"{a / 8:g}", f"{(a + wrong) / 8:g}"
            response = f"So the final answer is {shown}"
        elif shape == 4:
            gold, shown = f"{a}\\sqrt{{{b}}}", f"{a + wrong}\\sqrt{{{b}}}"
            response = f"Hence the length is $\\boxed{{{shown}}}$."
        else:
            gold, shown = str(-a), str(-a - wrong)
            response = f"Therefore x = {shown}"
        pairs.append((gold, response))
    return pairs


def _process_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_reference(pairs: list[tuple[str, str]]) -> dict[str, float]:
    from math_verify import parse, verify

    verdicts, elapsed = [], []
    wall, cpu = time.perf_counter(), _self_cpu()
    for gold, response in pairs:
        started = time.perf_counter()
        verdicts.append(bool(verify(parse(f"${gold}$"), parse(response))))
        elapsed.append(time.perf_counter() - started)
    wall, cpu = time.perf_counter() - wall, _self_cpu() - cpu
    return {
        "checks_per_s_per_core": len(pairs) / cpu,
        "wall_s": wall,
        "cpu_s": cpu,
        "correct": sum(verdicts),
        "verdicts": verdicts,
        "elapsed": elapsed,
    }


def _tasks(pairs):
    from veriloop.core import Response, Task

    for index, (gold, response) in enumerate(pairs):
        task = Task(id=f"m{index}", domain="math", prompt="p", verifier={"kind": "math"}, gold=gold)
        yield task, Response(id=f"r{index}", task_id=task.id, response=response)


def run_veriloop(pairs: list[tuple[str, str]], threads: int) -> dict[str, float]:
    from veriloop.verifiers import set_check_workers, verify
    from veriloop.verifiers.answers._math import MATH_CHECK
    from veriloop.verifiers.answers._check_pool import shared_pool

    set_check_workers(1)
    pool = shared_pool(MATH_CHECK)
    pool.warm()
    checks = list(_tasks(pairs))
    (worker_pid,) = pool.worker_pids()
    scores, elapsed = [], []
    worker_cpu, wall, cpu = _process_cpu(worker_pid), time.perf_counter(), _self_cpu()
    for task, response in checks:
        started = time.perf_counter()
        scores.append(verify(task, response))
        elapsed.append(time.perf_counter() - started)
    wall, cpu = time.perf_counter() - wall, _self_cpu() - cpu
    worker_cpu = _process_cpu(worker_pid) - worker_cpu
    infra = sum(s.status != "scored" for s in scores)

    set_check_workers(threads)
    shared_pool(MATH_CHECK).warm()
    shares = [checks[i::threads] for i in range(threads)]
    threaded_wall = time.perf_counter()
    runners = [threading.Thread(target=lambda share=share: [verify(t, r) for t, r in share]) for share in shares]
    for runner in runners:
        runner.start()
    for runner in runners:
        runner.join()
    threaded_wall = time.perf_counter() - threaded_wall
    set_check_workers(None)
    return {
        "checks_per_s_per_core": len(pairs) / (cpu + worker_cpu),
        "checks_per_s_wall_1_worker": len(pairs) / wall,
        f"checks_per_s_wall_{threads}_threads": len(pairs) / threaded_wall,
        "wall_s": wall,
        "cpu_s_caller": cpu,
        "cpu_s_worker": worker_cpu,
        "correct": sum(s.passed for s in scores),
        "infra_errors": infra,
        "verdicts": [s.passed for s in scores],
        "elapsed": elapsed,
    }


def per_shape(pairs, ours: list[float], reference: list[float]) -> dict[str, dict[str, float]]:
    """Sequential wall-clock rate of each answer shape, both sides (one core each, timed per call)."""
    totals: dict[str, list[float]] = {}
    for (gold, response), mine, theirs in zip(pairs, ours, reference):
        entry = totals.setdefault(shape_of(gold, response), [0, 0.0, 0.0])
        entry[0] += 1
        entry[1] += mine
        entry[2] += theirs
    return {
        shape: {"checks": n, "veriloop": round(n / mine, 1), "math_verify": round(n / theirs, 1)}
        for shape, (n, mine, theirs) in sorted(totals.items())
    }


def shape_of(gold: str, response: str) -> str:
    if "sqrt" in gold:
        return "latex_surd"
    if "frac" in gold:
        return "fraction"
    if "####" in response:
        return "gsm8k_integer"
    if "final answer" in response:
        return "decimal"
    if "x =" in response:
        return "negative_integer"
    return "boxed_integer"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    pairs = corpus(args.size, args.seed)
    reference = run_reference(pairs)
    ours = run_veriloop(pairs, args.threads)
    agree = sum(a == b for a, b in zip(ours.pop("verdicts"), reference.pop("verdicts")))
    shapes = per_shape(pairs, ours.pop("elapsed"), reference.pop("elapsed"))
    print(
        json.dumps(
            {
                "bench": "verify_math",
                "checks": len(pairs),
                "veriloop_checks_per_s_per_core": round(ours["checks_per_s_per_core"], 1),
                "math_verify_checks_per_s_per_core": round(reference["checks_per_s_per_core"], 1),
                "ratio": round(ours["checks_per_s_per_core"] / reference["checks_per_s_per_core"], 2),
                "target_checks_per_s_per_core": 1000,
                "verdicts_agree": round(agree / len(pairs), 4),
                "hard_timeouts": {
                    "veriloop": "killable worker process, any thread",
                    "math_verify": "SIGALRM, main thread only",
                },
                "per_shape_checks_per_s_wall": shapes,
                "veriloop": {k: round(v, 3) for k, v in ours.items()},
                "math_verify": {k: round(v, 3) for k, v in reference.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
