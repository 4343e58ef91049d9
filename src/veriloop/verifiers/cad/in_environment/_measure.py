"""Measure a candidate mesh and compare it with the gold mesh; print one JSON line.

Runs in a sandbox on the CAD environment, in a workspace holding ``candidate.stl``, ``gold.stl``
and ``limits.json`` (``max_faces``, ``max_bodies``, ``gap_search``; ``wall``: whether to measure
the thinnest wall; ``render`` and ``render_size``: whether to draw the candidate, in pixels), and
``_render.py`` (the rasteriser, beside this file in the package). Nothing of the candidate's
code runs here: this process only reads its file. The size is checked from the STL header before
anything is loaded, so a gigantic mesh costs nothing.

Output: ``{"candidate": {...}, "gold": {...}, "iou": float | null, "deviation": [mm, mm3] | null,
"stray": [mm, [x, y, z]] | null}`` (``surface_stray``); a mesh that could not be measured has ``"problem"`` set and nothing else needed. With ``wall`` asked, each mesh's figures
include ``"wall"``: its thinnest wall in mm (``thinnest_wall``); with ``render`` asked, the
candidate's include ``"render"``: a PNG picture of it, base64 (any mesh with finite vertices).
"""

import base64
import io
import json
import math
import sys
from pathlib import Path

import manifold3d
import numpy
import trimesh

sys.path.insert(0, ".")  # the workspace, where the host put _render.py
from _render import render  # noqa: E402


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
    if limits.get("render"):
        found["render"] = base64.b64encode(render(vertices.astype(float), triangles, limits["render_size"])).decode()
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
    if limits.get("wall"):
        found["wall"] = thinnest_wall(vertices.astype(float), triangles)
    return found, solid


def _first_hits(origins, directions, corners):
    """Distance along each ray to the nearest triangle it crosses (inf: none), Moller-Trumbore
    over every triangle; rays go in chunks so no temporary passes ~256k ray-triangle pairs."""
    base, edge1, edge2 = corners[:, 0], corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0]  # (F, 3)
    nearest = numpy.full(len(origins), numpy.inf)
    chunk = max(1, 262_144 // len(corners))
    for start in range(0, len(origins), chunk):
        origin = origins[start : start + chunk, None, :]  # (R, 1, 3)
        direction = directions[start : start + chunk, None, :]  # (R, 1, 3)
        across = numpy.cross(direction, edge2)  # (R, F, 3)
        det = (edge1 * across).sum(-1)  # (R, F)
        usable = numpy.abs(det) > 1e-12
        inverse = numpy.where(usable, 1.0 / numpy.where(usable, det, 1.0), 0.0)
        offset = origin - base  # (R, F, 3)
        u = (offset * across).sum(-1) * inverse
        turned = numpy.cross(offset, edge1)  # (R, F, 3)
        v = (direction * turned).sum(-1) * inverse
        t = (edge2 * turned).sum(-1) * inverse  # (R, F) distance along the unit ray
        hit = usable & (u >= 0) & (v >= 0) & (u + v <= 1) & (t > 1e-4)
        nearest[start : start + chunk] = numpy.where(hit, t, numpy.inf).min(axis=1)
    return nearest


def thinnest_wall(vertices, triangles, budget=4_000_000):
    """The thinnest wall of a closed solid, mm: from points spread over its surface by area (kept
    off the faces' edges, seeded, so the figure is reproducible), a ray goes inward along the
    face's normal; the distance to where it leaves the solid is the wall's thickness there, and
    the least over all points is the answer (None when no ray came out). Rays x faces stays
    within ``budget``: 2048 rays up to 1,953 faces, fewer for a larger mesh, never under 32."""
    corners = vertices[triangles]  # (F, 3, 3)
    normals = numpy.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])  # (F, 3), |n| = 2 * area
    areas = numpy.linalg.norm(normals, axis=1)  # (F,)
    count = int(min(2048, max(32, budget // len(triangles))))
    rng = numpy.random.default_rng(0)
    faces = rng.choice(len(triangles), size=count, p=areas / areas.sum())  # (R,)
    weights = rng.uniform(0.1, 1.0, size=(count, 3))
    weights /= weights.sum(axis=1, keepdims=True)  # (R, 3) barycentric, each >= ~0.04
    points = numpy.einsum("rk,rkd->rd", weights, corners[faces])  # (R, 3)
    inward = -normals[faces] / areas[faces, None]  # (R, 3) unit, into the solid
    depths = _first_hits(points, inward, corners)
    depths = depths[numpy.isfinite(depths)]
    return float(depths.min()) if len(depths) else None


def _distances_to_surface(points, corners):
    """The distance from each point to the nearest of the triangles ``corners`` (F, 3, 3), mm:
    to the face's plane where the point projects inside the face, else to its nearest edge.
    Points go in chunks so no temporary passes ~262k point-triangle pairs."""
    a, b, c = corners[:, 0], corners[:, 1], corners[:, 2]  # (F, 3)
    normal = numpy.cross(b - a, c - a)  # (F, 3)
    squared = (normal * normal).sum(-1)  # (F,)
    flat = squared > 1e-18
    unit = normal / numpy.sqrt(numpy.where(flat, squared, 1.0))[:, None]  # (F, 3)
    nearest = numpy.full(len(points), numpy.inf)
    chunk = max(1, 262_144 // len(corners))
    for start in range(0, len(points), chunk):
        p = points[start : start + chunk, None, :]  # (R, 1, 3)
        height = ((p - a) * unit).sum(-1)  # (R, F) signed distance to the plane
        foot = p - height[..., None] * unit  # (R, F, 3) the point projected on the plane
        inside = flat
        for first, second in ((a, b), (b, c), (c, a)):
            inside = inside & ((numpy.cross(second - first, foot - first) * normal).sum(-1) >= 0)
        best = numpy.where(inside, numpy.abs(height), numpy.inf)
        for first, second in ((a, b), (b, c), (c, a)):
            edge = second - first  # (F, 3)
            length = numpy.maximum((edge * edge).sum(-1), 1e-18)
            along = numpy.clip(((p - first) * edge).sum(-1) / length, 0.0, 1.0)  # (R, F)
            gap = p - (first + along[..., None] * edge)
            best = numpy.minimum(best, numpy.sqrt((gap * gap).sum(-1)))
        nearest[start : start + chunk] = best.min(axis=1)
    return nearest


def surface_stray(solid, reference, budget=4_000_000):
    """How far the surface of ``solid`` strays from the surface of ``reference``: the largest
    distance, mm, from a point of the first to the nearest face of the second, with that point.
    The points are the first's vertices (where a cut or a boss ends: a slot's floor is one) and
    points spread over it by area (seeded), together within ``budget`` / faces of the reference,
    never under 64. A region thinner than ``max_deviation`` (a saw cut, a fin) shows here by its
    depth, not its width."""
    mesh, other = solid.to_mesh(), reference.to_mesh()
    vertices = numpy.asarray(mesh.vert_properties, dtype=float)[:, :3]
    own = vertices[numpy.asarray(mesh.tri_verts, dtype=numpy.int64)]  # (F, 3, 3)
    corners = numpy.asarray(other.vert_properties, dtype=float)[:, :3][numpy.asarray(other.tri_verts)]
    count = int(max(64, budget // len(corners)))
    rng = numpy.random.default_rng(0)
    if len(vertices) > count // 2:
        vertices = vertices[rng.choice(len(vertices), size=count // 2, replace=False)]
    areas = numpy.linalg.norm(numpy.cross(own[:, 1] - own[:, 0], own[:, 2] - own[:, 0]), axis=1)  # (F,)
    faces = rng.choice(len(own), size=count - len(vertices), p=areas / areas.sum())  # (S,)
    weights = rng.dirichlet(numpy.ones(3), size=len(faces))  # (S, 3) barycentric
    points = numpy.vstack([vertices, numpy.einsum("sk,skd->sd", weights, own[faces])])
    distances = _distances_to_surface(points, corners)
    worst = int(distances.argmax())
    return float(distances[worst]), points[worst].tolist()


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
    gold, gold_solid = measure(Path("gold.stl").read_bytes(), {**limits, "render": False})
    iou, apart, stray = None, None, None
    if solid is not None and gold_solid is not None:
        try:
            common = (solid ^ gold_solid).volume()
            union = solid.volume() + gold_solid.volume() - common
            iou = common / union if union > 0 else 0.0
            apart = deviation(solid, gold_solid)
            stray = surface_stray(solid, gold_solid)
        except Exception as exc:  # the booleans failed on the candidate's solid
            candidate["problem"] = f"the mesh could not be compared with the part ({type(exc).__name__})"
    if iou is not None and not math.isfinite(iou):
        iou = 0.0
    answer = {"candidate": candidate, "gold": gold, "iou": iou, "deviation": apart, "stray": stray}
    sys.stdout.write("\n" + json.dumps(answer) + "\n")


main()
