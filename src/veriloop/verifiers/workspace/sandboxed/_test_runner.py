"""Runs a task's hidden tests on a final workspace, inside the sandbox, and reports each case.

Standard library only; the host (``_workspace_tests.py``) runs this source as a Python job whose
workspace is the final workspace (cleaned of planted test machinery) with the hidden test files
written over it. The host fills in ``SETTINGS`` before sending it.

This process is not dumpable, so no process of the run can open its descriptors or write to its
stdout; it makes a private folder for the run's files, and when the tests end it kills every
other process of the run before it reads their results.

Pytest runs in three processes. The test process (``_pytest_process.py``, started here, isolated
as ``python -I``: no current directory, user site or ``PYTHON*`` variables on the path, so a
planted ``pytest.py`` or ``sitecustomize.py`` is never imported) runs pytest with a
configuration file of this runner's own (``-c``: the workspace's ``pytest.ini``, ``tox.ini``,
``setup.cfg`` or ``pyproject.toml`` add no options, plugins or deselections) and no cache. The
workspace's modules run only in the candidate process that the test process starts
(``_workspace_candidate.py``; the tests hold proxies, ``_workspace_proxy.py``). Each test's
outcome comes back here over a pipe that only the test process holds, and this runner turns
the reports into cases: no file, and nothing the workspace's code can reach, decides them.

Another command runs as one child process with the workspace's code in it, and must write JUnit
XML to the path in ``$VERILOOP_REPORT`` (``{report}`` in its arguments is replaced by it): that
report comes from the process that runs the code, which can write it as it likes.

With a ``reward_dir`` (the ``reward_script`` kind) the command is a script that writes its
reward to ``reward.txt`` (a number) or ``reward.json`` in that folder, as Harbor's ``test.sh``
does: the folder (its real path, through any link of the environment) is made and emptied of
both files before the script starts, the script runs with the task's variables, and the files'
text is read once every process of the run has ended.

The answer is one JSON line on stdout: the cases found (file, class, name, outcome), or the
reward files' text, the command's exit code and the tail of its output.
"""

import ctypes
import json
import os
import secrets
import signal
import stat
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ElementTree

SETTINGS = {}  # filled in by the host: command, test_files, trusted, hidden, scripts, timeout_s, output_chars
# (and for a reward script: reward_dir, variables)
REWARD_FILES = ("reward.txt", "reward.json")
REWARD_CHARS = 4096
PR_SET_DUMPABLE = 4
PYTEST_INI = "[pytest]\npythonpath = %s\naddopts =\n"  # the workspace on the path, as `python -m pytest` puts it


def runs_pytest(command):
    return len(command) >= 3 and command[0] in ("python", "python3") and command[1:3] == ["-m", "pytest"]


def pytest_argv(command, folder, ini, channel):
    """The test process's command line: pytest's arguments, hardened, go in its one argument."""
    arguments = ["-c", ini, "--rootdir", os.getcwd(), "-p", "no:cacheprovider", *command[3:]]
    job = {
        "args": arguments + list(SETTINGS["test_files"]),
        "trusted": SETTINGS["trusted"],
        "hidden": SETTINGS["hidden"],
        "channel": channel,
        "candidate": os.path.join(folder, "candidate.py"),
    }
    return [command[0], "-I", "-B", os.path.join(folder, "pytest_process.py"), json.dumps(job)]


def command_argv(command, report):
    """Any other command, as given with ``{report}`` filled."""
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


def cases_from_channel(lines):
    """``[(file, class, name, outcome)]`` of the test process's reports: a test failed when any
    of its phases failed (an error when that was its setup or teardown), skipped when one
    skipped, passed when its call passed."""
    phases = {}
    for line in lines:
        try:
            report = json.loads(line)
            phases.setdefault(report["nodeid"], {})[report["when"]] = report["outcome"]
        except (ValueError, KeyError, TypeError):
            continue
    cases = []
    for nodeid, outcome_of in phases.items():
        file, *owners, name = nodeid.split("::")
        outcomes = set(outcome_of.values())
        if "failed" in outcomes:
            outcome = "failed" if outcome_of.get("call") == "failed" else "error"
        elif "skipped" in outcomes:
            outcome = "skipped"
        else:
            outcome = "passed" if outcome_of.get("call") == "passed" else "error"
        cases.append((file, ".".join(owners), name, outcome))
    return cases


def refusals_from_channel(lines):
    """Why values of the tests could not cross to the workspace's code, one line per test."""
    reasons = []
    for line in lines:
        try:
            why = json.loads(line).get("why")
        except (ValueError, AttributeError):
            continue
        if isinstance(why, str) and why not in reasons:
            reasons.append(why)
    return reasons


def read_lines(descriptor, into):
    with os.fdopen(descriptor, "r", errors="replace") as channel:
        into.extend(channel)


def run(argv, env, pass_fds, answer):
    """Run ``argv`` to its end or the time limit, filling ``answer``'s exit code, output, problem."""
    try:
        child = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            pass_fds=pass_fds,
            start_new_session=True,
        )
    except OSError as exc:
        answer["problem"] = "cannot run %r: %s" % (argv[0], exc.strerror)
        return
    for descriptor in pass_fds:
        os.close(descriptor)
    try:
        output, _ = child.communicate(timeout=SETTINGS["timeout_s"])
        answer["exit_code"] = child.returncode
    except subprocess.TimeoutExpired:
        answer["problem"] = "the tests did not finish within %gs" % SETTINGS["timeout_s"]
        kill_the_rest()
        output, _ = child.communicate()
    answer["output"] = output.decode("utf-8", "replace")[-SETTINGS["output_chars"] :]


def prepare(folder):
    """The run's private folder: its pytest configuration and the scripts the host sent."""
    os.mkdir(folder, 0o700)
    ini = os.path.join(folder, "pytest.ini")
    with open(ini, "w") as handle:
        handle.write(PYTEST_INI % os.getcwd())
    for name, text in SETTINGS["scripts"].items():
        with open(os.path.join(folder, name), "w") as handle:
            handle.write(text)
    return ini


def main():
    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    folder = "/tmp/.verdict-" + secrets.token_hex(8)
    ini = prepare(folder)
    report = os.path.join(folder, "report.xml")
    env = dict(os.environ, VERILOOP_REPORT=report)
    env.pop("PYTHONPATH", None)
    answer = {"cases": [], "refused": [], "exit_code": None, "output": "", "problem": ""}
    if SETTINGS.get("reward_dir"):
        run_reward_script(env, answer)
    elif runs_pytest(SETTINGS["command"]):
        reading, writing = os.pipe()
        lines = []
        reader = threading.Thread(target=read_lines, args=(reading, lines), daemon=True)
        reader.start()
        run(pytest_argv(SETTINGS["command"], folder, ini, writing), env, (writing,), answer)
        kill_the_rest()
        reader.join(timeout=5)
        answer["cases"] = cases_from_channel(list(lines))
        answer["refused"] = refusals_from_channel(list(lines))
        if not lines and not answer["problem"]:
            answer["problem"] = "the test process reported nothing"
    else:
        run(command_argv(SETTINGS["command"], report), env, (), answer)
        kill_the_rest()
        if not answer["problem"]:
            answer["cases"], answer["problem"] = report_cases(report)
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()


def run_reward_script(env, answer):
    """Run the command as a reward script and put the reward files' text in ``answer``."""
    folder = os.path.realpath(SETTINGS["reward_dir"])
    try:
        os.makedirs(folder, exist_ok=True)
        for name in REWARD_FILES:
            remove(os.path.join(folder, name))
    except OSError as exc:
        answer["problem"] = "cannot prepare the reward folder %s: %s" % (SETTINGS["reward_dir"], exc.strerror)
        return
    env.update(SETTINGS.get("variables", {}))
    run(list(SETTINGS["command"]), env, (), answer)
    kill_the_rest()
    answer["rewards"] = {name: read_text(os.path.join(folder, name)) for name in REWARD_FILES}


def remove(path):
    """Delete whatever is at ``path`` (a file, a link or a folder), if anything."""
    if os.path.isdir(path) and not os.path.islink(path):
        for root, dirs, files in os.walk(path, topdown=False):
            for name in files:
                os.unlink(os.path.join(root, name))
            for name in dirs:
                os.rmdir(os.path.join(root, name))
        os.rmdir(path)
    elif os.path.lexists(path):
        os.unlink(path)


def read_text(path):
    """The first ``REWARD_CHARS`` characters of a regular file at ``path``, or None."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None  # a pipe or device the script left there
        return handle.read(REWARD_CHARS).decode("utf-8", "replace")


def report_cases(report):
    """The cases of a JUnit XML report and the problem reading it (empty when none)."""
    try:
        return cases_from(report), ""
    except FileNotFoundError:
        return [], "the tests wrote no report"
    except (ElementTree.ParseError, OSError) as exc:
        return [], "the report is not JUnit XML (%s)" % exc


if __name__ == "__main__":
    main()
