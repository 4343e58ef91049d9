"""The ``cad_geometry`` verifier kind: a modelling script judged by the solid it builds.

The response is a Python script (the last fenced ``python`` block, else the whole text); the
task's gold is a reference script. Both run in the sandbox on the task's environment (one with
``manifold3d``, ``trimesh`` and ``numpy``, built by ``veriloop env build``), each in a fresh,
empty workspace: a file planted beforehand, or left by another run, is not there, and only what
the script itself writes to ``output`` (an STL file) counts. The gold model is built once per
process and kept (keyed by the script, the output name and the environment's name).

A third run, on the same environment, measures the candidate's file against the gold's
(``in_environment/_measure.py``); the candidate's code is not part of it, and the verdict is
computed here from the plain JSON figures it prints.

Gates (any failing scores 0): the file exists, is at most ``max_faces`` faces (read from the
header before loading), has finite vertices, and is a closed, consistently oriented manifold
solid (manifold3d accepts it); it has the gold's number of separate bodies and of holes
(genus), its bodies do not intersect each other, its volumetric IoU with the gold is at least
``min_iou``, and no region where the two differ is thicker than ``max_deviation`` mm (each
piece of the two differences measured as ``2 * volume / area``: tessellation leaves slivers,
a moved hole leaves a cylinder), and no point of its surface is farther than ``max_stray`` mm from
the part's surface (its vertices and points spread over it by area: a saw cut or a fin too thin
for the deviation gate shows by its depth): a block with the right bounding box, a plate without its holes, two
overlapping copies, or any other shape that is not the part, earns nothing. Past the gates,
each check earns an equal share: volume and surface area within a relative tolerance of the
gold's, the bounding box within ``bounds_abs_tol`` mm, at least ``min_clearance`` mm
between bodies when the task asks for it, and, when the task states ``min_wall``, no wall
thinner than that (less ``wall_tol``; ``"gold"``: the gold model's thinnest wall), measured
by rays cast inward from points spread over the surface. Feedback names each
failed check and by how much it missed. With ``render``, the score carries a PNG picture of the
candidate's model (``images["render.png"]``, base64), drawn in the measurer's sandbox by a small
software rasteriser (``in_environment/_render.py``) for the review page; it never counts.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from veriloop.core import ExecResult, Task, WorkspaceError, workspace_path
from veriloop.verifiers._registry import GraderError, Verdict, VerifierConfig, register_task_check, register_verifier
from veriloop.verifiers.code._extract import extract_code

MEASURE_SOURCE = (Path(__file__).parent / "in_environment" / "_measure.py").read_text(encoding="utf-8")
RENDER_SOURCE = (Path(__file__).parent / "in_environment" / "_render.py").read_bytes()
RENDER_IMAGE = "render.png"
_GOLD_CACHE: OrderedDict[str, bytes] = OrderedDict()
_GOLD_CACHE_SIZE = 256
_gold_lock = threading.Lock()


class CadGeometryConfig(VerifierConfig):
    output: str = Field(default="model.stl", description="the STL file the script must write in its working folder")
    min_iou: float = Field(default=0.95, ge=0, le=1, description="least volumetric IoU with the gold model (a gate)")
    volume_rel_tol: float = Field(default=0.02, ge=0, description="relative tolerance of the volume")
    area_rel_tol: float = Field(default=0.03, ge=0, description="relative tolerance of the surface area")
    bounds_abs_tol: float = Field(default=0.2, ge=0, description="tolerance of each bounding-box coordinate, mm")
    max_deviation: float = Field(
        default=0.25, ge=0, description="thickest region where model and part may differ, mm (a gate)"
    )
    max_stray: float = Field(
        default=0.3, ge=0, description="farthest the model's surface may stray from the part's, mm (a gate)"
    )
    min_clearance: float | None = Field(default=None, ge=0, description="least gap between separate bodies, mm")
    min_wall: Annotated[float, Field(gt=0)] | Literal["gold"] | None = Field(
        default=None,
        description="thinnest wall the part must have, mm, or 'gold' for the gold model's (none: unchecked)",
    )
    wall_tol: float = Field(default=0.1, ge=0, description="how much thinner than min_wall a measured wall may be, mm")
    render: bool = Field(
        default=False, description="attach a PNG picture of the candidate's model to the score (~0.1 s more)"
    )
    render_size: int = Field(default=256, ge=32, le=512, description="the picture's width and height, pixels")
    max_faces: int = Field(default=300_000, ge=4, description="largest mesh accepted, in triangles")
    max_bodies: int = Field(default=16, ge=1, description="most separate bodies accepted")
    timeout_s: float = Field(default=60.0, gt=0, le=600, description="wall-clock limit of the script's run")
    memory_mb: int = Field(default=2048, ge=256, description="memory limit of each process of a run")
    max_file_mb: int = Field(default=64, ge=1, description="largest file a script may write, MiB")


@dataclass(frozen=True)
class _Check:
    name: str
    ok: bool
    problem: str = ""


def _run(task: Task, code: str, config: CadGeometryConfig, files: dict[str, bytes] | None = None) -> ExecResult:
    from veriloop.sandbox import Limits
    from veriloop.verifiers.code._code_sandbox import environment_sandbox, sandbox_lost

    sandbox = environment_sandbox(task.environment)
    limits = Limits(
        timeout_s=config.timeout_s,
        memory_mb=config.memory_mb,
        max_file_mb=config.max_file_mb,
        disk_mb=config.max_file_mb * 2,
    )
    result = sandbox.run_python(code, files=files, limits=limits, capture=files is None)
    if sandbox_lost(result):
        result = sandbox.run_python(code, files=files, limits=limits, capture=files is None)
    return result


def _output(result: ExecResult, config: CadGeometryConfig) -> bytes | None:
    if result.snapshot is None:
        return None
    return result.snapshot.files().get(config.output)


def _gold_model(task: Task, config: CadGeometryConfig) -> bytes:
    """The gold script's STL, built once per process (a gold that fails is a grader error)."""
    if not isinstance(task.gold, str) or not task.gold.strip():
        raise GraderError("cad_geometry needs the task's gold: a reference script")
    key = hashlib.sha256(f"{task.environment}\0{config.output}\0{task.gold}".encode()).hexdigest()
    with _gold_lock:
        if key in _GOLD_CACHE:
            _GOLD_CACHE.move_to_end(key)
            return _GOLD_CACHE[key]
    result = _run(task, extract_code(task.gold)[0], config)
    model = _output(result, config) if result.ok else None
    if model is None:
        tail = result.stderr.strip()[-300:]
        raise GraderError(f"the gold script did not write {config.output}: {result.status} {tail}".rstrip())
    with _gold_lock:
        _GOLD_CACHE[key] = model
        while len(_GOLD_CACHE) > _GOLD_CACHE_SIZE:
            _GOLD_CACHE.popitem(last=False)
    return model


def _measure(task: Task, config: CadGeometryConfig, candidate: bytes, gold: bytes) -> dict[str, Any] | None:
    """The measurer's figures, or None when the candidate's file made it fail (too costly to read)."""
    limits = {
        "max_faces": config.max_faces,
        "max_bodies": config.max_bodies,
        "gap_search": 1000.0,
        "wall": config.min_wall is not None,
        "render": config.render,
        "render_size": config.render_size,
    }
    files = {"candidate.stl": candidate, "gold.stl": gold, "limits.json": json.dumps(limits).encode()}
    files["_render.py"] = RENDER_SOURCE
    result = _run(task, MEASURE_SOURCE, config, files)
    if result.status in ("timeout", "memory_limit", "output_limit"):
        return None
    lines = result.stdout.strip().splitlines()
    try:
        figures = json.loads(lines[-1])
    except (ValueError, IndexError):
        raise GraderError(f"the measurement failed: {result.status} {result.stderr.strip()[-300:]}") from None
    if figures["gold"].get("problem"):
        raise GraderError(f"the gold model is not valid: {figures['gold']['problem']}")
    return figures


def _relative(name: str, got: float, want: float, tolerance: float) -> _Check:
    off = abs(got - want) / abs(want) if want else abs(got)
    if off <= tolerance:
        return _Check(name, True)
    return _Check(name, False, f"{name} {got:.6g} is {off:.1%} off the specification ({want:.6g})")


def _bounds(got: list[list[float]], want: list[list[float]], tolerance: float) -> _Check:
    worst = max(abs(g - w) for gs, ws in zip(got, want) for g, w in zip(gs, ws))
    if worst <= tolerance:
        return _Check("bounding box", True)
    shown = " to ".join("(" + ", ".join(f"{v:.4g}" for v in corner) + ")" for corner in got)
    wanted = " to ".join("(" + ", ".join(f"{v:.4g}" for v in corner) + ")" for corner in want)
    return _Check("bounding box", False, f"bounding box {shown} is up to {worst:.3g} mm off {wanted}")


def _count(name: str, got: int, want: int) -> _Check:
    return _Check(name, got == want, "" if got == want else f"{got} {name}, the part has {want}")


def _wall(config: CadGeometryConfig, cand: dict[str, Any], gold: dict[str, Any]) -> _Check:
    """The candidate's thinnest wall against the one the task states (or the gold's)."""
    required = gold.get("wall") if config.min_wall == "gold" else config.min_wall
    if required is None:
        raise GraderError("the gold model's thinnest wall could not be measured")
    measured = cand.get("wall")
    if measured is None:
        return _Check("wall thickness", False, "the thinnest wall could not be measured (no ray left the solid)")
    thick = measured >= required - config.wall_tol
    problem = "" if thick else f"thinnest wall {measured:.3g} mm, the part needs at least {required:.3g} mm"
    return _Check("wall thickness", thick, problem)


def _gates(config: CadGeometryConfig, figures: dict[str, Any]) -> list[str]:
    """What makes the model another shape than the part, whatever its figures: reward 0."""
    cand, gold, iou = figures["candidate"], figures["gold"], figures["iou"] or 0.0
    thickness, volume = figures["deviation"] or (0.0, 0.0)
    problems = []
    if cand["bodies"] != gold["bodies"]:
        problems.append(f"{cand['bodies']} separate bodies, the part has {gold['bodies']}")
    if cand["holes"] != gold["holes"]:
        problems.append(f"{cand['holes']} holes (genus), the part has {gold['holes']}")
    if cand["overlap"] > 1e-6 * gold["volume"]:
        problems.append(f"bodies intersect each other by {cand['overlap']:.4g} mm3")
    if not 0 <= iou <= 1 + 1e-9 or iou < config.min_iou:
        problems.append(f"volumetric IoU with the specified part is {iou:.3f}, needs {config.min_iou:g}")
    if thickness > config.max_deviation:
        problems.append(
            f"a region of {volume:.4g} mm3 differs from the part, {thickness:.3g} mm thick "
            f"(at most {config.max_deviation:g}): a feature is missing, extra or moved"
        )
    stray, where = figures.get("stray") or (0.0, None)
    if stray > config.max_stray:
        at = ", ".join(f"{x:.3g}" for x in where)
        problems.append(
            f"the model's surface strays {stray:.3g} mm from the part's at ({at}) (at most {config.max_stray:g}): "
            "a cut, a slot or a fin the part does not have, or a feature missing"
        )
    return problems


def _checks(config: CadGeometryConfig, cand: dict[str, Any], gold: dict[str, Any]) -> list[_Check]:
    checks = [
        _relative("volume", cand["volume"], gold["volume"], config.volume_rel_tol),
        _relative("surface area", cand["area"], gold["area"], config.area_rel_tol),
        _bounds(cand["bounds"], gold["bounds"], config.bounds_abs_tol),
    ]
    if config.min_clearance is not None and gold["bodies"] > 1:
        gap = cand["gap"] if cand["gap"] is not None else 0.0
        wide = gap >= config.min_clearance
        checks.append(
            _Check(
                "clearance", wide, "" if wide else f"gap {gap:.4g} mm between bodies, needs {config.min_clearance:g}"
            )
        )
    if config.min_wall is not None:
        checks.append(_wall(config, cand, gold))
    return checks


def _zero(detail: str, feedback: str, environment: str | None = None, images: dict[str, str] | None = None) -> Verdict:
    return Verdict(0.0, False, detail=detail, feedback=feedback, environment=environment, images=images or {})


@register_verifier("cad_geometry", CadGeometryConfig)
def check_cad_geometry(config: CadGeometryConfig, task: Task, response: str) -> Verdict:
    """Run the script, measure its model against the gold's, reward the share of checks passed."""
    if task.environment is None:
        raise GraderError("cad_geometry runs on an environment: give the task an 'environment' with manifold3d")
    gold = _gold_model(task, config)
    script, _ = extract_code(response)
    if not script.strip():
        return _zero("no script in the answer", "Answer with a Python script in a ```python block.")
    result = _run(task, script, config)
    environment = result.environment
    if not result.ok:
        tail = result.stderr.strip()[-400:]
        return _zero(
            f"the script ended: {result.status} {tail}".rstrip(), f"The script failed ({result.status}): {tail}"
        )
    candidate = _output(result, config)
    if candidate is None:
        return _zero(f"no {config.output} written", f"The script ran but wrote no {config.output}.", environment)
    figures = _measure(task, config, candidate, gold)
    if figures is None or figures["candidate"] is None:
        return _zero("the model could not be measured", "The model is too large to measure.", environment)
    cand = figures["candidate"]
    images = {RENDER_IMAGE: cand["render"]} if cand.get("render") else {}
    if cand.get("problem"):
        return _zero(cand["problem"], f"The model is not a valid solid: {cand['problem']}.", environment, images)
    iou = figures["iou"] or 0.0
    checks = _checks(config, cand, figures["gold"])
    gates = _gates(config, figures)
    if gates:
        problems = "; ".join(gates + [c.problem for c in checks if not c.ok])
        return _zero(problems, f"Wrong shape: {problems}.", environment, images)
    right = sum(c.ok for c in checks)
    failed = [c.problem for c in checks if not c.ok]
    detail = f"{right}/{len(checks)} checks passed, IoU {iou:.3f}" + "".join(f"; {p}" for p in failed)
    feedback = "The model matches the specification." if not failed else "; ".join(failed) + "."
    return Verdict(
        right / len(checks), not failed, detail=detail, feedback=feedback, environment=environment, images=images
    )


@register_task_check("cad_geometry")
def cad_task_problem(config: CadGeometryConfig, task: Task) -> str | None:
    """A reference script as gold, an environment to run it on, an output path inside the workspace."""
    if not isinstance(task.gold, str) or not task.gold.strip():
        return "the task's gold must be a reference script"
    if task.environment is None:
        return "the task needs an 'environment' (one with manifold3d, trimesh and numpy)"
    try:
        workspace_path(config.output)
    except WorkspaceError as exc:
        return f"output: {exc}"
    return None
