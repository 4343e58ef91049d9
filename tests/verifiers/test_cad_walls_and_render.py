"""``cad_geometry``'s thinnest-wall check and its rendered picture, on the real CAD environment:
a part whose walls are too thin fails the check even with the right bounding box and volume,
the generator's tubes and boxes state their wall and their golds pass, and the picture of the
candidate's model is a real PNG of the asked size that tells two parts apart."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from veriloop.core import Response, Task
from veriloop.tasks import generate_tasks
from veriloop.verifiers import verify
from veriloop.verifiers.audit._exploits import fence

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("env_with_cad")]

SCRIPT = """import manifold3d as m3d
import numpy as np
import trimesh

part = {part}
mesh = part.to_mesh()
trimesh.Trimesh(np.asarray(mesh.vert_properties)[:, :3], np.asarray(mesh.tri_verts)).export("model.stl")
"""
BOX = "m3d.Manifold.cube([60, 40, 30]) - m3d.Manifold.cube([{inner}]).translate([{offset}])"
GOLD_BOX = SCRIPT.format(part=BOX.format(inner="54, 34, 30", offset="3, 3, 3"))  # walls and floor 3 mm
# walls 1.5 mm, the floor thickened to 6.495 mm so the volume is the gold's (22,428 mm3) to 0.01%
THIN_BOX = SCRIPT.format(part=BOX.format(inner="57, 37, 30", offset="1.5, 1.5, 6.495"))
PLATE = SCRIPT.format(part="m3d.Manifold.cube([60, 40, 5])")


PART = Task(id="part", domain="cad", prompt="the part", verifier={"kind": "cad_geometry"}, environment="cad")


def _task(gold: str, **verifier) -> Task:
    return PART.model_copy(update={"gold": gold, "verifier": {"kind": "cad_geometry", **verifier}})


def _score(task: Task, script: str):
    return verify(task, Response(id="r", task_id=task.id, response=fence(script)))


def _picture(score) -> Image.Image:
    return Image.open(io.BytesIO(base64.b64decode(score.images["render.png"])))


def test_walls_too_thin_fail_with_the_right_bounding_box_and_volume():
    task = _task(GOLD_BOX, min_wall=3)
    assert _score(task, GOLD_BOX).reward == 1.0
    score = _score(task, THIN_BOX)
    assert score.reward == 0.0 and not score.passed
    assert "thinnest wall 1.5 mm, the part needs at least 3 mm" in score.feedback
    problems = score.detail.split("; ")
    assert not any(p.startswith(("volume ", "bounding box")) for p in problems), score.detail


def test_the_wall_check_counts_as_one_check_beside_the_others():
    needs_six = _score(_task(PLATE, min_wall=6), PLATE)  # the plate is the part, but 5 mm thick
    assert needs_six.reward == pytest.approx(3 / 4) and not needs_six.passed
    assert "thinnest wall 5 mm, the part needs at least 6 mm" in needs_six.feedback
    assert _score(_task(PLATE, min_wall=5), PLATE).passed
    assert "min_wall" not in _task(PLATE).verifier and _score(_task(PLATE), PLATE).passed


def test_the_golds_thinnest_wall_is_used_when_the_task_says_gold():
    task = _task(PLATE, min_wall="gold")
    assert _score(task, PLATE).passed
    thinner = _score(task, PLATE.replace("[60, 40, 5]", "[60, 40, 4.85]"))
    assert "thinnest wall 4.85 mm, the part needs at least 5 mm" in thinner.feedback


def test_generated_tubes_and_boxes_state_their_wall_and_their_golds_pass():
    tubes = [t for t in generate_tasks("cad", seed=3, size=40, difficulty=2) if t.metadata["part"] == "tube"]
    boxes = [t for t in generate_tasks("cad", seed=3, size=20, difficulty=3) if t.metadata["part"] == "open_box"]
    for task in (tubes[0], boxes[0]):
        wall = task.verifier["min_wall"]
        assert f"{wall:g} mm thick" in task.prompt
        assert verify(task, Response(id="g", task_id=task.id, response=task.gold)).reward == 1.0
    tube = tubes[0]
    bore = next(line for line in tube.gold.splitlines() if ".translate([0, 0, -1])" in line)
    radius = float(bore.split(", ")[1].split(")")[0])
    thinner = tube.gold.replace(bore, bore.replace(f", {radius:g})", f", {radius + 0.6:g})"))
    score = verify(tube, Response(id="t", task_id=tube.id, response=thinner))
    assert score.reward < 1 and f"the part needs at least {tube.verifier['min_wall']:g} mm" in score.feedback


def test_the_rendered_picture_is_a_png_of_the_asked_size_that_tells_parts_apart():
    box = _score(_task(GOLD_BOX, render=True), GOLD_BOX)
    picture = _picture(box)
    assert picture.format == "PNG" and picture.size == (256, 256) and picture.mode == "RGB"
    colours = picture.getcolors(256 * 256)
    assert len(colours) > 3  # background and several shaded faces
    again = _score(_task(GOLD_BOX, render=True), GOLD_BOX)
    assert again.images == box.images  # deterministic
    plate = _score(_task(GOLD_BOX, render=True), PLATE)
    assert plate.reward == 0.0 and plate.images["render.png"] != box.images["render.png"]
    assert _picture(plate).tobytes() != picture.tobytes()
    small = _score(_task(GOLD_BOX, render=True, render_size=96), GOLD_BOX)
    assert _picture(small).size == (96, 96)
    assert _score(_task(GOLD_BOX), GOLD_BOX).images == {}  # off by default


def test_the_audit_tries_thin_walls_and_bad_shells_on_walled_parts_and_none_is_rewarded():
    from veriloop.verifiers import audit_tasks
    from veriloop.verifiers.audit._exploits import exploits_for

    # the open box here; the tube's wall exploits run in the kind's own audit (test_cad_geometry.py)
    box = next(t for t in generate_tasks("cad", seed=3, size=20, difficulty=3) if t.metadata["part"] == "open_box")
    walled = box.model_copy(update={"verifier": {**box.verifier, "render": True}})
    names = {f"{box.id}#{e.category}/{number}": e.name for number, e in enumerate(exploits_for(walled, [walled]))}
    scores = []
    report = audit_tasks([walled], per_kind=1, repeats=1, costly_per_kind=0, threads=2, on_score=scores.append)
    assert not report.gold_failures and not report.flaky
    assert all(row.ok for row in report.rows), [row for row in report.rows if not row.ok]
    assert {"not_a_solution", "grader_tampering"} <= {row.category for row in report.rows}
    probes = {names[s.id]: s for s in scores if s.id in names}  # the audit's own scores, by exploit

    score = probes["walls 0.2 mm thinner"]
    assert score.id.startswith(f"{box.id}#not_a_solution/")
    assert score.status == "scored" and not score.passed and score.reward < 1
    assert f"the part needs at least {box.verifier['min_wall']:g} mm" in score.feedback  # the wall check caught it
    assert score.images["render.png"]  # the picture of the hack, for the review page
    for name in ("walls halved, the volume kept by a thicker floor", "a non-manifold shell (one triangle doubled)"):
        spoiled = probes[name]
        assert spoiled.status == "scored" and spoiled.reward == 0.0, (name, spoiled.detail)
    assert "walls halved" not in " ".join(
        e.name for e in exploits_for(generate_tasks("cad", seed=1, size=1, difficulty=1)[0], [])
    )


def test_the_generator_asks_for_pictures_only_when_told():
    assert all(t.verifier["render"] is True for t in generate_tasks("cad", seed=1, size=4, render=True))
    assert all("render" not in t.verifier for t in generate_tasks("cad", seed=1, size=4))
