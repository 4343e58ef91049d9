"""The Python API: runs, files, stdin, snapshots, pools, asyncio, languages, and bad input."""

from __future__ import annotations

import asyncio
import os
import resource
from pathlib import Path

import pytest
from pydantic import ValidationError

from veriloop.core import ExecResult as CoreExecResult
from veriloop.core import UnknownNameError, UserError
from veriloop.sandbox import BACKENDS, LANGUAGES, ExecResult, Limits, Sandbox, Snapshot, run_code


def test_public_names_are_the_design_names():
    assert ExecResult is CoreExecResult
    assert {"bwrap", "remote"} <= set(BACKENDS)
    assert {"python", "bash", "c", "cpp"} <= set(LANGUAGES)


def test_run_python_behaves_like_python_dash_c(sandbox):
    assert sandbox.run_python("print(6 * 7)").stdout == "42\n"
    failed = sandbox.run_python("def f():\n    1 / 0\nf()")
    assert (failed.status, failed.exit_code) == ("error", 1)
    assert failed.stderr.splitlines()[0] == "Traceback (most recent call last):"
    assert failed.stderr.splitlines()[-1] == "ZeroDivisionError: division by zero"
    assert "run_python" not in failed.stderr  # the server's own frames are not shown
    syntax = sandbox.run_python("x = (")
    assert syntax.status == "error" and "SyntaxError" in syntax.stderr
    assert sandbox.run_python("import sys; sys.exit(3)").exit_code == 3
    assert sandbox.run_python("raise SystemExit('bye')").stderr == "bye\n"
    assert sandbox.run_python("import os; print(os.getcwd(), __name__)").stdout == "/workspace __main__\n"


def test_run_commands(sandbox):
    assert sandbox.run(["python3", "-c", "print(1)"]).stdout == "1\n"
    assert sandbox.run("echo $((2 + 3)) | cat").stdout == "5\n"
    missing = sandbox.run(["no-such-program"])
    assert (missing.status, missing.exit_code) == ("error", 127)
    assert "no-such-program" in missing.detail
    killed = sandbox.run(["sh", "-c", "kill -SEGV $$"])
    assert (killed.status, killed.exit_code) == ("killed", None)
    assert "SIGSEGV" in killed.detail


def test_files_make_a_multi_file_workspace(sandbox):
    files = {"pkg/__init__.py": "", "pkg/util.py": "def double(x):\n    return 2 * x\n", "data/in.txt": b"\x00\x01"}
    result = sandbox.run_python(
        "from pkg.util import double\nprint(double(21), open('data/in.txt', 'rb').read())", files=files
    )
    assert result.stdout == "42 b'\\x00\\x01'\n"
    shell = sandbox.run(["sh", "-c", "cat a.txt b/c.txt"], files={"a.txt": "A", "b/c.txt": "C"})
    assert shell.stdout == "AC"


def test_stdin_text_bytes_and_large(sandbox):
    assert sandbox.run_python("print(input()[::-1])", stdin="abc\n").stdout == "cba\n"
    assert sandbox.run(["wc", "-c"], stdin=b"\xff" * 10).stdout.strip() == "10"
    big = "x" * (3 << 20)
    assert sandbox.run_python("import sys; print(len(sys.stdin.read()))", stdin=big).stdout == f"{len(big)}\n"
    assert sandbox.run(["cat"]).stdout == ""  # no stdin: end of file at once


def test_snapshots_capture_and_restore_a_workspace(sandbox):
    first = sandbox.run(
        [
            "sh",
            "-c",
            "mkdir -p d && echo one > d/a.txt && printf '#!/bin/sh\\necho ran\\n' > run.sh && chmod +x run.sh",
        ],
        capture=True,
    )
    assert first.ok and isinstance(first.snapshot, Snapshot)
    assert first.snapshot.files() == {"d/a.txt": b"one\n", "run.sh": b"#!/bin/sh\necho ran\n"}
    second = sandbox.run(
        ["sh", "-c", "cat d/a.txt && ./run.sh && echo two >> d/a.txt"], snapshot=first.snapshot, capture=True
    )
    assert second.stdout == "one\nran\n"
    assert second.snapshot.files()["d/a.txt"] == b"one\ntwo\n"
    assert first.snapshot.files()["d/a.txt"] == b"one\n"  # a snapshot never changes
    again = sandbox.run_python("print(open('d/a.txt').read())", snapshot=first.snapshot, files={"extra": "e"})
    assert again.stdout == "one\n\n"
    assert sandbox.run_python("import os; print(os.listdir('.'))").stdout == "[]\n"
    restored = CoreExecResult.model_validate_json(second.model_dump_json())
    assert restored.snapshot == second.snapshot


def test_per_run_limits_override_the_sandbox_limits(sandbox, limits):
    small = limits.model_copy(update={"memory_mb": 64})
    assert sandbox.run_python("x = bytearray(100 << 20)", limits=small).status == "memory_limit"
    assert sandbox.run_python("x = bytearray(100 << 20)").ok


def test_map_python_keeps_order_and_mixes_outcomes(sandbox, quick):
    codes = [f"print({i})" for i in range(20)] + ["raise ValueError", "while True: pass"]
    results = sandbox.map_python(codes, limits=quick)
    assert [r.stdout for r in results[:20]] == [f"{i}\n" for i in range(20)]
    assert [r.status for r in results[20:]] == ["error", "timeout"]


async def test_asyncio_runs_concurrently_without_blocking(sandbox):
    results = await asyncio.gather(*(sandbox.arun_python(f"print({i})") for i in range(6)))
    assert [r.stdout for r in results] == [f"{i}\n" for i in range(6)]
    shell = await sandbox.arun(["echo", "hi"])
    assert shell.stdout == "hi\n"


@pytest.mark.parametrize(
    "files",
    [{"/etc/passwd": "x"}, {"../up": "x"}, {"a/../../b": "x"}, {"": "x"}, {"nul\x00": "x"}],
    ids=["absolute", "dotdot", "nested-dotdot", "empty", "nul"],
)
def test_bad_file_names_are_user_errors(sandbox, files):
    with pytest.raises(UserError, match="file name"):
        sandbox.run_python("pass", files=files)


def test_other_bad_input_is_a_user_error(sandbox, limits):
    with pytest.raises(UserError, match="disk_mb"):
        sandbox.run_python("pass", files={"big": b"x" * ((limits.disk_mb << 20) + 1)})
    with pytest.raises(UserError, match="needs a command"):
        sandbox.run([])
    with pytest.raises(UserError, match="must be a str"):
        sandbox.run_python(b"print(1)")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="workers"):
        Sandbox(workers=0)
    with pytest.raises(UnknownNameError, match="known: .*bwrap"):
        Sandbox(backend="docker")
    with pytest.raises(UserError, match="url"):
        Sandbox(backend="remote")
    with pytest.raises(ValidationError):
        Limits(timeout_s=-1)


def test_a_closed_sandbox_refuses_work():
    box = Sandbox()
    box.close()
    with pytest.raises(UserError, match="closed"):
        box.run_python("print(1)")


def test_languages(sandbox):
    bash = run_code(sandbox, "bash", "read x; echo $((x * 2))", stdin="21\n")
    assert bash.ok and bash.build is None and bash.run.stdout == "42\n"
    c_program = '#include <stdio.h>\nint main(void) { int a, b; scanf("%d %d", &a, &b); printf("%d\\n", a + b); }'
    c = run_code(sandbox, "c", c_program, stdin="2 40")
    assert c.ok and c.build.ok and c.run.stdout == "42\n"
    cpp = run_code(sandbox, "cpp", "#include <iostream>\nint main() { std::cout << 42 << std::endl; }")
    assert cpp.ok and cpp.run.stdout == "42\n"
    broken = run_code(sandbox, "cpp", "int main() { return undefined_name; }")
    assert not broken.ok and broken.run is None and "undefined_name" in broken.build.stderr
    fetched = run_code(sandbox, "python", "open('out.txt', 'w').write('made')", fetch=["out.txt", "absent"])
    assert fetched.ok and fetched.files == {"out.txt": b"made"}
    with pytest.raises(UnknownNameError, match="known: bash"):
        run_code(sandbox, "cobol", "DISPLAY 'HI'.")


def test_the_interpreter_inside_must_not_be_a_virtual_environment():
    import sys

    with pytest.raises(UserError, match="virtual environment"):
        Sandbox(python=sys.executable)
    with pytest.raises(UserError, match="does not run"):
        Sandbox(python="/no/such/python3")


def test_a_run_whose_sandbox_goes_away_says_so():
    """A sandbox that breaks under a run is a flag on the result, not a guess from its text."""
    import threading
    import time

    from veriloop.sandbox import Limits, Sandbox

    sandbox = Sandbox(limits=Limits(timeout_s=20), workers=1)
    assert sandbox.run_python("print(1)").sandbox_replaced is False
    results = []
    runner = threading.Thread(target=lambda: results.append(sandbox.run_python("import time; time.sleep(15)")))
    runner.start()
    time.sleep(1.0)
    sandbox.close()
    runner.join(timeout=30)
    [result] = results
    assert result.status == "killed" and result.sandbox_replaced


def test_each_python_run_starts_from_the_state_of_python_dash_c(limits):
    """The template sets up ``__main__``, ``sys.argv`` and stdio once (each run puts its working
    directory first on ``sys.path``); what one run changes of them stays in its own copy, so the
    next run on the same server finds them fresh."""
    spoil = (
        "import sys, io\nleftover = 1\nsys.modules['__main__'].extra = 2\nsys.argv.append('spoilt')\n"
        "sys.path.insert(0, '/spoilt')\nsys.modules['__main__'] = None\nsys.stdout = io.StringIO()\n"
    )
    check = (
        "import sys\n"
        "print(sys.argv, sys.path[0] == '', '/spoilt' in sys.path, sys.modules['__main__'].__dict__ is globals(),\n"
        "      'leftover' in globals() or 'extra' in globals(), sys.stdout is sys.__stdout__, sys.stdout.fileno())"
    )
    with Sandbox(limits=limits, workers=1) as box:
        assert box.run_python(spoil).ok
        assert box.run_python(check).stdout == "['-c'] True False True False True 1\n"


def test_code_arguments_and_file_names_keep_every_character(sandbox):
    """Code, command arguments and file names reach the run's process as they were sent,
    outside ASCII and the Basic Multilingual Plane and (arguments) not UTF-8 at all."""
    code = "print('é\U0001f600\u0301', len('é\U0001f600\u0301'))"
    assert sandbox.run_python(code).stdout == "é\U0001f600\u0301 3\n"
    undecodable = b"\xff-x".decode("utf-8", "surrogateescape")
    args = sandbox.run(
        ["python3", "-c", "import os, sys; print([os.fsencode(a) for a in sys.argv[1:]])", "é", undecodable]
    )
    assert args.stdout == "[b'\\xc3\\xa9', b'\\xff-x']\n"
    files = {"dossier/é\U0001f600.txt": "a", "plain.txt": b"\x00"}
    listed = sandbox.run_python(
        "import os; print(sorted(os.listdir('dossier')), open('plain.txt', 'rb').read())", files=files
    )
    assert listed.stdout == "['é\U0001f600.txt'] b'\\x00'\n"


def _descendants(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            found += [int(child), *_descendants(int(child))]
    return found


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.e2e
def test_a_closed_sandbox_reaps_every_process_so_its_cpu_time_is_counted(limits):
    """Closing a sandbox asks its idle server to end: it reaps its template and the process kept
    for the next run, so the host's children's CPU time (what the benchmarks count) includes
    every process of the sandbox, the template's too, and the server ends rather than being
    killed."""
    with Sandbox(limits=limits, workers=1) as box:
        results = box.map_python(["print(sum(range(100)))"] * 600)
        [handle] = box._backend._servers
        bubblewrap = handle._proc
        sandbox_processes = _descendants(bubblewrap.pid)
        assert len(sandbox_processes) >= 2  # the server and its template
        spent = sum(map(_cpu_s, sandbox_processes)) + sum(result.cpu_s for result in results)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    reaped = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    assert bubblewrap.returncode == 0
    assert reaped >= spent - 0.05  # /proc counts in 10 ms ticks
