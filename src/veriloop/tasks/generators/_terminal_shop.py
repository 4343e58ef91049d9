"""The ``inventory`` theme of ``terminal-repos``: stock lines of a small shop, priced in cents."""

from __future__ import annotations

import random

from veriloop.tasks.generators._terminal_themes import Bug, Misuse, Module, Theme, Unit, ValueUnit, distinct, money_text


def _inventory_draw(rng: random.Random) -> dict[str, object]:
    skus = rng.sample(("bolt", "nut", "washer", "hinge", "bracket", "spring", "gasket", "rivet", "clamp"), 3)
    quantities = distinct(rng, 3, 2, 30)
    prices = [100 * p for p in distinct(rng, 3, 2, 60)]
    tax = rng.choice((5, 8, 10, 12, 20, 25))
    cents = rng.randint(101, 99_999)
    value = sum(p * q for p, q in zip(prices, quantities))
    return {
        **{f"sku_{k}": s for k, s in zip("abc", skus)},
        **{f"qty_{k}": q for k, q in zip("abc", quantities)},
        **{f"price_{k}": p for k, p in zip("abc", prices)},
        "bulk_units": rng.randint(6, 15),
        "bulk_percent": rng.choice((5, 10, 15, 20, 25, 30)),
        "tax_percent": tax,
        "more_units": rng.randint(3, 40),
        "cents": cents,
        "cents_text": money_text(cents),
        "value_text": money_text(value),
        "units_sum": sum(quantities),
        "average": round(value / sum(quantities)),
        "taxed_b_text": money_text(prices[1] * (100 + tax) // 100),
        "taxed_c_text": money_text(prices[2] * (100 + tax) // 100),
        "label_text": money_text(1000 + 10 * tax),
    }


INVENTORY = Theme(
    name="inventory",
    packages=("stockroom", "storekeeper", "depot", "shelfkit"),
    doc="Stock lines of a small shop: prices, quantities on hand, orders and reports.",
    modules=(
        Module("money", ("money", "amounts", "currency"), "Amounts of money, kept as integer cents."),
        Module("models", ("models", "records", "catalog"), "The stock line record."),
        Module("stock", ("stock", "levels", "holdings"), "Queries and updates over a list of stock lines."),
        Module("pricing", ("pricing", "prices", "quotes"), "Order prices, the bulk discount and tax."),
        Module("reports", ("reports", "overview", "digest"), "Text reports over a list of stock lines."),
    ),
    names={
        "format_cents": ("format_cents", "cents_text", "render_cents"),
        "percent_of": ("percent_of", "percentage", "part_of"),
        "Item": ("Item", "StockLine", "Product"),
        "find_item": ("find_item", "lookup_line", "line_for"),
        "restock": ("restock", "add_stock", "receive"),
        "low_stock": ("low_stock", "below_minimum", "short_lines"),
        "total_units": ("total_units", "units_on_hand", "count_units"),
        "stock_value": ("stock_value", "value_on_hand", "total_value"),
        "order_price": ("order_price", "price_for", "quote"),
        "with_tax": ("with_tax", "add_tax", "gross_price"),
        "price_label": ("price_label", "shelf_label", "label"),
        "average_price": ("average_price", "mean_price", "average_unit_price"),
        "summary": ("summary", "stock_summary", "describe"),
        "top_items": ("top_items", "most_valuable", "best_lines"),
        "item_line": ("item_line", "line_report", "describe_line"),
    },
    draw=_inventory_draw,
    helpers={
        "stock_lines": """
def stock_lines():
    return [
        $Item("$sku_a", $price_a, $qty_a),
        $Item("$sku_b", $price_b, $qty_b),
        $Item("$sku_c", $price_c, $qty_c),
    ]
""",
    },
    units=(
        Unit(
            "format_cents",
            ("money",),
            '''
def $format_cents(cents):
    """``cents`` as text in currency units with two decimals: 1234 -> '12.34', -5 -> '-0.05'."""
    sign = "-" if cents < 0 else ""
    whole, rest = divmod(abs(cents), 100)
    return f"{sign}{whole}.{rest:02d}"
''',
            tests="""
def test_amounts_show_two_decimals():
    assert $format_cents(5) == "0.05"
    assert $format_cents(0) == "0.00"
    assert $format_cents(-$cents) == "-$cents_text"
""",
            visible="""
def test_cents_as_text():
    assert $format_cents($cents) == "$cents_text"
""",
            bugs=(
                Bug("cents < 0", "cents > 0", "wrong comparison"),
                Bug("divmod(abs(cents), 100)", "divmod(100, abs(cents))", "swapped arguments"),
            ),
        ),
        Unit(
            "percent_of",
            ("money",),
            '''
def $percent_of(cents, percent):
    """``percent`` percent of ``cents``, rounded to whole cents. ``percent`` is on a 0-100 scale:
    15 means 15 %, not 0.15."""
    return round(cents * percent / 100)
''',
            tests="""
def test_percentages_are_on_a_0_to_100_scale():
    assert $percent_of(1000, 15) == 150
    assert $percent_of(999, 50) == 500
    assert $percent_of(0, 30) == 0
""",
            visible="""
def test_percent_of_an_amount():
    assert $percent_of(2000, $tax_percent) == 20 * $tax_percent
""",
            bugs=(Bug("cents * percent / 100", "cents + percent / 100", "wrong operator"),),
        ),
        Unit(
            "Item",
            ("models",),
            '''
@dataclass(frozen=True)
class $Item:
    """One stock line: its sku, its unit price in cents and the units on hand."""

    sku: str
    price_cents: int
    quantity: int

    def value_cents(self):
        """Unit price times units on hand, in cents."""
        return self.price_cents * self.quantity
''',
            tests="""
def test_a_line_is_worth_price_times_units():
    assert $Item("$sku_a", 125, 4).value_cents() == 500
    assert $Item("$sku_b", $price_b, 0).value_cents() == 0
""",
            visible="""
def test_line_value():
    assert $Item("$sku_a", $price_a, $qty_a).value_cents() == $price_a * $qty_a
""",
            imports=("dataclasses.dataclass",),
            bugs=(Bug("self.price_cents * self.quantity", "self.price_cents + self.quantity", "wrong operator"),),
        ),
        Unit(
            "find_item",
            ("stock",),
            '''
def $find_item(lines, sku):
    """The line whose sku is ``sku``; KeyError if there is none."""
    for line in lines:
        if line.sku == sku:
            return line
    raise KeyError(sku)
''',
            tests="""
def test_lines_are_found_by_sku():
    assert $find_item(stock_lines(), "$sku_c").price_cents == $price_c
    with pytest.raises(KeyError):
        $find_item(stock_lines(), "missing")
""",
            visible="""
def test_find_a_line():
    assert $find_item(stock_lines(), "$sku_b").quantity == $qty_b
""",
            bugs=(Bug("if line.sku == sku:", "if line.sku != sku:", "wrong comparison"),),
        ),
        Unit(
            "restock",
            ("stock",),
            '''
def $restock(lines, sku, units):
    """A new list in which the line ``sku`` has ``units`` more units on hand; the other lines are
    unchanged. KeyError if no line has that sku."""
    $find_item(lines, sku)
    return [replace(line, quantity=line.quantity + units) if line.sku == sku else line for line in lines]
''',
            tests="""
def test_restocking_changes_only_that_line():
    lines = stock_lines()
    updated = $restock(lines, "$sku_c", $more_units)
    assert [line.quantity for line in updated] == [$qty_a, $qty_b, $qty_c + $more_units]
    assert lines == stock_lines()


def test_restocking_an_unknown_sku_fails():
    with pytest.raises(KeyError):
        $restock(stock_lines(), "missing", 1)
""",
            visible="""
def test_restock_adds_units():
    lines = $restock(stock_lines(), "$sku_b", 5)
    assert [line.quantity for line in lines] == [$qty_a, $qty_b + 5, $qty_c]
""",
            imports=("dataclasses.replace",),
            bugs=(
                Bug("line.quantity + units", "line.quantity - units", "wrong operator"),
                Bug("if line.sku == sku else line", "if line.sku != sku else line", "wrong comparison"),
            ),
        ),
        Unit(
            "low_stock",
            ("stock",),
            '''
def $low_stock(lines, minimum):
    """Skus of the lines with fewer than ``minimum`` units on hand, in input order."""
    return [line.sku for line in lines if line.quantity < minimum]
''',
            tests="""
def test_low_stock_is_strictly_below_the_minimum():
    assert $low_stock(stock_lines(), $qty_c) == ["$sku_a", "$sku_b"]
    assert $low_stock(stock_lines(), $qty_a) == []
    assert $low_stock(stock_lines(), $qty_c + 1) == ["$sku_a", "$sku_b", "$sku_c"]
""",
            visible="""
def test_lines_below_a_minimum():
    assert $low_stock(stock_lines(), $qty_b) == ["$sku_a"]
""",
            bugs=(Bug("line.quantity < minimum", "line.quantity <= minimum", "off-by-one"),),
        ),
        Unit(
            "total_units",
            ("stock",),
            '''
def $total_units(lines):
    """Units on hand over all lines."""
    return sum(line.quantity for line in lines)
''',
            tests="""
def test_units_are_summed_over_lines():
    assert $total_units([]) == 0
    assert $total_units(stock_lines()[1:]) == $qty_b + $qty_c
""",
            visible="""
def test_units_on_hand():
    assert $total_units(stock_lines()) == $units_sum
""",
            bugs=(Bug("for line in lines)", "for line in lines[1:])", "off-by-one"),),
            returns=ValueUnit("units", "$total_units(stock_lines())", "$units_sum"),
        ),
        Unit(
            "stock_value",
            ("stock", "pricing"),
            '''
def $stock_value(lines):
    """Value of all units on hand (unit price times units, summed), in cents."""
    return sum(line.value_cents() for line in lines)
''',
            tests="""
def test_stock_value_sums_the_lines():
    assert $stock_value([]) == 0
    assert $stock_value(stock_lines()[:1]) == $price_a * $qty_a
""",
            returns=ValueUnit("cents", "$stock_value(stock_lines()[2:])", "$price_c * $qty_c"),
        ),
        Unit(
            "pricing_constants",
            ("pricing",),
            """
BULK_UNITS = $bulk_units
BULK_PERCENT = $bulk_percent
TAX_PERCENT = $tax_percent
""",
        ),
        Unit(
            "order_price",
            ("pricing",),
            '''
def $order_price(line, units):
    """Price in cents of ``units`` units of ``line``: BULK_PERCENT percent off when the order is
    for BULK_UNITS units or more."""
    cents = line.price_cents * units
    if units >= BULK_UNITS:
        cents -= $percent_of(cents, BULK_PERCENT)
    return cents
''',
            tests="""
def test_small_orders_pay_full_price():
    line = $Item("$sku_b", $price_b, 1)
    assert $order_price(line, $bulk_units - 1) == $price_b * ($bulk_units - 1)


def test_large_orders_get_the_bulk_discount():
    line = $Item("$sku_c", $price_c, 1)
    assert $order_price(line, $bulk_units) == $price_c * $bulk_units * (100 - $bulk_percent) // 100
    assert $order_price(line, $bulk_units + 3) == $price_c * ($bulk_units + 3) * (100 - $bulk_percent) // 100
""",
            visible="""
def test_bulk_discount_from_the_bulk_quantity():
    line = $Item("$sku_a", $price_a, 1)
    assert $order_price(line, $bulk_units) == $price_a * $bulk_units * (100 - $bulk_percent) // 100
""",
            bugs=(
                Bug("if units >= BULK_UNITS:", "if units > BULK_UNITS:", "off-by-one"),
                Bug("cents -= ", "cents += ", "wrong operator"),
            ),
        ),
        Unit(
            "with_tax",
            ("pricing",),
            '''
def $with_tax(cents):
    """``cents`` plus TAX_PERCENT percent tax, in cents."""
    return cents + $percent_of(cents, TAX_PERCENT)
''',
            tests="""
def test_tax_is_added():
    assert $with_tax(0) == 0
    assert $with_tax($price_b) == $price_b * (100 + $tax_percent) // 100
""",
            visible="""
def test_price_with_tax():
    assert $with_tax($price_a) == $price_a * (100 + $tax_percent) // 100
""",
            bugs=(Bug("return cents + ", "return cents - ", "wrong operator"),),
        ),
        Unit(
            "price_label",
            ("pricing", "reports"),
            '''
def $price_label(line):
    """'sku: P' with P the line's unit price including tax, in currency units."""
    return f"{line.sku}: {$format_cents($with_tax(line.price_cents))}"
''',
            tests="""
def test_labels_show_the_price_with_tax():
    assert $price_label($Item("$sku_a", 1000, 3)) == "$sku_a: $label_text"
""",
        ),
        Unit(
            "average_price",
            ("pricing", "reports"),
            '''
def $average_price(lines):
    """Mean price of the units on hand, in cents, rounded; 0 when there are none."""
    units = $total_units(lines)
    if units == 0:
        return 0
    return round($stock_value(lines) / units)
''',
            tests="""
def test_average_price_of_the_units_on_hand():
    assert $average_price([]) == 0
    assert $average_price(stock_lines()) == $average
""",
            visible="""
def test_mean_unit_price():
    assert $average_price([$Item("$sku_a", 250, 4), $Item("$sku_b", 100, 1)]) == 220
""",
            bugs=(Bug("if units == 0:", "if units != 0:", "wrong comparison"),),
        ),
        Unit(
            "summary",
            ("reports",),
            '''
def $summary(lines):
    """'N lines, U units, worth V' with V the value on hand in currency units."""
    return f"{len(lines)} lines, {$total_units(lines)} units, worth {$format_cents($stock_value(lines))}"
''',
            tests="""
def test_summary_counts_lines_units_and_value():
    assert $summary(stock_lines()) == "3 lines, $units_sum units, worth $value_text"
    assert $summary([]) == "0 lines, 0 units, worth 0.00"
""",
        ),
        Unit(
            "top_items",
            ("reports",),
            '''
def $top_items(lines, count):
    """Skus of the ``count`` most valuable lines (unit price times units), most valuable first."""
    ranked = sorted(lines, key=lambda line: line.value_cents(), reverse=True)
    return [line.sku for line in ranked[:count]]
''',
            tests="""
def test_most_valuable_lines_first():
    assert $top_items(stock_lines(), 1) == ["$sku_c"]
    assert $top_items(stock_lines(), 5) == ["$sku_c", "$sku_b", "$sku_a"]
""",
            visible="""
def test_two_most_valuable():
    assert $top_items(stock_lines(), 2) == ["$sku_c", "$sku_b"]
""",
            bugs=(
                Bug("ranked[:count]", "ranked[: count - 1]", "off-by-one"),
                Bug("reverse=True", "reverse=False", "wrong comparison"),
            ),
        ),
        Unit(
            "item_line",
            ("reports",),
            '''
def $item_line(lines, sku):
    """'sku: U units at P each' for the line ``sku``, P its unit price with tax; KeyError if absent."""
    line = $find_item(lines, sku)
    return f"{line.sku}: {line.quantity} units at {$format_cents($with_tax(line.price_cents))} each"
''',
            tests="""
def test_line_report():
    assert $item_line(stock_lines(), "$sku_c") == "$sku_c: $qty_c units at $taxed_c_text each"
    with pytest.raises(KeyError):
        $item_line(stock_lines(), "missing")
""",
            visible="""
def test_report_one_line():
    assert $item_line(stock_lines(), "$sku_b") == "$sku_b: $qty_b units at $taxed_b_text each"
""",
        ),
    ),
    misuses=(
        Misuse(
            caller="order_price",
            helper="percent_of",
            wrong=("$percent_of(cents, BULK_PERCENT)", "$percent_of(cents, BULK_PERCENT / 100)"),
            decoy=("round(cents * percent / 100)", "round(cents * percent)"),
            contract="percent is on a 0-100 scale; the caller passes a fraction",
        ),
        Misuse(
            caller="item_line",
            helper="find_item",
            wrong=("$find_item(lines, sku)", "$find_item(sku, lines)"),
            decoy=("def $find_item(lines, sku):", "def $find_item(sku, lines):"),
            contract="the lines come first, then the sku; the caller swaps them",
        ),
    ),
)
