"""The reference pages, generated from the code at build time so that they cannot drift from it.

``mkdocs build`` loads this file as a hook (``hooks:`` in mkdocs.yml); ``on_files`` adds every
page of ``PAGES`` and the layer picture to the site without writing them into ``docs/``. Each
page function imports the real objects it describes:

- ``reference/configuration.md``: the fields of the pydantic config classes (``TrainConfig``,
  ``SFTConfig``, the recipes' configs), each as ``section.field`` with type, default, bounds and
  description;
- ``reference/cli.md``: every command and subcommand of ``veriloop`` with its options, walked
  from the click command tree typer builds;
- ``reference/verifiers.md``: every kind in the verifier registry with its docstrings and fields;
- ``reference/sandbox-limits.md``: the fields of ``veriloop.sandbox.Limits``;
- ``layers.svg``: the layer table of ``tests/test_layering.py`` (``LAYERS``) as a picture.

The page functions need only veriloop itself, so ``tests/test_docs.py`` calls them without MkDocs.
"""

from __future__ import annotations

import html
import importlib.util
import inspect
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if "veriloop" not in sys.modules:
    sys.path.insert(0, str(ROOT / "src"))  # the pages describe the tree they are built from


# ---------------------------------------------------------------------------------------- cells


def _cell(text: str) -> str:
    """Table-cell text: pipes and newlines escaped, ``<`` and ``>`` escaped outside code spans."""
    return _prose(text.replace("\n", " ")).replace("|", "\\|")


def _prose(text: str) -> str:
    """Docstring text as Markdown: ``<``, ``>`` and ``&`` escaped outside code spans (no raw HTML)."""
    parts = text.split("`")
    return "`".join(part if i % 2 else html.escape(part, quote=False) for i, part in enumerate(parts))


def _code(text: str) -> str:
    return "`" + text.replace("`", "'") + "`" if text else ""


def _type_name(annotation: Any) -> str:
    text = annotation.__name__ if isinstance(annotation, type) else str(annotation)
    text = text.replace("typing.", "").replace("NoneType", "None")
    return re.sub(r"\b(?:[a-z_]+\.)+([A-Za-z]\w*)", r"\1", text)  # veriloop.x._y.Entry -> Entry


def _bounds(info: Any) -> str:
    symbols = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    found = []
    for item in info.metadata:
        for name, symbol in symbols.items():
            value = getattr(item, name, None)
            if value is not None:
                found.append(f"{symbol} {value}")
    return ", ".join(found)


def _own_doc(cls: type) -> str:
    """The class's own docstring, not one inherited from a base (pydantic's BaseModel has a long one)."""
    doc = cls.__dict__.get("__doc__")
    return inspect.cleandoc(doc) if doc else ""


def _default(info: Any) -> str:
    if info.is_required():
        return "required"
    value = info.default_factory() if info.default_factory is not None else info.default
    return repr(value)


# ------------------------------------------------------------------------------ configuration


def _is_section(annotation: Any) -> bool:
    from pydantic import BaseModel

    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def config_rows(model: type, prefix: str = "") -> list[tuple[str, Any]]:
    """``(name, FieldInfo)`` for every setting of ``model``: ``section.field`` inside a section,
    ``section.group.field`` inside a group of fields such as ``algorithm.correction``."""
    rows = []
    for name, info in model.model_fields.items():
        if _is_section(info.annotation):
            rows.extend(config_rows(info.annotation, f"{prefix}{name}."))
        else:
            rows.append((f"{prefix}{name}", info))
    return rows


def _config_table(model: type) -> str:
    lines = ["| setting | type | default | bounds | description |", "|---|---|---|---|---|"]
    for name, info in config_rows(model):
        cells = [_code(name), _code(_type_name(info.annotation)), _code(_default(info)), _bounds(info)]
        lines.append("| " + " | ".join([*cells, _cell(info.description or "")]) + " |")
    return "\n".join(lines) + "\n"


def _config_models() -> list[tuple[str, type, str]]:
    from veriloop.training import QuickstartConfig, SeedLoopConfig, SFTConfig, SmolLM2Config, TrainConfig

    return [
        (
            "veriloop train",
            TrainConfig,
            "`veriloop train CONFIG [SECTION.FIELD=VALUE ...]`, `veriloop.training.TrainConfig`",
        ),
        ("veriloop sft", SFTConfig, "`veriloop sft CONFIG [SECTION.FIELD=VALUE ...]`, `veriloop.training.SFTConfig`"),
        ("veriloop quickstart", QuickstartConfig, "`veriloop quickstart [FIELD=VALUE ...]`, `QuickstartConfig`"),
        (
            "veriloop quickstart --recipe seed-loop",
            SeedLoopConfig,
            "`veriloop quickstart --recipe seed-loop [FIELD=VALUE ...]`, `SeedLoopConfig`",
        ),
        (
            "veriloop quickstart --recipe smollm2",
            SmolLM2Config,
            "`veriloop quickstart --recipe smollm2 [FIELD=VALUE ...]`, `SmolLM2Config`",
        ),
    ]


def configuration_page() -> str:
    parts = [
        "# Configuration reference\n\n",
        "Generated from the pydantic config classes when the site is built. A training config is one "
        "YAML file of flat sections; every setting has a default, and any of them can be overridden on "
        "the command line as `SECTION.FIELD=VALUE` (the value is read as YAML), e.g. "
        "`veriloop train train.yaml optim.lr=3e-5 rollout.group_size=16`. The recipes of "
        "`veriloop quickstart` take flat `FIELD=VALUE` settings instead. An unknown field is an error "
        "that names it; so is a value outside its bounds.\n\n",
    ]
    for title, model, how in _config_models():
        doc = _own_doc(model)
        parts.append(f"## `{title}`\n\n{how}.\n\n")
        if doc:
            parts.append(_prose(doc) + "\n\n")
        parts.append(_config_table(model) + "\n")
    return "".join(parts)


# ------------------------------------------------------------------------------------------ cli


def cli_commands() -> list[tuple[str, Any, Any]]:
    """``(full name, command, context)`` for ``veriloop`` and every command under it, depth first."""
    import typer.main

    from veriloop.cli import app

    root = typer.main.get_command(app)
    found = []

    def walk(command: Any, name: str, parent: Any) -> None:
        context = command.context_class(command, info_name=name.split()[-1], parent=parent)
        found.append((name, command, context))
        for child in getattr(command, "list_commands", lambda _: [])(context):
            sub = command.get_command(context, child)
            if sub is not None and not sub.hidden:
                walk(sub, f"{name} {child}", context)

    walk(root, "veriloop", None)
    return found


def _command_section(name: str, command: Any, context: Any) -> str:
    level = "#" * min(name.count(" ") + 2, 4)  # veriloop: h2, its commands: h3, theirs: h4
    usage = " ".join([name, *command.collect_usage_pieces(context)])
    parts = [f"{level} `{name}`\n\n", f"```text\n{usage}\n```\n\n"]
    if command.help:
        parts.append(_prose(inspect.cleandoc(command.help)) + "\n\n")
    records = [p.get_help_record(context) for p in command.params if not getattr(p, "hidden", False)]
    records = [r for r in records if r is not None]
    if records:
        parts.append("| option | description |\n|---|---|\n")
        parts.extend(f"| {_code(opts)} | {_cell(text)} |\n" for opts, text in records)
        parts.append("\n")
    return "".join(parts)


def cli_page() -> str:
    parts = [
        "# Command-line reference\n\n",
        "Generated from the `veriloop` command's own definitions when the site is built; "
        "`veriloop COMMAND --help` prints the same. A user error (a bad file, config or model) "
        "prints one line starting with `error:` and exits 2.\n\n",
    ]
    parts.extend(_command_section(*found) for found in cli_commands())
    return "".join(parts)


# ------------------------------------------------------------------------------------ verifiers


def verifiers_page() -> str:
    from veriloop.verifiers import VERIFIERS, markdown_table, verifier_fields

    fields = verifier_fields()
    parts = [
        "# Verifier kinds\n\n",
        "Every kind a task's `verifier` object may name, generated from the verifier registry when the "
        "site is built. `veriloop verifiers` prints the same fields (`veriloop verifiers KIND`, `--json`, "
        "`--markdown`; `--plugin` adds a plugin's kinds). How the code kinds resist reward hacking: "
        "[Verifiers](../concepts/verifiers.md).\n\n",
    ]
    for name in VERIFIERS.names():
        kind = VERIFIERS.get(name)
        parts.append(f"## `{name}`\n\n")
        check_doc = inspect.getdoc(kind.check)
        if check_doc:
            parts.append(_prose(check_doc) + "\n\n")
        config_doc = _own_doc(kind.config)
        if config_doc:
            parts.append(_prose(config_doc) + "\n\n")
        module_doc = inspect.getdoc(inspect.getmodule(kind.check))
        if module_doc:
            parts.append('??? note "How it works (module `' + kind.check.__module__ + '`)"\n\n')
            parts.extend("    " + line + "\n" if line else "\n" for line in _prose(module_doc).splitlines())
            parts.append("\n")
        own = [f for f in fields if f.kind == name]
        if own:
            parts.append(markdown_table(own) + "\n")
    return "".join(parts)


# ------------------------------------------------------------------------------- sandbox limits


def sandbox_limits_page() -> str:
    from veriloop.sandbox import Limits

    lines = [
        "# Sandbox limits\n",
        "The fields of `veriloop.sandbox.Limits`, generated from the class when the site is built. "
        "`Sandbox(limits=Limits(...))` sets them for every run of a sandbox, `sb.run(..., limits=...)` "
        "for one run (`run`, `run_python`, `map_python`), and `veriloop sandbox run` / `sandbox serve` take "
        "`--timeout` and `--memory-mb`. Hitting a limit "
        "is a status of the `ExecResult` (`timeout`, `memory_limit`, `output_limit`, `killed`), never an "
        "exception.\n",
        "| field | type | default | bounds | description |",
        "|---|---|---|---|---|",
    ]
    for name, info in Limits.model_fields.items():
        cells = [_code(name), _code(_type_name(info.annotation)), _code(_default(info)), _bounds(info)]
        lines.append("| " + " | ".join([*cells, _cell(info.description or "")]) + " |")
    lines.append("\n## How each limit is enforced\n")
    lines.append(inspect.getdoc(Limits) or "")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------- layers


def layer_table() -> dict[str, int]:
    """``LAYERS`` of tests/test_layering.py: subpackage -> layer (the test enforces it)."""
    spec = importlib.util.spec_from_file_location("_layering_for_docs", ROOT / "tests" / "test_layering.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.LAYERS)


def layers_svg() -> str:
    """The layers as stacked bands, layer 0 at the bottom; imports may only point down."""
    layers: dict[int, list[str]] = {}
    for package, layer in layer_table().items():
        layers.setdefault(layer, []).append(package)
    width, band, gap, left = 760, 54, 10, 96
    height = len(layers) * (band + gap) + gap + 24
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" font-family="sans-serif" font-size="14" role="img">',
        "<title>veriloop's layers: each package imports only from its own layer or below</title>",
        '<defs><marker id="arrow" markerWidth="10" markerHeight="10" refX="5" refY="8" orient="auto">'
        '<path d="M0,0 L10,0 L5,10 z" fill="#555"/></marker></defs>',
    ]
    for row, layer in enumerate(sorted(layers, reverse=True)):
        y = gap + row * (band + gap)
        shade = 235 - 12 * (len(layers) - 1 - row)
        out.append(f'<rect x="0" y="{y}" width="{width - 40}" height="{band}" rx="6" fill="rgb({shade},{shade},250)"/>')
        out.append(f'<text x="14" y="{y + band / 2 + 5}" font-weight="bold">layer {layer}</text>')
        names = sorted(layers[layer])
        box = (width - 40 - left - 12 * len(names)) / len(names)
        for i, name in enumerate(names):
            x = left + i * (box + 12)
            label = "python -m veriloop" if name == "__main__" else f"veriloop.{name}"
            out.append(
                f'<rect x="{x:.0f}" y="{y + 9}" width="{box:.0f}" height="{band - 18}" rx="4" fill="white" stroke="#668"/>'
            )
            out.append(
                f'<text x="{x + box / 2:.0f}" y="{y + band / 2 + 5}" text-anchor="middle">{html.escape(label)}</text>'
            )
    arrow_x = width - 20
    out.append(
        f'<line x1="{arrow_x}" y1="{gap + 6}" x2="{arrow_x}" y2="{height - 40}" stroke="#555" stroke-width="2" marker-end="url(#arrow)"/>'
    )
    out.append(f'<text x="{width - 40}" y="{height - 8}" text-anchor="end" fill="#333">imports point down</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------- hooks

PAGES: dict[str, Callable[[], str]] = {
    "reference/configuration.md": configuration_page,
    "reference/cli.md": cli_page,
    "reference/verifiers.md": verifiers_page,
    "reference/sandbox-limits.md": sandbox_limits_page,
    "layers.svg": layers_svg,
}


def on_files(files: Any, config: Any) -> Any:
    """MkDocs hook: add the generated pages and picture to the site (never written into docs/)."""
    from mkdocs.structure.files import File

    for path, make in PAGES.items():
        files.append(File.generated(config, path, content=make()))
    return files
