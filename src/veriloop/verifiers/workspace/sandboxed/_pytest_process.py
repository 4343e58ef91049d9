"""The test process of a pytest run: runs pytest on the hidden tests, never the workspace's code.

Started by ``_test_runner.py`` with one argument (JSON: the pytest arguments, the trusted files,
the hidden ones among them, the channel's descriptor, the candidate script). Before anything of the workspace can run it
makes itself non-dumpable (no process of the same user can read or write its memory or open its
descriptors), marks the channel not inheritable (no process it starts holds it), reads the
trusted files (``_workspace_imports.py``), writes a placeholder over each hidden one on disk (the
code under test cannot read the tests: their text lives only in this process's memory) and puts
its finder first on the import path. Then
pytest runs, and each phase of each test (setup, call, teardown) is reported as one JSON line
on the channel, a pipe whose other end only the runner holds. The workspace's code runs in the
candidate process (``_workspace_candidate.py``), which holds neither.

Standard library only: pytest is the environment's (the runner checked it is the command).
"""

import ctypes
import importlib
import json
import os
import sys

from veriloop.verifiers.workspace.sandboxed._workspace_imports import WorkspaceFinder  # sandbox: strip
from veriloop.verifiers.workspace.sandboxed._workspace_proxy import Candidate  # sandbox: strip

PR_SET_DUMPABLE = 4


class ChannelReport:
    """A pytest plugin: each test report as a line on the channel; pytest's configuration for
    the finder's assertion rewriting."""

    def __init__(self, channel, finder, rewrite_asserts):
        self.channel, self.finder, self.rewrite_asserts = channel, finder, rewrite_asserts

    def pytest_configure(self, config):
        rewrite = self.rewrite_asserts
        self.finder.rewrite = lambda tree, source, path: rewrite(tree, source, path, config)

    def pytest_runtest_logreport(self, report):
        line = {"nodeid": report.nodeid, "when": report.when, "outcome": report.outcome}
        why = self.finder.candidate.refusals.get(report.nodeid)
        if report.failed and why:
            line["why"] = why
        self.channel.write(json.dumps(line) + "\n")
        self.channel.flush()


def leave_the_workspace_alone(hook_class, finder):
    """pytest's assertion-rewriting finder would run a workspace file named like a test here."""
    should_rewrite = hook_class._should_rewrite

    def _should_rewrite(self, name, fn, state):
        return not finder.owns(fn) and should_rewrite(self, name, fn, state)

    hook_class._should_rewrite = _should_rewrite


def main():
    ctypes.CDLL(None).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    # The run's folder held this script and ``_wire``, both loaded; the workspace's code can
    # write there, so no later import may look in it.
    sys.path.remove(os.path.dirname(os.path.abspath(__file__)))
    settings = json.loads(sys.argv[1])
    os.set_inheritable(settings["channel"], False)
    channel = os.fdopen(settings["channel"], "w")
    finder = WorkspaceFinder(os.getcwd(), settings["trusted"], Candidate(settings["candidate"]))
    finder.cover(settings["hidden"])
    finder.candidate.ship_functions_of(finder.trusted)
    # The environment's pytest, imported by name: this file runs there, not beside the host.
    pytest = importlib.import_module("pytest")
    rewrite = importlib.import_module("_pytest.assertion.rewrite")
    leave_the_workspace_alone(rewrite.AssertionRewritingHook, finder)
    finder.rewrite = lambda tree, source, path: rewrite.rewrite_asserts(tree, source, path, None)
    sys.meta_path.insert(0, finder)
    sys.argv = ["pytest"]
    code = pytest.main(settings["args"], plugins=[ChannelReport(channel, finder, rewrite.rewrite_asserts)])
    channel.write(json.dumps({"exit_code": int(code)}) + "\n")
    channel.flush()
    sys.stdout.flush()  # pytest's report, for the output's tail
    os._exit(int(code))  # no exit hook left behind by a test runs after the last report


if __name__ == "__main__":
    main()
