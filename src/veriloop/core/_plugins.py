"""Plugins: a user's own modules that register verifier kinds, estimators, engines, ...

A plugin is a module that registers what it adds when imported (``@VERIFIERS.register(...)``
and the like). veriloop imports plugins from two places, in every process that samples or
verifies (the trainer, eval, check processes, local and Ray rollout workers):

- Python entry points in the ``veriloop.plugins`` group of any installed distribution
  (``[project.entry-points."veriloop.plugins"] mine = "my_package.veriloop_kinds"``);
- a ``plugins:`` list in a train config, or ``--plugin`` on the command line: importable
  module names (``my_package.kinds``) or paths to ``.py`` files (relative to the working
  directory, or to the config file that names them).

``load_plugins`` records what it loaded in ``VERILOOP_PLUGINS``, so processes started from
this one (check processes, a Ray cluster started here) load the same list; a process that
receives a list in some other way (a Ray actor's spec) passes it to ``load_plugins`` itself.
A plugin that fails to import is a ``UserError`` naming it.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import sys
import threading
from collections.abc import Iterable
from pathlib import Path

from veriloop.core._errors import UserError

PLUGINS_ENV = "VERILOOP_PLUGINS"
ENTRY_POINT_GROUP = "veriloop.plugins"

_loaded: dict[str, str] = {}  # plugin as given -> module name
_lock = threading.Lock()


def resolve_plugin(plugin: str, base: str | Path | None = None) -> str:
    """A plugin reference as every process can load it: file paths made absolute, module names as given."""
    if not plugin.endswith(".py") and os.sep not in plugin:
        return plugin
    path = Path(plugin).expanduser()
    if not path.is_absolute():
        path = (Path(base) if base is not None else Path.cwd()) / path
    if not path.is_file():
        raise UserError(f"plugin {plugin}: no such file ({path})")
    return str(path.resolve())


def _import_one(plugin: str) -> str:
    if not plugin.endswith(".py"):
        importlib.import_module(plugin)
        return plugin
    name = Path(plugin).stem
    existing = sys.modules.get(name)
    if existing is not None and getattr(existing, "__file__", None) == plugin:
        return name
    spec = importlib.util.spec_from_file_location(name, plugin)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {plugin}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # so "name:function" references and pickles by reference resolve
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return name


def _entry_point_plugins() -> list[str]:
    return [entry.value for entry in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)]


def load_plugins(plugins: Iterable[str] = (), base: str | Path | None = None) -> list[str]:
    """Import entry-point plugins, the inherited ``VERILOOP_PLUGINS`` and ``plugins``; once each.

    Returns every plugin this process has loaded, resolved (what a worker elsewhere needs).
    """
    inherited = [p for p in os.environ.get(PLUGINS_ENV, "").split(os.pathsep) if p]
    from_entry_points = _entry_point_plugins()
    wanted = [*from_entry_points, *inherited, *(resolve_plugin(p, base) for p in plugins)]
    with _lock:
        for plugin in wanted:
            if plugin in _loaded:
                continue
            try:
                _loaded[plugin] = _import_one(plugin)
            except ModuleNotFoundError as exc:
                raise UserError(
                    f"plugin {plugin}: {exc} (a plugin module must be importable in every process: "
                    "installed, on PYTHONPATH, or given as the path of its .py file)"
                ) from exc
            except Exception as exc:  # the user's code: say whose it is, then stop
                raise UserError(f"plugin {plugin}: could not import it: {type(exc).__name__}: {exc}") from exc
        given = [p for p in _loaded if p not in from_entry_points]
        os.environ[PLUGINS_ENV] = os.pathsep.join(given)
        return list(_loaded)
