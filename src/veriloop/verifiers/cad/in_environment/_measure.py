"""Measure a candidate mesh and compare it with the gold mesh; print one JSON line.

Runs in a sandbox on the CAD environment, in a workspace holding ``candidate.stl``, ``gold.stl``
and ``limits.json`` (``max_faces``, ``max_bodies``, ``gap_search``). Nothing of the candidate's
code runs here: this process only reads its file. The size is checked from the STL header before
anything is loaded, so a gigantic mesh costs nothing.

Output: ``{"candidate": {...}, "gold": {...}, "iou": float | null, "deviation": [mm, mm3] | null}``; a mesh that could not be
measured has ``"problem"`` set and nothing else needed.
"""

import io
import json
import math
import sys
from pathlib import Path

import manifold3d
import numpy
import trimesh


def _face_count(data):
    """Faces an STL declares: the binary header's count, else ASCII facets."""
    if len(data) >= 84:
        count = int.from_bytes(data[80:84], "little")
        if 84 + 50 * count == len(data):
            return count
    return data.count(b"facet normal")


def _manifold(vertices, faces):
    mesh = manifold3d.Mesh(
        vert_properties=numpy.asarray(vertices, dtype=numpy.float32),
        tri_verts=numpy.asarray(faces, dtype=numpy.uint32),
    )
    return manifold3d.Manifold(mesh)


def _pairs(bodies, limits):
    overlap, gap = 0.0, None
    for i, first in enumerate(bodies):
        for second in bodies[i + 1 :]:
            overlap = max(overlap, (first ^ second).volume())
            between = first.min_gap(second, limits["gap_search"])
            gap = between if gap is None else min(gap, between)
    return overlap, gap


def measure(data, limits):
    """The figures of one mesh (``manifold`` is kept out of the JSON)."""
    faces = _face_count(data)
    if not data:
        return {"problem": "the file is empty"}, None
    if faces > limits["max_faces"]:
        return {"problem": f"{faces:,} faces, more than the {limits['max_faces']:,} allowed", "faces": faces}, None
    try:
        mesh = trimesh.load(io.BytesIO(data), file_type="stl", force="mesh")
    except Exception as exc:  # any parse failure of an untrusted file is the file's problem
        return {"problem": f"not a readable STL file ({type(exc).__name__})"}, None
    vertices, triangles = numpy.asarray(mesh.vertices), numpy.asarray(mesh.faces)
    if len(triangles) == 0:
        return {"problem": "the mesh has no faces"}, None
    if not numpy.isfinite(vertices).all():
        return {"problem": "the mesh has vertices that are not finite numbers (NaN or infinity)"}, None
    if numpy.abs(vertices).max() > 1e6:
        return {"problem": "the mesh has vertices more than 1e6 from the origin"}, None
    lower, upper = vertices.min(axis=0), vertices.max(axis=0)
    found = {"faces": int(len(triangles)), "bounds": [lower.tolist(), upper.tolist()]}
    found["watertight"] = bool(mesh.is_watertight and mesh.is_winding_consistent)
    solid = _manifold(vertices, triangles)
    found["manifold"] = str(solid.status()).rsplit(".", 1)[-1]
    if not found["watertight"] or found["manifold"] != "NoError" or mesh.volume <= 0:
        found["problem"] = "the mesh is not a closed, consistently oriented manifold solid"
        return found, None
    bodies = solid.decompose()
    found.update(volume=solid.volume(), area=solid.surface_area(), bodies=len(bodies))
    found["holes"] = sum(body.genus() for body in bodies)
    if len(bodies) > limits["max_bodies"]:
        found["problem"] = f"{len(bodies)} separate bodies, more than the {limits['max_bodies']} allowed"
        return found, None
    found["overlap"], found["gap"] = _pairs(bodies, limits)
    return found, solid


def deviation(first, second):
    """The thickest region where two solids differ: ``2 * volume / area`` of each piece of their
    differences (a slab's thickness, a third of a cube's side), in mm, with that piece's volume.
    Tessellation leaves slivers hundredths of a mm thick; a moved hole leaves a cylinder."""
    worst, worst_volume = 0.0, 0.0
    for piece in (first - second).decompose() + (second - first).decompose():
        volume, area = piece.volume(), piece.surface_area()
        if volume > 1e-9 and area > 0 and 2 * volume / area > worst:
            worst, worst_volume = 2 * volume / area, volume
    return worst, worst_volume


def _measure_candidate(path, limits):
    """The candidate's figures; whatever its file makes fail here is the file's problem."""
    if not path.is_file():
        return None, None
    try:
        return measure(path.read_bytes(), limits)
    except Exception as exc:
        return {"problem": f"the mesh could not be measured ({type(exc).__name__})"}, None


def main():
    limits = json.loads(Path("limits.json").read_text())
    candidate, solid = _measure_candidate(Path("candidate.stl"), limits)
    gold, gold_solid = measure(Path("gold.stl").read_bytes(), limits)
    iou, apart = None, None
    if solid is not None and gold_solid is not None:
        try:
            common = (solid ^ gold_solid).volume()
            union = solid.volume() + gold_solid.volume() - common
            iou = common / union if union > 0 else 0.0
            apart = deviation(solid, gold_solid)
        except Exception as exc:  # the booleans failed on the candidate's solid
            candidate["problem"] = f"the mesh could not be compared with the part ({type(exc).__name__})"
    if iou is not None and not math.isfinite(iou):
        iou = 0.0
    answer = {"candidate": candidate, "gold": gold, "iou": iou, "deviation": apart}
    sys.stdout.write("\n" + json.dumps(answer) + "\n")


main()
