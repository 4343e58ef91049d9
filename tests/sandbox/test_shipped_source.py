"""The scripts shipped into sandboxes are their ``sandboxed/`` modules joined, imports of each other removed."""

from __future__ import annotations

import ast
import os
import resource
import threading
from pathlib import Path

import pytest

import veriloop.sandbox as sandbox_package
from veriloop.sandbox import Limits
from veriloop.sandbox._bwrap import SERVER_MODULES, SERVER_SOURCE, launch_for
from veriloop.sandbox._python import find_python
from veriloop.sandbox._shipped import STRIP_MARKER, bootstrap, joined_source, module_source

SERVER_FOLDER = Path(sandbox_package.__file__).parent / "sandboxed"


def test_the_server_script_is_every_module_of_its_folder_with_the_server_last():
    modules = {path.stem for path in SERVER_FOLDER.glob("_*.py") if path.name != "__init__.py"}
    assert sorted(SERVER_MODULES) == sorted(modules)
    assert SERVER_MODULES[-1] == "_server"
    assert SERVER_SOURCE == joined_source(SERVER_FOLDER, SERVER_MODULES)


def test_the_server_script_imports_only_the_standard_library_and_keeps_no_marked_line():
    assert STRIP_MARKER not in SERVER_SOURCE
    tree = ast.parse(SERVER_SOURCE)
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert not [node for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
    assert "veriloop" not in {name.partition(".")[0] for name in imported}


def test_each_module_uses_at_its_top_level_only_names_joined_before_it():
    namespace = {"__name__": "not_the_main_module"}  # defines everything, starts nothing
    exec(compile(SERVER_SOURCE, "<sandbox server>", "exec"), namespace)
    assert callable(namespace["main"]) and callable(namespace["child_main"])


def test_only_marked_lines_are_removed(tmp_path):
    (tmp_path / "_first.py").write_text("A = 1\n", encoding="utf-8")
    marked = f"from elsewhere import A  {STRIP_MARKER}\nB = A + 1  # sandbox: strip me not\n"
    (tmp_path / "_second.py").write_text(marked, encoding="utf-8")
    assert module_source(tmp_path, "_second") == "B = A + 1  # sandbox: strip me not\n"
    namespace: dict = {}
    exec(joined_source(tmp_path, ("_first", "_second")), namespace)
    assert namespace["B"] == 2


def test_the_bootstrap_runs_the_source_as_the_main_module_under_its_name():
    source = "import sys\nseen = __name__\ndef fail():\n    raise ValueError('where')\n"
    namespace = {"__name__": "__main__"}
    exec(bootstrap(source, "<shipped>"), namespace)
    assert namespace["seen"] == "__main__"
    with pytest.raises(ValueError) as caught:
        namespace["fail"]()
    assert caught.traceback[-1].frame.code.raw.co_filename == "<shipped>"


def test_the_server_starts_from_the_bootstrap_of_its_script():
    launch = launch_for(find_python(), Limits(), network=False)
    command = launch.tail[launch.tail.index("-c") + 1]
    assert command == bootstrap(SERVER_SOURCE, "<sandbox server>")
    assert len(ast.parse(command).body) == 1  # one call: the interpreter compiles only a string constant


def test_process_settings_see_a_changed_rlimit_and_only_that():
    namespace = {"__name__": "not_the_main_module"}
    exec(compile(module_source(SERVER_FOLDER, "_kernel"), "_kernel.py", "exec"), namespace)
    settings = namespace["process_settings"]
    before = settings()
    soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
    lowered = 0 if soft != 0 else 4096
    if hard != resource.RLIM_INFINITY and lowered > hard:
        pytest.skip("no room to change RLIMIT_CORE here")
    resource.setrlimit(resource.RLIMIT_CORE, (lowered, hard))
    try:
        changed = settings()
    finally:
        resource.setrlimit(resource.RLIMIT_CORE, (soft, hard))
    assert changed != before and changed[1:] == before[1:]
    assert settings() == before


def test_write_parts_writes_every_part_in_order_past_a_full_pipe():
    namespace = {"__name__": "not_the_main_module"}
    exec(compile(module_source(SERVER_FOLDER, "_frames"), "_frames.py", "exec"), namespace)
    parts = [b"head", b"", bytes(range(256)) * 1024, *[b"%d," % i for i in range(3000)], bytearray(b"tail")]
    expected = b"".join(parts)
    reader, writer = os.pipe()
    received = bytearray()

    def drain() -> None:
        while chunk := os.read(reader, 1 << 16):
            received.extend(chunk)

    thread = threading.Thread(target=drain)
    thread.start()
    try:
        namespace["write_parts"](writer, parts)
    finally:
        os.close(writer)
        thread.join(timeout=10)
        os.close(reader)
    assert bytes(received) == expected
