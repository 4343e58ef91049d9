"""Adversarial suite: one section per category of the sandbox threat model (docs/architecture.md).

Each test runs hostile code and checks containment from the host side.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

import pytest


def _assert_next_run_clean(sandbox) -> None:
    probe = sandbox.run_python(
        "import os\n"
        "procs = [p for p in os.listdir('/proc') if p.isdigit()]\n"
        "print(len(procs), sorted(os.listdir('.')), sorted(os.listdir('/tmp')), sorted(os.listdir('/dev/shm')))"
    )
    assert probe.ok, probe
    assert probe.stdout.split()[0] == "3"  # the sandbox server, its template and this probe
    assert probe.stdout.strip().endswith("[] [] []")


# ---- network access, host loopback included ---------------------------------------------


def test_no_connection_reaches_a_host_listener(sandbox, listener):
    code = (
        "import socket\n"
        f"for host in ('127.0.0.1', 'localhost', '::1', '0.0.0.0'):\n"
        "    try:\n"
        f"        socket.create_connection((host, {listener.port}), timeout=0.5)\n"
        "        print('CONNECTED', host)\n"
        "    except OSError as exc:\n"
        "        print('refused', host, exc.errno)\n"
        "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        f"try: u.sendto(b'x', ('127.0.0.1', {listener.port}))\n"
        "except OSError: pass\n"
    )
    result = sandbox.run_python(code)
    assert "CONNECTED" not in result.stdout
    assert not listener.was_reached()


def test_no_route_to_the_outside_world(sandbox):
    result = sandbox.run_python(
        "import socket\n"
        "for addr in (('1.1.1.1', 53), ('8.8.8.8', 443)):\n"
        "    try:\n"
        "        socket.create_connection(addr, timeout=0.5); print('CONNECTED')\n"
        "    except OSError as exc:\n"
        "        print('unreachable', exc.errno)\n"
        "print(sorted(n for _, n in socket.if_nameindex()))"
    )
    assert "CONNECTED" not in result.stdout
    assert result.stdout.strip().endswith("['lo']")


def test_host_abstract_unix_socket_is_out_of_reach(sandbox, marker):
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind("\0" + marker)
    server.listen(1)
    server.setblocking(False)
    try:
        result = sandbox.run_python(
            "import socket\ns = socket.socket(socket.AF_UNIX)\n"
            f"try:\n    s.connect('\\0{marker}'); print('CONNECTED')\nexcept OSError as exc:\n    print(exc.errno)"
        )
        assert "CONNECTED" not in result.stdout
        with pytest.raises(BlockingIOError):
            server.accept()
    finally:
        server.close()


def test_network_is_opt_in(listener, quick):
    from veriloop.sandbox import Sandbox

    with Sandbox(limits=quick, network=True) as networked:
        result = networked.run_python(
            f"import socket\nsocket.create_connection(('127.0.0.1', {listener.port}), timeout=2)\nprint('CONNECTED')"
        )
    assert result.stdout.strip() == "CONNECTED"
    assert listener.was_reached()


# ---- reading or writing outside the workspace ---------------------------------------------


def test_host_files_are_invisible(sandbox, tmp_path, host_secret):
    secret = tmp_path / "gold.jsonl"
    secret.write_text(f'{{"gold": "{host_secret}"}}\n')
    venv_site = next(Path(sys.prefix).glob("lib/python3*/site-packages"))
    places = [
        str(secret),
        str(tmp_path),
        os.getcwd(),
        str(Path.home()),
        str(venv_site),
        sys.prefix,
        str(Path(__file__).resolve()),
        "/work",
        "/root",
        "/run",
        "/var",
        "/etc/shadow",
        "/home",
    ]
    result = sandbox.run_python(
        "import os, sys\n"
        f"for place in {places!r}:\n"
        "    print(place, os.path.exists(place))\n"
        "for name in ('veriloop', 'pydantic', 'torch', 'pytest'):\n"
        "    try:\n        __import__(name); print('IMPORTED', name)\n"
        "    except ImportError:\n        pass\n"
    )
    assert result.ok, result
    lines = result.stdout.splitlines()
    assert all(line.endswith(" False") for line in lines[: len(places)]), result.stdout
    assert "IMPORTED" not in result.stdout
    assert host_secret not in result.stdout


def test_the_interpreter_sees_no_installed_packages(sandbox):
    listing = "import os, site; print(sum(len(os.listdir(d)) for d in site.getsitepackages() if os.path.isdir(d)))"
    result = sandbox.run(["python3", "-c", listing])
    assert result.ok, result
    assert result.stdout.strip() == "0"


def test_writes_outside_the_workspace_fail_and_never_reach_the_host(sandbox, tmp_path, marker):
    target = tmp_path / "pwned"
    host_tmp = Path("/tmp") / marker
    code = (
        "import os\n"
        f"for path in ({str(target)!r}, '/usr/{marker}', '/{marker}', '/etc/{marker}', '/proc/{marker}'):\n"
        "    try:\n        open(path, 'w').write('x'); print('WROTE', path)\n"
        "    except OSError as exc:\n        print('denied', path, exc.errno)\n"
        f"open('/tmp/{marker}', 'w').write('sandbox tmp is private')\n"
    )
    result = sandbox.run_python(code)
    assert "WROTE" not in result.stdout, result.stdout
    assert not target.exists()
    assert not host_tmp.exists()
    _assert_next_run_clean(sandbox)


def test_workspace_escape_through_symlinks_and_dotdot_is_contained(sandbox, tmp_path):
    result = sandbox.run(["sh", "-c", f"ln -s {tmp_path} link; echo x > link/escaped; mkdir -p ../../x; echo $?"])
    assert not (tmp_path / "escaped").exists()
    assert result.status in ("ok", "error")


# ---- environment variables and processes of the host ---------------------------------------


def test_host_environment_is_not_visible(sandbox, host_secret, limits):
    code = (
        "import json, os\n"
        "print(json.dumps(sorted(os.environ)))\n"
        "for pid in [p for p in os.listdir('/proc') if p.isdigit()]:\n"
        "    for name in ('environ', 'cmdline'):\n"
        "        try:\n            print(open(f'/proc/{pid}/{name}', 'rb').read())\n"
        "        except OSError as exc:\n            print(pid, name, exc.errno)\n"
    )
    roomy = limits.model_copy(update={"output_bytes": 1 << 20})  # /proc/1/cmdline is the server's source
    python = sandbox.run_python(code, limits=roomy)
    shell = sandbox.run(["sh", "-c", "env; cat /proc/1/environ"])
    assert python.ok, python
    for result in (python, shell):
        assert host_secret not in result.stdout + result.stderr
        assert "VERILOOP_TEST_host_secret" not in result.stdout
    names = set(json.loads(python.stdout.splitlines()[0]))
    threads = {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"}  # one BLAS thread per run
    assert names <= {"HOME", "LANG", "PATH", "PWD", "PYTHONDONTWRITEBYTECODE", "TMPDIR", "USER", *threads}


def test_host_processes_are_invisible_and_cannot_be_signalled(sandbox, host_sleeper):
    code = (
        "import os, signal\n"
        "print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))\n"
        f"for pid in ({host_sleeper.pid}, {os.getpid()}, {os.getppid()}):\n"
        "    try:\n        os.kill(pid, signal.SIGKILL); print('SIGNALLED', pid)\n"
        "    except OSError as exc:\n        print('no', pid, exc.errno)\n"
        "for pid in set(range(2, 4096)) - {os.getpid()}:\n"
        "    try:\n        os.kill(pid, signal.SIGKILL)\n"
        "    except OSError:\n        pass\n"
    )
    result = sandbox.run_python(code)
    assert "SIGNALLED" not in result.stdout
    visible = result.stdout.splitlines()[0]
    assert str(host_sleeper.pid) not in visible.strip("[]").split(", ")
    assert host_sleeper.poll() is None
    os.kill(host_sleeper.pid, 0)
    _assert_next_run_clean(sandbox)


def test_the_sandbox_server_cannot_be_killed_stopped_or_traced(sandbox):
    code = (
        "import ctypes, os, signal\n"
        "for sig in (signal.SIGKILL, signal.SIGSTOP, signal.SIGTERM, signal.SIGINT, signal.SIGSEGV, signal.SIGCHLD):\n"
        "    os.kill(1, sig)\n"
        "for path in ('/proc/1/mem', '/proc/1/environ', '/proc/1/fd/0'):\n"
        "    try:\n        open(path, 'rb').read(1); print('OPENED', path)\n"
        "    except OSError as exc:\n        print('denied', path, exc.errno)\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print('ptrace', libc.ptrace(16, 1, None, None), ctypes.get_errno())\n"
    )
    result = sandbox.run_python(code)
    assert result.ok, result
    assert "OPENED" not in result.stdout
    assert "ptrace -1 1" in result.stdout
    _assert_next_run_clean(sandbox)


# ---- CPU loops and sleeps --------------------------------------------------------------------


@pytest.mark.parametrize(
    "code",
    [
        "while True: pass",
        "import signal\nfor s in (signal.SIGXCPU, signal.SIGTERM, signal.SIGINT, signal.SIGALRM):\n"
        "    signal.signal(s, signal.SIG_IGN)\nwhile True: pass",
        "import time\ntime.sleep(60)",
        "import os\nif os.fork() == 0:\n    os.setsid()\n    while True: pass\nos.wait()",
    ],
    ids=["busy", "busy-ignoring-signals", "sleep", "busy-setsid"],
)
def test_wall_limit_stops_loops_and_sleeps(sandbox, code, quick):
    # A CPU budget above the wall limit: only the wall limit may end these runs. (At equal budgets a
    # busy child can meet its own CPU limit first, and the run that waited for it then exits 0.)
    result = sandbox.run_python(code, limits=quick.model_copy(update={"cpu_s": 5.0}))
    assert result.status == "timeout"
    assert "wall time limit" in result.detail
    _assert_next_run_clean(sandbox)


@pytest.mark.e2e
def test_cpu_limit_is_enforced_even_when_sigxcpu_is_ignored(sandbox, limits):
    limits = limits.model_copy(update={"timeout_s": 60.0, "cpu_s": 1.0})
    result = sandbox.run_python(
        "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True: pass", limits=limits
    )
    assert result.status == "timeout"
    assert "CPU" in result.detail


def test_background_cpu_burner_dies_with_the_run(sandbox, leftovers, marker):
    result = sandbox.run(
        ["bash", "-c", f"(trap '' TERM INT HUP; exec -a {marker} python3 -c 'while True: pass') & disown; echo started"]
    )
    assert result.ok, result
    assert leftovers(marker) == []


# ---- memory, process, thread, open-file, disk and output floods ------------------------------


def test_memory_flood_is_a_memory_limit(sandbox):
    result = sandbox.run_python("x = bytearray(1 << 30)\nprint('ALLOCATED')")
    assert result.status == "memory_limit"
    assert "ALLOCATED" not in result.stdout


def test_memory_flood_in_a_command_is_a_memory_limit(sandbox):
    result = sandbox.run(["python3", "-c", "x = [0] * (1 << 28)"])
    assert result.status == "memory_limit"


def test_memory_flood_across_processes_is_contained(sandbox, leftovers, marker, quick):
    code = (
        "import os, ctypes\n"
        f"ctypes.CDLL(None).prctl(15, b'{marker}', 0, 0, 0)\n"
        "for _ in range(30):\n"
        "    try:\n        pid = os.fork()\n    except OSError:\n        break\n"
        "    if pid == 0:\n"
        "        try:\n            x = bytearray(200 << 20)\n        except MemoryError:\n            pass\n"
        "        import time; time.sleep(30)\n"
    )
    result = sandbox.run_python(code, limits=quick)
    assert result.status in ("ok", "timeout", "memory_limit", "killed")
    assert leftovers(marker) == []
    _assert_next_run_clean(sandbox)


def test_fork_bomb_is_bounded_and_leaves_nothing(sandbox, leftovers, marker, quick):
    code = (
        "import ctypes, os\n"
        f"ctypes.CDLL(None).prctl(15, b'{marker}', 0, 0, 0)\n"
        "while True:\n"
        "    try:\n        os.fork()\n    except OSError:\n        pass\n"
    )
    result = sandbox.run_python(code, limits=quick)
    assert result.status == "timeout"
    assert leftovers(marker) == []
    _assert_next_run_clean(sandbox)


@pytest.mark.parametrize(
    "start",
    ["subprocess.Popen(['sleep', '30'])", "threading.Thread(target=stop.wait, daemon=True).start()"],
    ids=["processes", "threads"],
)
def test_process_and_thread_counts_are_limited(sandbox, limits, start):
    code = (
        "import subprocess, threading\nstop = threading.Event()\nstarted = 0\n"
        "try:\n"
        f"    for _ in range(500):\n        {start}; started += 1\n"
        "except (OSError, RuntimeError):\n    pass\n"
        "print(started)\nstop.set()\n"
    )
    result = sandbox.run_python(code)
    assert result.ok, result
    assert int(result.stdout) < limits.max_processes


def test_open_files_are_limited(sandbox, limits):
    result = sandbox.run_python(
        "files = []\ntry:\n    while True: files.append(open('/dev/null'))\nexcept OSError as exc:\n"
        "    print(len(files), exc.errno)"
    )
    count, errno = result.stdout.split()
    assert int(count) < limits.max_open_files and errno == "24"


@pytest.mark.parametrize("directory", [".", "/tmp", "/dev/shm"])
def test_disk_floods_hit_file_and_mount_limits(sandbox, directory, limits):
    code = (
        "import os\nwritten = 0\n"
        "try:\n"
        "    for i in range(1000):\n"
        f"        with open(os.path.join({directory!r}, f'f{{i}}'), 'wb') as f:\n"
        "            while True:\n                f.write(b'x' * 65536); written += 65536\n"
        "except OSError as exc:\n    print(exc.errno)\n"
        "total = sum(os.path.getsize(os.path.join(d, n)) for d in ('.', '/tmp', '/dev/shm') for n in os.listdir(d))\n"
        "print(total)\n"
    )
    result = sandbox.run_python(code)
    errno, total = result.stdout.split()
    assert errno == "27"  # EFBIG: the first file reached max_file_mb
    assert int(total) <= limits.max_file_mb << 20
    many = sandbox.run_python(code.replace("while True:", "for _ in range(16):"))
    errno, total = many.stdout.split()
    assert errno == "28"  # ENOSPC: the mount is full
    assert int(total) <= limits.disk_mb << 20
    _assert_next_run_clean(sandbox)


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_output_flood_is_capped_while_reading(sandbox, stream, limits):
    result = sandbox.run_python(f"import sys\nwhile True: sys.{stream}.write('x' * 4096)")
    assert result.status == "output_limit"
    assert len(getattr(result, stream)) <= limits.output_bytes


def test_output_flood_from_a_background_process_is_capped(sandbox, limits):
    result = sandbox.run(["sh", "-c", "yes flood & sleep 0.5"])
    assert result.status == "output_limit"
    assert len(result.stdout) <= limits.output_bytes


# ---- processes left behind ---------------------------------------------------------------


def test_daemons_and_setsid_processes_are_gone_when_the_run_returns(sandbox, leftovers, marker):
    code = (
        "import os, subprocess, sys\n"
        f"subprocess.Popen(['python3', '-c', 'import time; time.sleep(300)', '{marker}'], start_new_session=True)\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execvp('python3', ['python3', '-c', 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)', '{marker}'])\n"
        "    os._exit(0)\n"
        "print('launched')\n"
    )
    result = sandbox.run_python(code)
    assert result.ok, result
    assert leftovers(marker) == []


def test_closing_a_sandbox_ends_every_process(marker, leftovers, limits):
    from veriloop.sandbox import Sandbox

    box = Sandbox(limits=limits.model_copy(update={"timeout_s": 30.0}))
    import threading

    running = threading.Thread(
        target=box.run, args=(["python3", "-c", "import time; time.sleep(60)", marker],), daemon=True
    )
    running.start()
    for _ in range(200):
        if leftovers(marker):
            break
        threading.Event().wait(0.05)
    assert leftovers(marker), "the run never started"
    box.close()
    assert leftovers(marker) == []


# ---- state that survives from one run into the next ----------------------------------------


def test_nothing_survives_into_the_next_run(sandbox):
    plant = (
        "import ctypes, json, os, sys\n"
        "for d in ('.', '/tmp', '/dev/shm'):\n"
        "    open(os.path.join(d, 'planted'), 'w').write('x')\n"
        "os.makedirs('locked/inner'); os.chmod('locked', 0); os.chmod('/tmp', 0)\n"
        "json.PLANTED = True\nsys.modules['planted'] = json\nos.environ['PLANTED'] = '1'\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "print('shm', libc.shmget(0x5eed, 4096, 0o1666), 'key', libc.syscall(248, b'user', b'planted', b'x', 1, -4))\n"
    )
    check = (
        "import json, os, sys\n"
        "print(os.listdir('.'), os.listdir('/tmp'), os.listdir('/dev/shm'), hasattr(json, 'PLANTED'),\n"
        "      'planted' in sys.modules, 'PLANTED' in os.environ, open('/proc/sysvipc/shm').read().count('\\n'),\n"
        "      'planted' in open('/proc/keys').read())\n"
    )
    for _ in range(2 * sandbox.workers):
        planted = sandbox.run_python(plant)
        assert planted.ok, planted
        assert "key -1" in planted.stdout  # kernel keys outlive processes: denied outright
    for _ in range(2 * sandbox.workers):
        result = sandbox.run_python(check)
        assert result.ok, result
        assert result.stdout.strip() == "[] [] [] False False False 1 False"


def test_random_state_differs_between_runs(sandbox):
    draws = {sandbox.run_python("import random; print(random.random())").stdout for _ in range(4)}
    assert len(draws) == 4


def test_a_run_that_breaks_cleanup_gets_a_fresh_sandbox(sandbox):
    deep = sandbox.run_python("import os\nfor _ in range(3000):\n    os.mkdir('d'); os.chdir('d')\nprint('made')")
    assert deep.stdout.strip() == "made"
    _assert_next_run_clean(sandbox)
    _assert_next_run_clean(sandbox)


def test_a_stopped_process_group_does_not_wedge_the_sandbox(sandbox, quick):
    result = sandbox.run_python("import os, signal\nos.kill(0, signal.SIGSTOP)", limits=quick)
    assert result.status in ("timeout", "killed")
    _assert_next_run_clean(sandbox)


def test_signals_sent_to_every_process_do_not_hurt_the_sandbox(sandbox, host_sleeper):
    code = (
        "import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept ProcessLookupError:\n    print('nobody else')"
    )
    result = sandbox.run_python(code)
    assert result.stdout == "nobody else\n"
    assert host_sleeper.poll() is None
    assert sandbox.run_python("print('fine')").stdout == "fine\n"
