"""What one isolated snippet costs the machine, in counts that do not depend on its load.

Runs ``--snippets`` snippets through ``Sandbox(workers=2).map_python`` (after 50 to warm up)
and prints one JSON line: the snippets run, and a run's own anonymous memory and page-table
size (what each clone of the template copies page tables for, and each exit frees). Run it
under ``perf stat`` to count system calls and context switches of every process of the tree:

    perf stat -e raw_syscalls:sys_enter,context-switches -- .venv/bin/python bench/sandbox_per_run.py

and divide by ``runs`` (the sandboxes' start is included; it is small beside 1,000 runs).
"""

from __future__ import annotations

import argparse
import json

from veriloop.sandbox import Sandbox

MEMORY_PROBE = "print(''.join(l for l in open('/proc/self/status') if l.startswith(('RssAnon', 'VmPTE'))))"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--snippets", type=int, default=1000)
    args = parser.parse_args()
    codes = [f"print(sum(i * i for i in range({100 + k})))" for k in range(args.snippets)]
    with Sandbox(workers=2) as sb:
        sb.map_python(codes[:50])
        results = sb.map_python(codes)
        assert all(r.ok for r in results), [r for r in results if not r.ok][:1]
        probe = sb.run_python(MEMORY_PROBE).stdout.split()
    memory = {probe[i].rstrip(":"): int(probe[i + 1]) for i in range(0, len(probe), 3)}
    print(json.dumps({"bench": "sandbox_per_run", "runs": args.snippets + 51, "run_memory_kb": memory}))


if __name__ == "__main__":
    main()
