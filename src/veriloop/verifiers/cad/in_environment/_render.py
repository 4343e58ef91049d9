"""Draw a mesh as a small PNG picture: one fixed isometric view, flat Lambert shading, a z-buffer.

Runs in the sandbox with the measurer (the host ships this file into the measurer's workspace,
where ``_measure.py`` imports it), on numpy, zlib and struct alone: no OpenGL, no display. The
picture is deterministic (the same mesh gives the same bytes) and bounded: ``size`` x ``size``
pixels, and the triangles are rasterised in chunks of at most ``_PAIRS`` (triangle, pixel) pairs,
so a large mesh costs time in proportion to the pixels it covers, not memory.
"""

import struct
import zlib

import numpy

_PAIRS = 1 << 21
_VIEW = numpy.array([1.0, -1.0, 1.0]) / numpy.sqrt(3.0)  # from the scene towards the eye: front-right, above
_LIGHT = numpy.array([0.3, -0.5, 0.8]) / numpy.linalg.norm([0.3, -0.5, 0.8])
_COLOUR = numpy.array([70.0, 130.0, 180.0])
_BACKGROUND = 255


def _screen(vertices, size):
    """Vertices in pixels (x right, y up) and their depth (larger is nearer the eye)."""
    right = numpy.cross(_VIEW, [0.0, 0.0, 1.0])
    right /= numpy.linalg.norm(right)
    up = numpy.cross(right, _VIEW)
    flat = numpy.stack([vertices @ right, vertices @ up], axis=1)  # (V, 2)
    lower, upper = flat.min(axis=0), flat.max(axis=0)
    scale = 0.9 * size / max(float((upper - lower).max()), 1e-9)
    centre = (lower + upper) / 2
    return (flat - centre) * scale + size / 2, vertices @ _VIEW


def _shades(corners):
    """Flat Lambert shading of each face, in [0.25, 1], from its (outward) normal."""
    normals = numpy.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])  # (F, 3)
    lengths = numpy.linalg.norm(normals, axis=1, keepdims=True)
    normals = normals / numpy.where(lengths > 0, lengths, 1.0)
    return 0.25 + 0.75 * numpy.clip(normals @ _LIGHT, 0.0, 1.0)  # (F,)


def _spans(flat, size):
    """(face, row, first x, last x) of the pixel centres each face covers, row by row (scanlines)."""
    low = numpy.clip(numpy.ceil(flat[:, :, 1].min(axis=1) - 0.5), 0, size).astype(numpy.int64)  # (F,)
    high = numpy.clip(numpy.floor(flat[:, :, 1].max(axis=1) - 0.5), -1, size - 1).astype(numpy.int64)
    rows = numpy.maximum(high - low + 1, 0)  # (F,)
    face = numpy.repeat(numpy.arange(len(flat)), rows)  # (S,)
    row = low[face] + numpy.arange(rows.sum()) - numpy.repeat(numpy.cumsum(rows) - rows, rows)
    centre = row + 0.5
    first, last = numpy.full(len(face), numpy.inf), numpy.full(len(face), -numpy.inf)
    for k in range(3):
        p, q = flat[face, k], flat[face, (k + 1) % 3]  # (S, 2) an edge's ends
        crosses = ((p[:, 1] - centre) * (q[:, 1] - centre) <= 0) & (p[:, 1] != q[:, 1])
        rise = numpy.where(crosses, q[:, 1] - p[:, 1], 1.0)
        x = p[:, 0] + (centre - p[:, 1]) * (q[:, 0] - p[:, 0]) / rise
        first = numpy.where(crosses, numpy.minimum(first, x), first)
        last = numpy.where(crosses, numpy.maximum(last, x), last)
    first = numpy.clip(numpy.ceil(first - 0.5), 0, size).astype(numpy.int64)
    last = numpy.clip(numpy.floor(last - 0.5), -1, size - 1).astype(numpy.int64)
    return face, row, first, numpy.maximum(last, first - 1)


def _pixels(flat, size):
    """(face, x, y) of every pixel centre inside each face: the spans, expanded."""
    face, row, first, last = _spans(flat, size)
    widths = last - first + 1  # (S,)
    span = numpy.repeat(numpy.arange(len(face)), widths)  # (P,)
    x = first[span] + numpy.arange(widths.sum()) - numpy.repeat(numpy.cumsum(widths) - widths, widths)
    return face[span], x, row[span]


def _chunks(flat, size):
    """Face ranges whose bounding boxes cover at most ``_PAIRS`` pixels together (one face at least)."""
    span = numpy.clip(flat.max(axis=1), 0, size) - numpy.clip(flat.min(axis=1), 0, size) + 2  # (F, 2)
    covered = numpy.cumsum(span[:, 0] * span[:, 1])
    start = 0
    while start < len(flat):
        before = covered[start - 1] if start else 0.0
        stop = max(start + 1, int(numpy.searchsorted(covered, before + _PAIRS, side="right")))
        yield numpy.arange(start, min(stop, len(flat)))
        start = stop


def _depths(flat, depth, face, x, y):
    """Depth at each pixel centre, interpolated over its face (a degenerate face: its first corner's)."""
    a, b, c = (flat[face, k] for k in range(3))  # (P, 2) each
    area = (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (c[:, 0] - a[:, 0])
    px, py, safe = x + 0.5, y + 0.5, numpy.where(area != 0, area, numpy.inf)
    w1 = ((px - a[:, 0]) * (c[:, 1] - a[:, 1]) - (py - a[:, 1]) * (c[:, 0] - a[:, 0])) / safe  # weight of b
    w2 = ((b[:, 0] - a[:, 0]) * (py - a[:, 1]) - (b[:, 1] - a[:, 1]) * (px - a[:, 0])) / safe  # weight of c
    d = depth[face]  # (P, 3)
    return d[:, 0] + w1 * (d[:, 1] - d[:, 0]) + w2 * (d[:, 2] - d[:, 0])


def _rasterise(flat, depth, size):
    """The nearest face at each pixel (-1: none). ``flat`` (F, 3, 2) pixels, ``depth`` (F, 3)."""
    nearest = numpy.full(size * size, -numpy.inf)
    owner = numpy.full(size * size, -1)
    for faces in _chunks(flat, size):
        face, x, y = _pixels(flat[faces], size)
        z = _depths(flat[faces], depth[faces], face, x, y)
        pixel = y * size + x
        order = numpy.lexsort((-z, pixel))  # by pixel, nearest first
        first = numpy.ones(len(order), dtype=bool)
        first[1:] = pixel[order][1:] != pixel[order][:-1]
        won = order[first]
        closer = z[won] > nearest[pixel[won]]
        nearest[pixel[won][closer]] = z[won][closer]
        owner[pixel[won][closer]] = faces[face[won][closer]]
    return owner


def png(rgb):
    """PNG bytes of an (H, W, 3) uint8 picture: 8-bit RGB, no filtering, zlib level 9."""
    height, width, _ = rgb.shape
    rows = numpy.concatenate([numpy.zeros((height, 1), numpy.uint8), rgb.reshape(height, width * 3)], axis=1)

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows.tobytes(), 9))
        + chunk(b"IEND", b"")
    )


def render(vertices, triangles, size=256):
    """PNG bytes of the mesh seen from the front-right, above, filling ~90% of the picture."""
    flat, depth = _screen(numpy.asarray(vertices, dtype=float), size)
    corners = numpy.asarray(vertices, dtype=float)[triangles]  # (F, 3, 3)
    owner = _rasterise(flat[triangles], depth[triangles], size)
    shade = numpy.concatenate([_shades(corners), [0.0]])[owner]  # (size * size,); owner -1 picks the 0.0
    rgb = numpy.where((owner >= 0)[:, None], shade[:, None] * _COLOUR, _BACKGROUND).astype(numpy.uint8)
    return png(rgb.reshape(size, size, 3)[::-1])  # rows from the top
