"""``start_isolated_process``: a long-lived boxed process gets every limit of its ``Limits`` record."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

import pytest

from veriloop.core import UserError
from veriloop.sandbox import Limits, start_isolated_process

REPORT = """
import json, os, resource, socket, sys
limits = {name: resource.getrlimit(getattr(resource, "RLIMIT_" + name)) for name in ("NPROC", "AS", "NOFILE", "FSIZE")}
tmp = os.statvfs("/tmp")
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2)
    reached = True
except OSError:
    reached = False
print(json.dumps({"limits": limits, "tmp_bytes": tmp.f_blocks * tmp.f_frsize, "pid": os.getpid(),
                  "reached": reached, "home": os.path.exists(os.path.expanduser("~root/.bash_history")),
                  "request": sys.stdin.readline().strip()}))
"""


def test_the_process_runs_boxed_under_its_limits():
    limits = Limits(memory_mb=1024, max_processes=16, max_open_files=128, max_file_mb=4, disk_mb=8)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    process = start_isolated_process([sys.executable, "-I", "-c", REPORT, str(port)], limits)
    try:
        out, _ = process.communicate(b"hello\n", timeout=60)
    finally:
        listener.close()
    report = json.loads(out)
    mib = 1 << 20
    assert report["limits"] == {"NPROC": [16, 16], "AS": [1024 * mib] * 2, "NOFILE": [128, 128], "FSIZE": [4 * mib] * 2}
    assert report["tmp_bytes"] == 8 * mib
    assert report["pid"] == 1 and report["request"] == "hello"
    assert not report["reached"] and not report["home"]
    assert process.returncode == 0


def test_the_file_size_limit_never_exceeds_the_private_tmp():
    limits = Limits(max_file_mb=64, disk_mb=2)
    code = "import resource; print(resource.getrlimit(resource.RLIMIT_FSIZE)[0])"
    process = start_isolated_process([sys.executable, "-I", "-c", code], limits)
    out, _ = process.communicate(timeout=60)
    assert int(out) == 2 << 20


def test_nothing_of_the_host_is_writable(tmp_path):
    target = tmp_path / "planted"
    code = f"open({str(target)!r}, 'w').write('x')"
    process = start_isolated_process([sys.executable, "-I", "-c", code], Limits())
    process.communicate(timeout=60)
    assert process.returncode != 0 and not os.path.exists(target)


SERVE_ONE = """
import os, socket
try:
    open("/shown/planted", "w")
except OSError as exc:
    print("read-only:", exc.errno, flush=True)
listener = socket.socket(socket.AF_UNIX)
listener.bind("/bound/box.sock")
listener.listen(1)
print("listening", open("/shown/note.txt").read(), flush=True)
connection, _ = listener.accept()
connection.sendall(b"hello from the box")
connection.close()
"""


def test_a_bound_directory_carries_a_unix_socket_out_of_the_box_and_a_read_only_one_stays_so(tmp_path):
    bound, shown = tmp_path / "bound", tmp_path / "shown"
    bound.mkdir()
    shown.mkdir()
    (shown / "note.txt").write_text("visible")
    process = start_isolated_process(
        [sys.executable, "-I", "-c", SERVE_ONE], Limits(), binds={str(bound): "/bound"}, ro_binds={str(shown): "/shown"}
    )
    try:
        assert process.stdout.readline().split()[:2] == [b"read-only:", b"30"]  # EROFS
        assert process.stdout.readline() == b"listening visible\n"
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(str(bound / "box.sock"))
            assert client.recv(100) == b"hello from the box"
    finally:
        process.kill()
        process.wait()
    assert not (shown / "planted").exists()


def test_the_callers_variables_and_the_hosts_interpreter_are_in_the_box():
    code = "import os, sys; print(os.environ['GREETING'], sys.prefix, os.environ['HOME'])"
    process = start_isolated_process(["python", "-I", "-c", code], Limits(), env={"GREETING": "hello"})
    out, _ = process.communicate(timeout=60)
    assert out.decode().split() == ["hello", sys.prefix, "/tmp"]  # `python` is the host's, with its packages


def test_stderr_comes_back_when_kept():
    code = "import sys; sys.stderr.write('trouble'); print('fine')"
    process = start_isolated_process([sys.executable, "-I", "-c", code], Limits(), keep_stderr=True)
    out, err = process.communicate(timeout=60)
    assert (out, err) == (b"fine\n", b"trouble")


def test_a_cpu_budget_binds_for_the_whole_life_and_only_when_asked():
    code = "import resource; print(resource.getrlimit(resource.RLIMIT_CPU)[0])"
    unset = start_isolated_process([sys.executable, "-I", "-c", code], Limits())
    assert int(unset.communicate(timeout=60)[0]) == -1  # RLIM_INFINITY: a process's life has no budget by default
    spin = "import sys; print('started', flush=True); sys.stdin.readline()\nwhile True: pass"
    process = start_isolated_process([sys.executable, "-I", "-c", spin], Limits(cpu_s=0.5))
    process.stdin.write(b"go\n")
    process.stdin.flush()
    out, _ = process.communicate(timeout=60)
    assert out == b"started\n" and process.returncode == 128 + 9  # SIGKILL at ceil(cpu_s) CPU seconds


def test_on_an_environment_the_box_sees_it_and_nothing_of_the_hosts_packages(wheel_environment):
    import veriloop

    source = str(Path(veriloop.__file__).resolve().parents[1])
    code = (
        "import json, os, sys\n"
        "import vl_wheel_pkg\n"
        "def importable(name):\n"
        "    try:\n"
        "        __import__(name)\n"
        "        return True\n"
        "    except ImportError:\n"
        "        return False\n"
        "print(json.dumps({'value': vl_wheel_pkg.VALUE, 'prefix': sys.prefix, 'venv': os.path.exists(sys.argv[1]),"
        " 'source': os.path.exists(sys.argv[2]), 'mcp': importable('mcp'), 'veriloop': importable('veriloop')}))"
    )
    process = start_isolated_process(["python", "-I", "-c", code, sys.prefix, source], Limits(), environment="vl-wheel")
    out, _ = process.communicate(timeout=60)
    report = json.loads(out)
    assert report == {
        "value": 7,
        "prefix": wheel_environment.path,
        "venv": False,
        "source": False,
        "mcp": False,
        "veriloop": False,
    }


def test_an_environment_that_is_not_built_is_named(env_store):
    with pytest.raises(UserError, match="not built"):
        start_isolated_process(["python", "-c", "pass"], Limits(), environment="vl-never-built")
