"""The documentation site holds together without building it (``make docs`` runs the strict build).

Every page of the nav exists or is generated, the README's links land on pages, and the
generated reference pages name every config field, every command, every verifier kind, every
sandbox limit and every layer of the code they are generated from.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import yaml

ROOT = Path(__file__).parents[1]
DOCS = ROOT / "docs"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference_hook", DOCS / "hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _nav_pages(entries: list) -> list[str]:
    pages = []
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages.extend(_nav_pages(value) if isinstance(value, list) else [value])
    return pages


def test_every_nav_page_exists_or_is_generated():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    generated = set(_generator().PAGES)
    pages = _nav_pages(config["nav"])
    missing = [page for page in pages if page not in generated and not (DOCS / page).is_file()]
    assert not missing, f"in mkdocs.yml's nav but not in docs/: {missing}"
    assert set(pages) >= {p for p in generated if p.endswith(".md")}, "a generated page is missing from the nav"
    assert "architecture.md" in pages and "real-model.md" in pages


def test_generated_output_is_not_committed():
    assert not any((DOCS / page).exists() for page in _generator().PAGES)


def test_readme_links_land_on_docs_pages():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = [t.split("#")[0] for t in re.findall(r"\]\(([^)#][^)]*)\)", readme) if "://" not in t]
    assert targets, "the README links into the docs"
    assert [t for t in targets if not (ROOT / t).exists()] == []


def test_configuration_page_names_every_setting():
    from veriloop.training import SFTConfig, TrainConfig

    generator = _generator()
    page = generator.configuration_page()
    for model in (TrainConfig, SFTConfig):
        for name, _ in generator.config_rows(model):
            assert f"| `{name}` |" in page, name
    assert "| `rollout.group_size` | `int` | `8` | >= 1 | samples per prompt |" in page
    assert "| `algorithm.correction.mode` | `str` | `'none'` |" in page  # a group of fields, one row each


def test_cli_page_names_every_command_and_option():
    generator = _generator()
    page = generator.cli_page()
    commands = generator.cli_commands()
    names = {name for name, _, _ in commands}
    assert {"veriloop train", "veriloop tasks generate", "veriloop sandbox serve", "veriloop review stats"} <= names
    for name, command, _ in commands:
        assert f"`{name}`" in page, name
        for param in command.params:
            if not param.hidden and param.opts[0].startswith("--"):
                assert f"`{param.opts[0]}" in page, (name, param.opts[0])


def test_verifiers_page_names_every_registered_kind():
    from veriloop.verifiers import VERIFIERS

    page = _generator().verifiers_page()
    assert VERIFIERS.names() and all(f"## `{kind}`" in page for kind in VERIFIERS.names())


def test_sandbox_limits_page_names_every_field():
    from veriloop.sandbox import Limits

    page = _generator().sandbox_limits_page()
    assert all(f"| `{field}` |" in page for field in Limits.model_fields)
    assert "| `timeout_s` | `float` | `10.0` |" in page


def test_layer_picture_draws_every_package():
    generator = _generator()
    svg = generator.layers_svg()
    assert svg.startswith("<svg") and "script" not in svg and "http://" not in svg.replace("http://www.w3.org", "")
    for package, layer in generator.layer_table().items():
        assert f">layer {layer}<" in svg
        assert (">python -m veriloop<" if package == "__main__" else f">veriloop.{package}<") in svg


def _readme_block(language: str) -> str:
    blocks = re.findall(rf"```{language}\n(.*?)```", (ROOT / "README.md").read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 1, f"the README has one {language} example"
    return blocks[0]


def test_readme_examples_are_a_valid_task_file_and_config(tmp_path):
    from veriloop.tasks import check_task_file
    from veriloop.training import TrainConfig

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(_readme_block("json"), encoding="utf-8")
    checked = check_task_file(tasks, gold=True)
    assert checked.ok and len(checked.tasks) == 2, checked.errors
    config = TrainConfig.model_validate(yaml.safe_load(_readme_block("yaml")))
    assert config.rollout.group_size == 8 and config.run.out == "runs/arithmetic"
