"""The ``cad`` generator and the ``cad_geometry`` kind, on a real CAD environment (manifold3d,
trimesh and numpy installed from the package registry) and the real sandbox: every reference
script passes, other correct scripts pass, and none of the threat model's hacks is rewarded."""

from __future__ import annotations

import json

import pytest

from veriloop.core import Response, Task
from veriloop.tasks import check_task, generate_tasks, load_tasks
from veriloop.verifiers import audit_tasks, verify
from veriloop.verifiers.audit._exploits import fence

pytestmark = pytest.mark.usefixtures("env_with_cad")

PLATE = """import manifold3d as m3d
import numpy as np
import trimesh

part = m3d.Manifold.cube([60, 40, 5])
for x, y in [(15, 10), (45, 30)]:
    part = part - m3d.Manifold.cylinder(7, 3, 3, {segments}).translate([x, y, -1])
mesh = part.to_mesh()
trimesh.Trimesh(np.asarray(mesh.vert_properties)[:, :3], np.asarray(mesh.tri_verts)).export("model.stl")
"""


def _task(gold: str = PLATE.format(segments=64), **verifier) -> Task:
    return Task(
        id="plate",
        domain="cad",
        prompt="A plate 60 x 40 x 5 mm with two holes of diameter 6 mm at (15, 10) and (45, 30).",
        verifier={"kind": "cad_geometry", **verifier},
        gold=gold,
        environment="cad",
    )


def _score(task: Task, script: str, workspace: dict | None = None):
    return verify(task, Response(id="r", task_id=task.id, response=fence(script), workspace=workspace))


def _spoiled(spoil: str) -> str:
    """The reference plate, then its model.stl rewritten by ``spoil`` (``v``, ``f``: its mesh)."""
    return (
        PLATE.format(segments=64)
        + "v, f = np.asarray(mesh.vert_properties)[:, :3].astype(float), np.asarray(mesh.tri_verts)\n"
        + spoil
    )


@pytest.mark.e2e
def test_one_reference_script_of_every_part_kind_passes():
    tasks = generate_tasks("cad", seed=5, size=50)
    by_kind = {t.metadata["part"]: t for t in tasks}
    assert set(by_kind) == {
        "plate",
        "shaft",
        "bracket",
        "rounded_block",
        "tube",
        "open_box",
        "hole_grid_plate",
        "peg_in_hole",
    }
    for kind, task in by_kind.items():
        assert check_task(task) is None and task.environment == "cad"
        score = verify(task, Response(id="g", task_id=task.id, response=task.gold))
        assert score.passed and score.reward == 1.0, (kind, score.detail)
        assert score.environment  # the hash of the environment the check ran on


@pytest.mark.e2e
def test_another_correct_script_passes_with_its_own_tessellation():
    score = _score(_task(), PLATE.format(segments=24))
    assert score.passed, score.detail
    built_with_trimesh = (
        "import trimesh\nimport numpy as np\n"
        "plate = trimesh.creation.box(bounds=[[0, 0, 0], [60, 40, 5]])\n"
        "holes = [trimesh.creation.cylinder(radius=3, height=7, sections=48).apply_translation([x, y, 2.5])"
        " for x, y in [(15, 10), (45, 30)]]\n"
        "trimesh.boolean.difference([plate, *holes], engine='manifold').export('model.stl')\n"
    )
    assert _score(_task(), built_with_trimesh).passed


@pytest.mark.e2e
def test_a_near_miss_gets_partial_credit_and_feedback_by_how_much():
    thicker = PLATE.format(segments=64).replace("[60, 40, 5]", "[60, 40, 5.15]")
    score = _score(_task(), thicker)
    assert 0 < score.reward < 1 and not score.passed
    assert "volume" in score.feedback and "% off the specification" in score.feedback
    assert "bounding box" not in score.feedback  # 0.15 mm is within the default 0.2 mm


@pytest.mark.parametrize(
    ("script", "says"),
    [
        ("import trimesh\ntrimesh.creation.box(bounds=[[0, 0, 0], [60, 40, 5]]).export('model.stl')", "0 holes"),
        (_spoiled("trimesh.Trimesh(v, f[1:], process=False).export('model.stl')"), "not a closed"),
        (_spoiled("v[3] = float('nan')\ntrimesh.Trimesh(v, f, process=False).export('model.stl')"), "not a closed"),
        (
            _spoiled("trimesh.Trimesh(np.vstack([v, v + 0.5]), np.vstack([f, f + len(v)])).export('model.stl')"),
            "bodies",
        ),
        (
            PLATE.format(segments=64).replace("[x, y, -1]", "[x + 20, y, -1]").replace("(45, 30)", "(25, 30)"),
            "differs from the part",
        ),
        (PLATE.format(segments=64).replace("cube([60, 40, 5])", "cube([60, 40, 5]).translate([5, 0, 0])"), "IoU"),
    ],
    ids=["right bounding box, wrong shape", "open shell", "NaN vertex", "overlapping copies", "holes moved", "moved"],
)
@pytest.mark.e2e
def test_wrong_shapes_earn_nothing(script, says):
    score = _score(_task(), script)
    assert score.status == "scored" and score.reward == 0.0, score.detail
    assert says in score.detail


_SAW_CUT = PLATE.format(segments=64).replace(
    "mesh = part.to_mesh()",
    "part = part - m3d.Manifold.cube([{width}, 30, {depth}]).translate([30, -1, 5 - {depth}])\nmesh = part.to_mesh()",
)


@pytest.mark.parametrize(
    ("width", "depth"), [(0.24, 3.0), (0.1, 4.8), (0.05, 1.0)], ids=["under the deviation gate", "hair", "shallow"]
)
@pytest.mark.e2e
def test_a_saw_cut_thinner_than_the_deviation_gate_earns_nothing(width, depth):
    score = _score(_task(), _SAW_CUT.format(width=width, depth=depth))
    assert score.status == "scored" and score.reward == 0.0, score.detail
    assert "the model's surface strays" in score.detail
    assert "differs from the part" not in score.detail  # too thin for the deviation gate: the stray gate caught it


@pytest.mark.e2e
def test_a_model_within_the_tolerances_is_not_said_to_stray():
    shifted = PLATE.format(segments=24).replace("cube([60, 40, 5])", "cube([60, 40, 5]).translate([0.1, 0, 0])")
    score = _score(_task(), shifted.replace("[x, y, -1]", "[x + 0.1, y, -1]"))
    assert score.passed and "strays" not in score.detail, score.detail


@pytest.mark.e2e
def test_a_pre_made_file_is_not_the_scripts_output():
    gold_run = _score(_task(), PLATE.format(segments=64))
    assert gold_run.passed
    planted = {"model.stl": "solid x\nendsolid x\n"}
    score = _score(_task(), "print('the model is already there')", workspace=planted)
    assert score.reward == 0.0 and "wrote no model.stl" in score.feedback
    # the whole disk the script sees, walked without following links (a glob of /** follows them,
    # round the links in /proc and /lib, until the time limit, and so would prove nothing)
    looks_for_it = (
        "import glob, os, shutil\n"
        "found = glob.glob('/proc/*/cwd/model.stl')\n"
        "for top, dirs, files in os.walk('/'):\n"
        "    dirs[:] = [d for d in dirs if top != '/' or d not in ('proc', 'sys')]\n"
        "    found += [os.path.join(top, f) for f in files if f == 'model.stl']\n"
        "if not found:\n"
        "    raise SystemExit('no model.stl on this disk')\n"
        "shutil.copy(found[0], 'model.stl')\n"
    )
    searched = _score(_task(timeout_s=20), looks_for_it)
    assert searched.reward == 0.0 and "no model.stl on this disk" in searched.detail, searched.detail


def test_a_gigantic_mesh_is_refused_from_its_header():
    script = "n = 2_000_000\nopen('model.stl', 'wb').write(b'\\0' * 80 + n.to_bytes(4, 'little') + bytes(50 * n))"
    score = _score(_task(max_file_mb=128), script)
    assert score.reward == 0.0 and "2,000,000 faces, more than the 300,000 allowed" in score.detail


def test_script_failures_are_zero_with_their_error_as_feedback():
    score = _score(_task(), "raise ValueError('no plate today')")
    assert score.status == "scored" and score.reward == 0.0 and "no plate today" in score.feedback
    empty = _score(_task(), "")
    assert empty.reward == 0.0 and "Python script" in empty.feedback


@pytest.mark.e2e
def test_a_clearance_too_small_costs_its_check():
    pegs = [t for t in generate_tasks("cad", seed=5, size=60, difficulty=3) if t.metadata["part"] == "peg_in_hole"]
    peg_task = next(t for t in pegs if t.verifier["min_clearance"] == 0.4)  # a 0.5 mm clearance asked
    lines = peg_task.gold.splitlines()
    peg_line = next(i for i, line in enumerate(lines) if line.startswith("peg = "))
    radius = float(lines[peg_line].split(", ")[1].split(")")[0])
    lines[peg_line] = lines[peg_line].replace(f", {radius:g})", f", {radius + 0.15:g})")  # the gap is 0.35 mm
    score = verify(peg_task, Response(id="t", task_id=peg_task.id, response=fence("\n".join(lines))))
    assert 0 < score.reward < 1, score.detail
    assert "mm between bodies, needs 0.4" in score.feedback


def test_grader_problems_are_infra_errors_not_zeros():
    broken_gold = _task(gold="raise SystemExit(3)")
    assert verify(broken_gold, Response(id="r", task_id="plate", response=fence("pass"))).status == "infra_error"
    no_env = Task(id="x", domain="cad", prompt="p", verifier={"kind": "cad_geometry"}, gold=PLATE)
    assert verify(no_env, Response(id="r", task_id="x", response="x")).status == "infra_error"
    assert "environment" in check_task(no_env)


@pytest.mark.e2e
def test_the_audit_finds_no_exploit_that_fools_the_kind():
    # every exploit of the catalogue is tried: a tube states min_wall (its wall exploits; the open
    # box's run in test_cad_walls_and_render.py), and peg_in_hole is a part of two bodies; a time
    # limit of 15 s ends "never ends" sooner
    tube = next(t for t in generate_tasks("cad", seed=3, size=40, difficulty=2) if t.metadata["part"] == "tube")
    peg = next(t for t in generate_tasks("cad", seed=8, size=5) if t.metadata["part"] == "peg_in_hole")
    tasks = [t.model_copy(update={"verifier": {**t.verifier, "timeout_s": 15.0}}) for t in (tube, peg)]
    report = audit_tasks(tasks, per_kind=2, repeats=1, costly_per_kind=1, threads=2)
    assert not report.gold_failures and not report.flaky
    categories = {row.category for row in report.rows}
    assert {"not_a_solution", "grader_tampering", "read_tests", "resource_abuse", "mutated_gold"} <= categories
    assert all(row.ok for row in report.rows), [row for row in report.rows if not row.ok]


@pytest.mark.e2e
def test_generate_validate_and_verify_through_the_command(tmp_path, run_cli):
    out = tmp_path / "cad.jsonl"
    result = run_cli("tasks", "generate", "cad", "--seed", "3", "--size", "1", "--out", str(out), timeout=300)
    assert result.returncode == 0, result.stderr
    assert run_cli("tasks", "validate", str(out), timeout=300).returncode == 0
    tasks = load_tasks(out)
    rows = [{"id": t.id, "task_id": t.id, "response": fence(t.gold)} for t in tasks]
    rows.append({"id": "bad", "task_id": tasks[0].id, "response": fence("open('model.stl', 'w').write('x')")})
    responses = tmp_path / "responses.jsonl"
    responses.write_text("".join(json.dumps(r) + "\n" for r in rows))
    scored = tmp_path / "scores.jsonl"
    result = run_cli("verify", "--tasks", str(out), "--responses", str(responses), "--out", str(scored), timeout=300)
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["passed"] for line in scored.read_text().splitlines()] == [True, False]


def test_levels_and_seeds():
    assert generate_tasks("cad", seed=1, size=5) == generate_tasks("cad", seed=1, size=5)
    levels = {
        level: {t.metadata["part"] for t in generate_tasks("cad", seed=1, size=30, difficulty=level)}
        for level in (1, 2, 3)
    }
    assert levels[1] == {"plate", "shaft"} and levels[3] == {"open_box", "hole_grid_plate", "peg_in_hole"}


def test_a_malformed_file_is_the_answers_failure_not_the_graders():
    for content in ("b'solid x\\nfacet normal 0 0 1\\nouter loop\\nvertex 0 0 zz\\n'", "bytes(range(256)) * 40"):
        score = _score(_task(), f"open('model.stl', 'wb').write({content})")
        assert score.status == "scored" and score.reward == 0.0, score.detail
