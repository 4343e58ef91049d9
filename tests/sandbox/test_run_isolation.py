"""No run may see or shape another: two consecutive runs on one warm server are strangers.

Every test runs on a sandbox with one worker, so the attacking run and the run after it land on
the same server. Each checks that the later run finds nothing of the earlier one (its code,
stdin, files, outputs in its memory; changed limits, priorities, affinity, OOM score or sysctls;
sockets), and that the honest counterpart of each attack still works.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator

import pytest

from veriloop.sandbox import Limits, Sandbox, SandboxUnavailable

LIMITS = Limits(timeout_s=10, memory_mb=256, max_processes=16, max_open_files=64, disk_mb=8)

# Scans the run's own readable memory for markers of the shape vl-earlier-<12 hex>. The pattern
# holds no such marker itself, so every match comes from somewhere else.
MEMORY_SCAN = r"""
import json, re
found = set()
pattern = re.compile(rb"vl-earlier-[0-9a-f]{12}")
with open('/proc/self/maps') as maps, open('/proc/self/mem', 'rb', buffering=0) as mem:
    for line in maps:
        fields = line.split()
        if 'r' not in fields[1] or (len(fields) > 5 and fields[5] in ('[vvar]', '[vsyscall]', '[vvar_vclock]')):
            continue
        start, end = (int(part, 16) for part in fields[0].split('-'))
        try:
            mem.seek(start)
            chunk = mem.read(end - start)
        except (OSError, OverflowError, ValueError):
            continue
        found.update(match.decode() for match in pattern.findall(chunk))
print(json.dumps(sorted(found)))
"""


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    try:
        sandbox = Sandbox(limits=LIMITS, workers=1)
    except SandboxUnavailable as exc:
        pytest.skip(f"no sandbox on this machine: {exc}")
    with sandbox:
        yield sandbox


def _marker() -> str:
    return "vl-earlier-" + secrets.token_hex(6)


# ---- memory of earlier runs --------------------------------------------------------------


def test_a_run_finds_nothing_of_earlier_runs_in_its_memory(box):
    code, stdin, stdout, stderr, file = (_marker() for _ in range(5))
    earlier = box.run_python(
        f"import sys\nsecret = {code!r}\ndata = sys.stdin.read()\nprint({stdout!r})\n"
        f"print({stderr!r}, file=sys.stderr)\nprint(open('given.txt').read(), data)",
        stdin=stdin,
        files={"given.txt": file},
    )
    assert earlier.ok, earlier
    assert stdout in earlier.stdout and stdin in earlier.stdout and file in earlier.stdout
    for _ in range(3):  # later runs too: nothing accumulates in what runs are copied from
        later = box.run_python(MEMORY_SCAN)
        assert later.ok, later
        assert set(json.loads(later.stdout)).isdisjoint({code, stdin, stdout, stderr, file}), later.stdout


def test_a_run_still_finds_its_own_data_in_its_memory(box):
    own = _marker()
    result = box.run_python(f"kept = {own!r}\n" + MEMORY_SCAN)
    assert result.ok, result
    assert own in json.loads(result.stdout)  # the scan works: it sees this run's own code


def test_a_run_cannot_end_the_process_runs_are_copied_from(box):
    attack = box.run_python(
        "import os, signal\nkilled = []\n"
        "for pid in sorted(int(p) for p in os.listdir('/proc') if p.isdigit()):\n"
        "    if pid not in (1, os.getpid()):\n"
        "        for target in (pid, -pid):\n"
        "            try:\n                os.kill(target, signal.SIGKILL); killed.append(target)\n"
        "            except OSError:\n                pass\n"
        "print(killed)"
    )
    assert attack.ok, attack
    assert attack.stdout.strip() == "[]"
    after = box.run_python("print('fine')")
    assert after.stdout == "fine\n" and not after.sandbox_replaced
