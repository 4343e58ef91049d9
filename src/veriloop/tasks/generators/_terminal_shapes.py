"""The ``geometry`` theme of ``terminal-repos``: points, rectangles and polygons in the plane."""

from __future__ import annotations

import random

from veriloop.tasks.generators._terminal_themes import Bug, Misuse, Module, Theme, Unit, ValueUnit, distinct


def _geometry_draw(rng: random.Random) -> dict[str, object]:
    width, height = distinct(rng, 2, 3, 12)
    if rng.random() < 0.5:
        width, height = height, width
    return {
        "x": rng.randint(1, 20),
        "y": rng.randint(1, 20),
        "w": width,
        "h": height,
        "side": rng.randint(2, 15),
        "price": rng.randint(2, 9),
        "far": rng.randint(3, 9),
    }


GEOMETRY = Theme(
    name="geometry",
    packages=("planar", "shapes", "geomkit", "figures"),
    doc="Plane geometry: points as (x, y) tuples, axis-aligned rectangles and polygons.",
    modules=(
        Module("points", ("points", "vectors", "coords"), "Points as (x, y) tuples and the arithmetic on them."),
        Module("rects", ("rects", "boxes", "frames"), "Axis-aligned rectangles."),
        Module("polygons", ("polygons", "outlines", "paths"), "Measures of polygons given as lists of points."),
        Module("layout", ("layout", "placement", "canvas"), "Placing points and outlines on a canvas."),
    ),
    names={
        "distance": ("distance", "dist", "length_between"),
        "midpoint": ("midpoint", "halfway", "centre_of"),
        "clamp": ("clamp", "bound", "limit"),
        "Rect": ("Rect", "Box", "Frame"),
        "shrink": ("shrink", "inset", "pad_inside"),
        "bounding_box": ("bounding_box", "bounds", "enclosing_rect"),
        "perimeter": ("perimeter", "outline_length", "circumference"),
        "polygon_area": ("polygon_area", "area_inside", "enclosed_area"),
        "compactness": ("compactness", "roundness", "isoperimetric_ratio"),
        "clamp_point": ("clamp_point", "nearest_inside", "snap_into"),
        "fence_cost": ("fence_cost", "edging_cost", "border_price"),
        "coverage": ("coverage", "covered_percent", "fill_ratio"),
        "nearest": ("nearest", "closest", "closest_point"),
    },
    draw=_geometry_draw,
    helpers={
        "box": """
def box(x, y, side):
    return [(x, y), (x + side, y), (x + side, y + side), (x, y + side)]
""",
    },
    units=(
        Unit(
            "distance",
            ("points",),
            '''
def $distance(p, q):
    """The straight-line distance between the points ``p`` and ``q``."""
    return math.hypot(q[0] - p[0], q[1] - p[1])
''',
            tests="""
def test_distances():
    assert $distance(($x, $y), ($x, $y)) == 0
    assert $distance(($x, $y), ($x + 6, $y + 8)) == pytest.approx(10)
""",
            visible="""
def test_distance_of_a_3_4_5_triangle():
    assert $distance((1, 2), (4, 6)) == pytest.approx(5)
""",
            imports=("math",),
            bugs=(Bug("q[1] - p[1]", "q[1] + p[1]", "wrong operator"),),
            returns=ValueUnit("cm", "$distance((0, 0), (3, 4))", "5.0"),
        ),
        Unit(
            "midpoint",
            ("points",),
            '''
def $midpoint(p, q):
    """The point halfway between ``p`` and ``q``."""
    return ((p[0] + q[0]) / 2, (p[1] + q[1]) / 2)
''',
            tests="""
def test_midpoints():
    assert $midpoint((-2, 5), (2, 9)) == (0, 7)
    assert $midpoint(($x, $y), ($x, $y)) == ($x, $y)
""",
            visible="""
def test_halfway_point():
    assert $midpoint(($x, $y), ($x + 4, $y + 6)) == ($x + 2, $y + 3)
""",
            bugs=(Bug("(p[1] + q[1]) / 2", "(p[1] - q[1]) / 2", "wrong operator"),),
        ),
        Unit(
            "clamp",
            ("points",),
            '''
def $clamp(value, low, high):
    """``value`` limited to ``low``..``high`` (inclusive; ``low`` must not exceed ``high``)."""
    return max(low, min(value, high))
''',
            tests="""
def test_values_are_limited_to_the_range():
    assert $clamp(3, 3, 3) == 3
    assert $clamp(7.5, 1, 9) == 7.5
    assert $clamp(12, 0, 10) == 10
    assert $clamp(-1, 0, 2) == 0
""",
            visible="""
def test_clamping():
    assert $clamp(15, 0, 10) == 10
    assert $clamp(-5, 0, 10) == 0
    assert $clamp(5, 0, 10) == 5
""",
            bugs=(Bug("max(low, min(value, high))", "max(high, min(value, low))", "swapped arguments"),),
        ),
        Unit(
            "Rect",
            ("rects",),
            '''
@dataclass(frozen=True)
class $Rect:
    """An axis-aligned rectangle: its lower-left corner (x, y), its width and its height."""

    x: float
    y: float
    width: float
    height: float

    def area(self):
        return self.width * self.height

    def contains(self, point):
        """Whether ``point`` lies inside the rectangle or on its border."""
        px, py = point
        return self.x <= px <= self.x + self.width and self.y <= py <= self.y + self.height
''',
            tests="""
def test_rectangle_area_and_border():
    rect = $Rect($x, $y, $w, $h)
    assert $Rect(0, 0, 2, 5).area() == 10
    assert rect.contains(($x + $w, $y + $h))
    assert rect.contains(($x, $y))
    assert not rect.contains(($x - 1, $y))
""",
            visible="""
def test_rectangle_basics():
    rect = $Rect($x, $y, $w, $h)
    assert rect.area() == $w * $h
    assert rect.contains(($x, $y + 1))
""",
            imports=("dataclasses.dataclass",),
            bugs=(
                Bug("self.x <= px <= self.x + self.width", "self.x < px <= self.x + self.width", "off-by-one"),
                Bug("return self.width * self.height", "return self.width + self.height", "wrong operator"),
            ),
        ),
        Unit(
            "shrink",
            ("rects",),
            '''
def $shrink(rect, margin):
    """``rect`` with ``margin`` taken off each side; the margin is limited to 0..half the shorter
    side, so the result never has a negative size."""
    margin = $clamp(margin, 0, min(rect.width, rect.height) / 2)
    return $Rect(rect.x + margin, rect.y + margin, rect.width - 2 * margin, rect.height - 2 * margin)
''',
            tests="""
def test_shrinking_never_goes_negative():
    assert $shrink($Rect(0, 0, 10, 4), 1) == $Rect(1, 1, 8, 2)
    assert $shrink($Rect(0, 0, 10, 4), 5) == $Rect(2, 2, 6, 0)
    assert $shrink($Rect($x, $y, $w, $h), -3) == $Rect($x, $y, $w, $h)
""",
        ),
        Unit(
            "bounding_box",
            ("rects", "polygons"),
            '''
def $bounding_box(points):
    """The smallest rectangle holding every one of ``points`` (there must be at least one)."""
    xs = [x for x, _ in points]
    ys = [y for _, y in points]
    return $Rect(min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys))
''',
            tests="""
def test_bounding_box_of_a_triangle():
    assert $bounding_box([($x, $y), ($x + $w, $y + 1), ($x + 2, $y + $h)]) == $Rect($x, $y, $w, $h)
""",
        ),
        Unit(
            "perimeter",
            ("polygons",),
            '''
def $perimeter(points):
    """The length of the closed outline through ``points``: the last point joins the first."""
    return sum($distance(points[i], points[(i + 1) % len(points)]) for i in range(len(points)))
''',
            tests="""
def test_perimeter_of_a_right_triangle():
    assert $perimeter([(0, 0), (3 * $far, 0), (0, 4 * $far)]) == pytest.approx(12 * $far)
""",
            visible="""
def test_perimeter_of_a_square():
    assert $perimeter(box($x, $y, $side)) == pytest.approx(4 * $side)
""",
            bugs=(Bug("for i in range(len(points))", "for i in range(len(points) - 1)", "off-by-one"),),
            returns=ValueUnit("cm", "$perimeter(box($x, $y, $side))", "4 * $side"),
        ),
        Unit(
            "polygon_area",
            ("polygons",),
            '''
def $polygon_area(points):
    """The area inside the outline through ``points``, whichever way round it goes."""
    twice = 0
    for i, (x, y) in enumerate(points):
        nx, ny = points[(i + 1) % len(points)]
        twice += x * ny - nx * y
    return abs(twice) / 2
''',
            tests="""
def test_area_either_way_round():
    triangle = [($x, $y), ($x + 4, $y), ($x, $y + 6)]
    assert $polygon_area(triangle) == pytest.approx(12)
    assert $polygon_area(triangle[::-1]) == pytest.approx(12)
""",
            visible="""
def test_area_of_a_square():
    assert $polygon_area(box($x, $y, $side)) == pytest.approx($side * $side)
""",
            bugs=(Bug("x * ny - nx * y", "x * ny + nx * y", "wrong operator"),),
            returns=ValueUnit("cm2", "$polygon_area(box($x, $y, $side))", "$side * $side"),
        ),
        Unit(
            "compactness",
            ("polygons",),
            '''
def $compactness(points):
    """How close the outline is to a circle: 4 pi area / perimeter squared (1 for a circle, about
    0.785 for a square); 0.0 for an outline of no length."""
    length = $perimeter(points)
    if length == 0:
        return 0.0
    return 4 * math.pi * $polygon_area(points) / length**2
''',
            tests="""
def test_a_square_is_less_round_than_a_circle():
    assert $compactness(box($x, $y, $side)) == pytest.approx(math.pi / 4)
    assert $compactness([($x, $y)] * 3) == 0.0
""",
            imports=("math",),
        ),
        Unit(
            "clamp_point",
            ("layout",),
            '''
def $clamp_point(rect, point):
    """The point of ``rect`` (its border included) nearest to ``point``."""
    px, py = point
    return ($clamp(px, rect.x, rect.x + rect.width), $clamp(py, rect.y, rect.y + rect.height))
''',
            tests="""
def test_points_inside_stay_put():
    rect = $Rect($x, $y, $w, $h)
    assert $clamp_point(rect, ($x + 1, $y + 2)) == ($x + 1, $y + 2)
    assert $clamp_point(rect, ($x + $w + $far, $y - $far)) == ($x + $w, $y)
""",
            visible="""
def test_points_outside_move_to_the_border():
    rect = $Rect($x, $y, $w, $h)
    assert $clamp_point(rect, ($x - 5, $y + $h + 7)) == ($x, $y + $h)
""",
        ),
        Unit(
            "fence_cost",
            ("layout",),
            '''
def $fence_cost(points, price_per_unit):
    """What fencing the outline through ``points`` costs at ``price_per_unit`` per unit of length,
    rounded to two decimals."""
    return round($perimeter(points) * price_per_unit, 2)
''',
            tests="""
def test_fencing_a_square():
    assert $fence_cost(box($x, $y, $side), $price) == 4 * $side * $price
""",
        ),
        Unit(
            "coverage",
            ("layout",),
            '''
def $coverage(rect, points):
    """The percentage (0-100, one decimal) of the area of ``rect`` that the outline ``points`` covers."""
    return round(100 * $polygon_area(points) / rect.area(), 1)
''',
            tests="""
def test_a_quarter_covered():
    assert $coverage($Rect(0, 0, 10, 10), box(1, 1, 5)) == 25.0
""",
        ),
        Unit(
            "nearest",
            ("layout", "polygons"),
            '''
def $nearest(points, target):
    """The point of ``points`` closest to ``target`` (the first of equally close ones)."""
    return min(points, key=lambda point: $distance(point, target))
''',
            tests="""
def test_the_closest_point_wins():
    assert $nearest([($x, $y), ($x + $far, $y), ($x, $y + 1)], ($x, $y + $far)) == ($x, $y + 1)
""",
            visible="""
def test_closest_of_three():
    assert $nearest([(0, 0), (10, 10), (3, 3)], (4, 4)) == (3, 3)
""",
            bugs=(Bug("min(points,", "max(points,", "wrong comparison"),),
        ),
    ),
    misuses=(
        Misuse(
            caller="clamp_point",
            helper="clamp",
            wrong=(
                "$clamp(px, rect.x, rect.x + rect.width), $clamp(py, rect.y, rect.y + rect.height)",
                "$clamp(rect.x, rect.x + rect.width, px), $clamp(rect.y, rect.y + rect.height, py)",
            ),
            decoy=("def $clamp(value, low, high):", "def $clamp(low, high, value):"),
            contract="the value comes first, then the bounds; the caller passes the bounds first",
        ),
    ),
)
