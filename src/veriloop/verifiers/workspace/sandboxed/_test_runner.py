"""Runs a task's hidden tests on a final workspace, inside the sandbox, and reports each case.

Standard library only; the host (``_workspace_tests.py``) runs this source as a Python job whose
workspace is the final workspace (cleaned of planted test machinery) with the hidden test files
written over it. The host fills in ``SETTINGS`` before sending it.

The test command runs as a child with its own pipes. This process is not dumpable, so no process
of the run can open its descriptors or write to its stdout. Pytest is run in isolated mode
(``python -I``: no current directory, user site or ``PYTHON*`` variables on the path, so a
planted ``pytest.py`` or ``sitecustomize.py`` is never imported), with a configuration file of
this runner's own (``-c``: the workspace's ``pytest.ini``, ``tox.ini``, ``setup.cfg`` or
``pyproject.toml`` add no options, plugins or deselections), no cache, and the JUnit XML
report written to a fresh directory made here just before the run. Another command must write
JUnit XML to the path in ``$VERILOOP_REPORT`` (``{report}`` in its arguments is replaced by it).
When the command ends, every other process of the run is killed, then the report is read. The
answer is one JSON line on stdout: the cases found (file, name, outcome), the command's exit
code and the tail of its output.
"""

import ctypes
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree

SETTINGS = {}  # filled in by the host: command, test_files, timeout_s, output_chars
PR_SET_DUMPABLE = 4
PYTEST_INI = "[pytest]\npythonpath = %s\naddopts =\n"  # the workspace on the path, as `python -m pytest` puts it


def hardened(command, report, ini, test_files):
    """The command line to run: pytest's hardened, any other as given with ``{report}`` filled."""
    if len(command) >= 3 and command[0] in ("python", "python3") and command[1:3] == ["-m", "pytest"]:
        head = [command[0], "-I", "-B", "-m", "pytest", "-c", ini, "--rootdir", os.getcwd()]
        head += ["-p", "no:cacheprovider", "--junitxml", report, "-o", "junit_family=xunit1"]
        return head + command[3:] + list(test_files)
    return [part.replace("{report}", report) for part in command]


def kill_the_rest():
    """SIGKILL every process of the sandbox but this one, the namespace's init and the
    processes the sandbox keeps (which refuse): what the tests started must not touch the
    report after they end."""
    me = os.getpid()
    for _ in range(50):
        others = [int(n) for n in os.listdir("/proc") if n.isdigit() and int(n) not in (1, me)]
        alive = False
        for pid in others:
            try:
                with open("/proc/%d/stat" % pid, "rb") as handle:
                    if handle.read().rpartition(b")")[2].split()[0] == b"Z":
                        continue  # already dead, waiting for the init to reap it
                os.kill(pid, signal.SIGKILL)
                alive = True
            except (OSError, IndexError):
                pass
        if not alive:
            return
        time.sleep(0.002)


def cases_from(report):
    """``[(file, name, outcome)]`` of a JUnit XML report; outcome passed, failed, error or skipped."""
    cases = []
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
                break
        cases.append((case.get("file") or "", case.get("classname") or "", case.get("name") or "", outcome))
    return cases


def main():
    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    folder = "/tmp/.verdict-" + secrets.token_hex(8)
    os.mkdir(folder, 0o700)
    report = os.path.join(folder, "report.xml")
    ini = os.path.join(folder, "pytest.ini")
    with open(ini, "w") as handle:
        handle.write(PYTEST_INI % os.getcwd())
    argv = hardened(SETTINGS["command"], report, ini, SETTINGS["test_files"])
    env = dict(os.environ, VERILOOP_REPORT=report)
    env.pop("PYTHONPATH", None)
    answer = {"cases": [], "exit_code": None, "output": "", "problem": ""}
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            timeout=SETTINGS["timeout_s"],
            start_new_session=True,
        )
        answer["exit_code"] = done.returncode
        answer["output"] = done.stdout.decode("utf-8", "replace")[-SETTINGS["output_chars"] :]
    except subprocess.TimeoutExpired as exc:
        answer["problem"] = "the tests did not finish within %gs" % SETTINGS["timeout_s"]
        answer["output"] = (exc.output or b"").decode("utf-8", "replace")[-SETTINGS["output_chars"] :]
    except OSError as exc:
        answer["problem"] = "cannot run %r: %s" % (argv[0], exc.strerror)
    kill_the_rest()
    if not answer["problem"]:
        try:
            answer["cases"] = cases_from(report)
        except FileNotFoundError:
            answer["problem"] = "the tests wrote no report"
        except (ElementTree.ParseError, OSError) as exc:
            answer["problem"] = "the report is not JUnit XML (%s)" % exc
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
