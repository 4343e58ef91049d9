"""The ``cad`` generator: parts described in words and numbers, to be modelled by a script.

Each task describes one part or a two-part assembly in millimetres, placed in a stated frame:
a plate with through-holes, a stepped shaft, an L-bracket, a block with rounded vertical edges,
a tube and an open box with walls of a given thickness (checked as the thinnest wall the model
may have), a peg standing in a plate's hole with a radial
clearance. The answer is a Python script that builds it (with ``manifold3d``, ``trimesh`` and
``numpy``, the packages of the ``cad`` environment) and writes ``model.stl``; the task's gold
is a reference script, and the ``cad_geometry`` verifier compares the two solids.

Difficulty: level 1 asks for a plate with one or two holes or a two-step shaft; level 2 for a
bracket with a hole, a rounded block, a three-step shaft, a plate with more holes or a tube of a
given wall; level 3
for an open box, a plate with a grid of holes and rounded corners, or the peg-in-hole assembly
whose parts must not touch.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import Field

from veriloop.core import Task
from veriloop.tasks._sources import GeneratorOptions, generated_task, id_variant, register_generator, seeded_streams

CAD_ENVIRONMENT_PACKAGES = ("manifold3d", "trimesh", "numpy")
_SEGMENTS = 64  # circle facets of the reference scripts

_HEADER = """import manifold3d as m3d
import numpy as np
import trimesh

m3d.set_circular_segments({segments})
"""
_EXPORT = """
mesh = part.to_mesh()
trimesh.Trimesh(vertices=np.asarray(mesh.vert_properties)[:, :3], faces=np.asarray(mesh.tri_verts)).export("model.stl")
"""


@dataclass(frozen=True)
class Part:
    """What the prompt says and the reference script that builds it."""

    kind: str
    description: str
    body: str  # the script's modelling lines; they leave the solid in ``part``
    min_clearance: float | None = None
    min_wall: float | None = None


def _mm(value: float) -> str:
    return f"{value:g}"


def _holes(rng: random.Random, length: float, width: float, count: int, diameter: float) -> list[tuple[float, float]]:
    """Hole centres at least a diameter from the edges and two diameters apart."""
    placed: list[tuple[float, float]] = []
    for _ in range(count * 200):
        x = round(rng.uniform(diameter * 1.5, length - diameter * 1.5))
        y = round(rng.uniform(diameter * 1.5, width - diameter * 1.5))
        if all((x - a) ** 2 + (y - b) ** 2 >= (2.2 * diameter) ** 2 for a, b in placed):
            placed.append((x, y))
        if len(placed) == count:
            break
    return placed


def _hole_lines(centres: list[tuple[float, float]], diameter: float, thickness: float) -> str:
    radius = diameter / 2
    lines = [
        f"part = part - m3d.Manifold.cylinder({_mm(thickness + 2)}, {_mm(radius)}).translate([{x:g}, {y:g}, -1])"
        for x, y in centres
    ]
    return "\n".join(lines)


def _plate(rng: random.Random, holes: int) -> Part:
    length, width, thickness = rng.randrange(50, 121, 5), rng.randrange(30, 81, 5), rng.randint(3, 10)
    diameter = rng.choice((4, 5, 6, 8))
    centres = _holes(rng, length, width, holes, diameter)
    where = ", ".join(f"({x:g}, {y:g})" for x, y in centres)
    description = (
        f"A rectangular plate {length} x {width} x {thickness} mm occupying 0 <= x <= {length}, "
        f"0 <= y <= {width}, 0 <= z <= {thickness}, with {len(centres)} through-hole(s) of diameter "
        f"{diameter} mm along z, centred at (x, y) = {where}."
    )
    body = f"part = m3d.Manifold.cube([{length}, {width}, {thickness}])\n" + _hole_lines(centres, diameter, thickness)
    return Part("plate", description, body)


def _shaft(rng: random.Random, steps: int) -> Part:
    diameters = sorted(rng.sample(range(8, 41, 2), steps), reverse=True)
    lengths = [rng.randrange(10, 61, 5) for _ in range(steps)]
    parts, lines, z = [], ["part = m3d.Manifold()"], 0
    for diameter, length in zip(diameters, lengths):
        parts.append(f"diameter {diameter} mm for {length} mm (z = {z} to {z + length})")
        lines.append(f"part = part + m3d.Manifold.cylinder({length}, {_mm(diameter / 2)}).translate([0, 0, {z}])")
        z += length
    description = (
        f"A stepped shaft of {steps} coaxial cylindrical sections on the z axis, starting at z = 0: "
        + "; ".join(parts)
        + "."
    )
    return Part("shaft", description, "\n".join(lines))


def _bracket(rng: random.Random) -> Part:
    length, width, height = rng.randrange(40, 91, 5), rng.randrange(20, 61, 5), rng.randrange(30, 81, 5)
    thickness, diameter = rng.randint(4, 8), rng.choice((5, 6, 8))
    hole_y, hole_z = width / 2, round(rng.uniform(thickness + diameter * 1.5, height - diameter * 1.5))
    description = (
        f"An L-bracket: a base plate occupying 0 <= x <= {length}, 0 <= y <= {width}, 0 <= z <= {thickness}, "
        f"and an upright plate occupying 0 <= x <= {thickness}, 0 <= y <= {width}, 0 <= z <= {height}, joined "
        f"into one solid; the upright has one through-hole of diameter {diameter} mm along x centred at "
        f"(y, z) = ({hole_y:g}, {hole_z:g})."
    )
    body = (
        f"part = m3d.Manifold.cube([{length}, {width}, {thickness}]) + m3d.Manifold.cube([{thickness}, {width}, {height}])\n"
        f"hole = m3d.Manifold.cylinder({thickness + 2}, {_mm(diameter / 2)}).rotate([0, 90, 0])"
        f".translate([-1, {hole_y:g}, {hole_z:g}])\npart = part - hole"
    )
    return Part("bracket", description, body)


def _rounded_block(rng: random.Random) -> Part:
    length, width, height = rng.randrange(30, 81, 5), rng.randrange(20, 61, 5), rng.randrange(10, 41, 5)
    radius = rng.choice((3, 4, 5, 6))
    description = (
        f"A block occupying 0 <= x <= {length}, 0 <= y <= {width}, 0 <= z <= {height} whose four vertical "
        f"edges (parallel to z) are rounded with fillets of radius {radius} mm."
    )
    corners = [(radius, radius), (length - radius, radius), (radius, width - radius), (length - radius, width - radius)]
    cylinders = ", ".join(f"m3d.Manifold.cylinder({height}, {radius}).translate([{x}, {y}, 0])" for x, y in corners)
    return Part("rounded_block", description, f"part = m3d.Manifold.batch_hull([{cylinders}])")


def _open_box(rng: random.Random) -> Part:
    length, width, height = rng.randrange(30, 81, 5), rng.randrange(30, 81, 5), rng.randrange(20, 51, 5)
    wall = rng.choice((2, 3, 4))
    description = (
        f"An open-top box: outer size {length} x {width} x {height} mm occupying 0 <= x <= {length}, "
        f"0 <= y <= {width}, 0 <= z <= {height}, with side walls and a floor {wall} mm thick and no lid "
        f"(the cavity is open at z = {height})."
    )
    body = (
        f"part = m3d.Manifold.cube([{length}, {width}, {height}])\n"
        f"part = part - m3d.Manifold.cube([{length - 2 * wall}, {width - 2 * wall}, {height}])"
        f".translate([{wall}, {wall}, {wall}])"
    )
    return Part("open_box", description, body, min_wall=wall)


def _tube(rng: random.Random) -> Part:
    outer, wall, length = rng.randrange(16, 61, 2), rng.choice((1.5, 2, 2.5, 3)), rng.randrange(20, 81, 5)
    description = (
        f"A tube (a hollow cylinder open at both ends) on the z axis from z = 0 to z = {length}: outer "
        f"diameter {outer} mm, wall {_mm(wall)} mm thick (bore diameter {_mm(outer - 2 * wall)} mm)."
    )
    body = (
        f"part = m3d.Manifold.cylinder({length}, {_mm(outer / 2)})\n"
        f"part = part - m3d.Manifold.cylinder({length + 2}, {_mm(outer / 2 - wall)}).translate([0, 0, -1])"
    )
    return Part("tube", description, body, min_wall=wall)


def _hole_grid_plate(rng: random.Random) -> Part:
    rows, columns = rng.randint(2, 3), rng.randint(2, 4)
    pitch, diameter, thickness = rng.choice((12, 15, 20)), rng.choice((4, 5, 6)), rng.randint(3, 8)
    margin, radius = pitch, rng.choice((3, 4, 5))
    length, width = pitch * (columns - 1) + 2 * margin, pitch * (rows - 1) + 2 * margin
    centres = [(margin + c * pitch, margin + r * pitch) for r in range(rows) for c in range(columns)]
    description = (
        f"A plate {length} x {width} x {thickness} mm occupying 0 <= x <= {length}, 0 <= y <= {width}, "
        f"0 <= z <= {thickness}, its four vertical edges rounded with radius {radius} mm, with a {rows} x "
        f"{columns} grid of through-holes of diameter {diameter} mm along z: the first at ({margin}, {margin}), "
        f"{pitch} mm apart in x and in y."
    )
    corners = [(radius, radius), (length - radius, radius), (radius, width - radius), (length - radius, width - radius)]
    cylinders = ", ".join(f"m3d.Manifold.cylinder({thickness}, {radius}).translate([{x}, {y}, 0])" for x, y in corners)
    body = f"part = m3d.Manifold.batch_hull([{cylinders}])\n" + _hole_lines(centres, diameter, thickness)
    return Part("hole_grid_plate", description, body)


def _peg_in_hole(rng: random.Random) -> Part:
    size, thickness = rng.randrange(30, 61, 5), rng.randint(6, 12)
    hole, clearance = rng.choice((10, 12, 16, 20)), rng.choice((0.5, 1.0, 1.5))
    peg, peg_length = hole - 2 * clearance, thickness + rng.randint(10, 30)
    centre = size / 2
    description = (
        f"An assembly of two separate parts that must not touch. Part 1: a square plate {size} x {size} x "
        f"{thickness} mm occupying 0 <= x <= {size}, 0 <= y <= {size}, 0 <= z <= {thickness}, with a through-hole "
        f"of diameter {hole} mm along z centred at ({centre:g}, {centre:g}). Part 2: a cylindrical peg of "
        f"diameter {_mm(peg)} mm standing in the hole on the same axis, from z = -5 to z = {peg_length - 5}. "
        f"The radial clearance between peg and hole is {_mm(clearance)} mm; write both parts into the one file."
    )
    body = (
        f"plate = m3d.Manifold.cube([{size}, {size}, {thickness}])\n"
        f"plate = plate - m3d.Manifold.cylinder({thickness + 2}, {_mm(hole / 2)}).translate([{centre:g}, {centre:g}, -1])\n"
        f"peg = m3d.Manifold.cylinder({peg_length}, {_mm(peg / 2)}).translate([{centre:g}, {centre:g}, -5])\n"
        "part = plate + peg"
    )
    return Part("peg_in_hole", description, body, min_clearance=round(clearance * 0.8, 3))


PartKind = Callable[[random.Random], Part]
PART_KINDS: dict[int, tuple[PartKind, ...]] = {
    1: (lambda rng: _plate(rng, rng.randint(1, 2)), lambda rng: _shaft(rng, 2)),
    2: (
        _bracket,
        _rounded_block,
        lambda rng: _shaft(rng, 3),
        lambda rng: _plate(rng, rng.randint(3, 4)),
        _tube,
    ),
    3: (_open_box, _hole_grid_plate, _peg_in_hole),
}


class CadOptions(GeneratorOptions):
    difficulty: int | None = Field(default=None, ge=1, le=3, description="level 1-3; default: each task draws one")
    environment: str = Field(default="cad", description="environment the scripts run on (manifold3d, trimesh, numpy)")
    min_iou: float = Field(default=0.95, ge=0, le=1, description="least volumetric IoU with the reference model")
    domain: str = Field(default="cad", min_length=1, description="domain name of the tasks")
    render: bool = Field(default=False, description="the verifier attaches a PNG picture of each answer's model")


def reference_script(part: Part) -> str:
    """The gold: a complete script that builds ``part`` and writes model.stl."""
    return _HEADER.format(segments=_SEGMENTS) + "\n" + part.body + "\n" + _EXPORT


def _prompt(part: Part) -> str:
    return (
        f"{part.description}\n\nWrite a Python script that builds this as a solid and writes it as an STL file "
        "named model.stl in the current folder. Units are millimetres; place it exactly as stated. The "
        "packages manifold3d (booleans, primitives, hulls), trimesh (export) and numpy are installed. "
        "Answer with the script in a ```python block."
    )


@register_generator("cad", CadOptions, environment_packages=CAD_ENVIRONMENT_PACKAGES)
def generate_cad(options: CadOptions) -> list[Task]:
    """Parts and assemblies to model by script, checked by ``cad_geometry`` against a reference model."""
    tasks = []
    variant = id_variant(options, ("difficulty",))
    for index, rng in seeded_streams("cad", options):
        level = options.difficulty or rng.randint(1, 3)
        part = rng.choice(PART_KINDS[level])(rng)
        verifier = {"kind": "cad_geometry", "min_iou": options.min_iou}
        if part.min_clearance is not None:
            verifier["min_clearance"] = part.min_clearance
        if part.min_wall is not None:
            verifier["min_wall"] = part.min_wall
        if options.render:
            verifier["render"] = True
        tasks.append(
            generated_task(
                "cad",
                options,
                index,
                level,
                len(PART_KINDS),
                {"part": part.kind},
                variant,
                domain=options.domain,
                prompt=_prompt(part),
                verifier=verifier,
                gold=reference_script(part),
                environment=options.environment,
            )
        )
    return tasks
