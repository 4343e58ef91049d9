"""Which file an import of the test process runs, and where.

Installed first on ``sys.meta_path`` of the test process before pytest starts (pytest's own
assertion-rewriting finder is told to leave the workspace alone). For a module found in the
workspace:

- a trusted file (a hidden test file or a conftest the task shipped) runs here, from the text
  read when the test process started, with pytest's assertion rewriting for test modules and
  conftests: writing those files on disk later (the workspace's code can) changes nothing, and no
  cached bytecode is read. The hidden ones are then replaced on disk by a placeholder
  (``cover``), before any code of the workspace runs: the code under test cannot read them;
- a ``conftest.py`` that was not there at the start is an empty module;
- any other file of the workspace runs in the candidate process only: here it is a
  ``ModuleProxy``. A file that was not there at the start is not imported at all, and a top-level
  name is looked for outside the workspace first, so the workspace's code cannot slip a module
  into this process under the name of one it imports later (``decimal``, ``difflib``).

Standard library only.
"""

import ast
import importlib.abc
import importlib.machinery
import importlib.util
import linecache
import os
import sys

from veriloop.verifiers.workspace.sandboxed._workspace_proxy import imported  # sandbox: strip

TEST_MODULE_PREFIX, TEST_MODULE_SUFFIX = "test_", "_test.py"
PLACEHOLDER = b"# Held by the test process: a hidden file of the tests is not readable by the code under test.\n"


def _inside(path, root):
    return path == root or path.startswith(root + os.sep)


def workspace_files(root):
    """The real paths of every file under ``root`` now."""
    found = set()
    for folder, _, names in os.walk(root):
        found.update(os.path.realpath(os.path.join(folder, name)) for name in names)
    return found


class TrustedLoader(importlib.abc.Loader):
    """Runs a trusted file from the text read at the start."""

    def __init__(self, source, path, rewrite):
        self.source, self.path, self.rewrite = source, path, rewrite

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        tree = ast.parse(self.source, filename=self.path)
        name = os.path.basename(self.path)
        test_module = name.startswith(TEST_MODULE_PREFIX) or name.endswith(TEST_MODULE_SUFFIX)
        if self.rewrite is not None and (test_module or name == "conftest.py"):
            self.rewrite(tree, self.source, self.path)
        exec(compile(tree, self.path, "exec", dont_inherit=True), module.__dict__)


class EmptyLoader(importlib.abc.Loader):
    """A module with no code: a conftest that appeared during the run."""

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        pass


class ProxyLoader(importlib.abc.Loader):
    """A module of the workspace, imported in the candidate process and used through a proxy."""

    def __init__(self, candidate):
        self.candidate = candidate

    def create_module(self, spec):
        return imported(self.candidate, spec.name)

    def exec_module(self, module):
        pass


class WorkspaceFinder(importlib.abc.MetaPathFinder):
    """Decides, for every import of a workspace file, which of the loaders above runs it."""

    def __init__(self, root, trusted_paths, candidate):
        self.root = os.path.realpath(root)
        self.trusted = {}
        for path in trusted_paths:
            real = os.path.realpath(os.path.join(self.root, path))
            with open(real, "rb") as handle:
                self.trusted[real] = handle.read()
        self.present = workspace_files(self.root)
        for real, source in self.trusted.items():
            lines = source.decode("utf-8", "replace").splitlines(keepends=True)
            linecache.cache[real] = (len(source), None, lines, real)  # no mtime: never reread from disk
        self.candidate = candidate
        self.rewrite = None  # set once pytest's configuration exists: (tree, source, path) -> None

    def cover(self, hidden_paths):
        """Write a placeholder over each hidden file on disk (its text is held here): pytest still
        collects the file and names its tests by path, tracebacks show the held text
        (``linecache``), and the code under test, started later, finds nothing to read."""
        for path in hidden_paths:
            real = os.path.realpath(os.path.join(self.root, path))
            if real in self.trusted:
                with open(real, "wb") as handle:
                    handle.write(PLACEHOLDER)

    def owns(self, path):
        return path is not None and _inside(os.path.realpath(path), self.root)

    def find_spec(self, name, path=None, target=None):
        if path is None:
            outside = [entry for entry in sys.path if not self.owns(os.path.abspath(entry or "."))]
            spec = importlib.machinery.PathFinder.find_spec(name, outside)
            if spec is not None:
                return spec
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or not spec.has_location or not self.owns(spec.origin):
            return None
        real = os.path.realpath(spec.origin)
        package = spec.submodule_search_locations is not None
        if real in self.trusted:
            loader = TrustedLoader(self.trusted[real], real, self.rewrite)
        elif os.path.basename(real) == "conftest.py" or real not in self.present:
            if os.path.basename(real) != "conftest.py":
                raise ModuleNotFoundError("%s: %s appeared after the tests started" % (name, spec.origin), name=name)
            loader = EmptyLoader()
        else:
            loader = ProxyLoader(self.candidate)
        found = importlib.util.spec_from_loader(name, loader, origin=spec.origin, is_package=package)
        found.has_location = True
        if package:
            found.submodule_search_locations = list(spec.submodule_search_locations)
        return found
