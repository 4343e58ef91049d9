"""The ``financial-docs`` generator: a several-page annual report, and figures to extract from it.

Each task is one company's report (``_financial_statements``: highlights, income statement,
balance sheet, notes, with prior-year columns, a restated figure and footnotes as distractors)
and a few question groups whose answers go into one JSON object, checked by the
``document_fields`` verifier: each field against the source with a tolerance, and the answer's
totals against its own parts (the identities a group states).

Difficulty: level 1 reads the statements (a figure, or a subtotal with its lines); level 2 adds
cross-references to the notes (segments, borrowings restated in millions, dividends) and one
derived step (margins, ratios, net debt); level 3 is a longer report (quarterly note, one note
per page) and asks for multi-step figures (Q4 revenue, gross profit before the restatement,
growth, return on average equity, a figure in another unit).

``document="statement"`` gives each task one page instead: the income statement alone (with its
prior-year column and restatement footnote), worded tersely: with one question group, 750-880
tokens of the tiny model's byte-level tokenizer where a whole report is 2,400-3,200, so that a
model with a 1,024-token context can read it and still answer. Its levels: a line of the statement; a bridge (revenue, cost of sales, gross profit) or the gross
margin; revenue growth or a figure in millions.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from veriloop.core import Task
from veriloop.tasks.generators._financial_statements import Report, Year, draw_report, income_statement, pages
from veriloop.tasks._sources import GeneratorOptions, generated_task, id_variant, register_generator, seeded_streams

ANSWER_FORMAT = (
    "Answer with one JSON object mapping each name above to a number, in a ```json block. "
    "Use only these names: any other key counts as a fabricated field."
)
# half a unit of the last digit asked for, and a little: an unrounded answer passes, one off by a digit fails
_TOLERANCE = {"thousands": 0.5, "millions": 0.0006, "percent": 0.006, "ratio": 0.006}


@dataclass(frozen=True)
class Ask:
    """One field of the answer: its name, the question, its gold value and the unit asked."""

    name: str
    text: str
    value: float
    unit: str = "thousands"


@dataclass(frozen=True)
class Group:
    """Fields asked together, and the identities (total, signed parts) that tie them."""

    asks: tuple[Ask, ...]
    identities: tuple[tuple[str, tuple[str, ...]], ...] = ()


def _one(name: str, text: str, value: float, unit: str = "thousands") -> Group:
    return Group((Ask(name, text, value, unit),))


def _figure(r: Report, rng: random.Random, lines: tuple[tuple[str, str, int], ...]) -> Group:
    """One of ``lines`` (name, label, value), asked as it stands in the statements."""
    name, label, value = rng.choice(lines)
    return _one(f"{name}_{r.fy.lower()}", f"What was {label} for {r.fy}?", value)


def _tax(c: Year) -> tuple[str, str, int]:
    return ("income_tax", "income tax expense (as a positive amount)", c.income_tax)


def _statement_figure(r: Report, rng: random.Random) -> Group:
    c = r.current
    lines = (("revenue", "revenue", c.revenue), ("net_income", "net income", c.net_income))
    lines += (
        ("operating_income", "operating income", c.operating_income),
        ("total_assets", "total assets", c.total_assets),
    )
    return _figure(r, rng, (*lines, ("total_liabilities", "total liabilities", c.total_liabilities), _tax(c)))


def _income_figure(r: Report, rng: random.Random) -> Group:
    c = r.current
    lines = (("revenue", "revenue", c.revenue), ("gross_profit", "gross profit", c.gross_profit))
    lines += (("operating_income", "operating income", c.operating_income), ("net_income", "net income", c.net_income))
    return _figure(r, rng, (*lines, _tax(c)))


def _current_assets(r: Report, rng: random.Random) -> Group:
    c, fy = r.current, r.fy.lower()
    lines = (("cash", "cash and cash equivalents", c.cash), ("receivables", "trade receivables", c.receivables))
    lines += (("inventories", "inventories", c.inventories),)
    asks = tuple(Ask(f"{n}_{fy}", f"{label.capitalize()} at the end of {r.fy}.", v) for n, label, v in lines)
    total = Ask(f"total_current_assets_{fy}", f"Total current assets at the end of {r.fy}.", c.current_assets)
    return Group((*asks, total), ((total.name, tuple(a.name for a in asks)),))


def _equity(r: Report, rng: random.Random) -> Group:
    c, fy = r.current, r.fy.lower()
    asks = (
        Ask(f"share_capital_{fy}", f"Share capital at the end of {r.fy}.", c.share_capital),
        Ask(f"retained_earnings_{fy}", f"Retained earnings at the end of {r.fy}.", c.retained_earnings),
    )
    total = Ask(f"total_equity_{fy}", f"Total equity at the end of {r.fy}.", c.total_equity)
    return Group((*asks, total), ((total.name, tuple(a.name for a in asks)),))


def _gross_profit_bridge(r: Report, rng: random.Random) -> Group:
    c, fy = r.current, r.fy.lower()
    revenue = Ask(f"revenue_{fy}", f"Revenue for {r.fy}.", c.revenue)
    cost = Ask(f"cost_of_sales_{fy}", f"Cost of sales for {r.fy}, as a positive amount.", c.cost_of_sales)
    gross = Ask(f"gross_profit_{fy}", f"Gross profit for {r.fy}.", c.gross_profit)
    return Group((revenue, cost, gross), ((gross.name, (revenue.name, "-" + cost.name)),))


def _segments(r: Report, rng: random.Random) -> Group:
    fy = r.fy.lower()
    asks = tuple(
        Ask(f"{name.lower()}_segment_revenue_{fy}", f"Revenue of the {name} segment in {r.fy} (Note 2).", now)
        for name, now, _ in r.segments
    )
    total = Ask(f"revenue_{fy}", f"Group revenue for {r.fy}.", r.current.revenue)
    return Group((*asks, total), ((total.name, tuple(a.name for a in asks)),))


def _borrowings(r: Report, rng: random.Random) -> Group:
    fy = r.fy.lower()
    text = f"Total borrowings at the end of {r.fy}, in thousands (Note 3 gives them in millions)."
    return _one(f"total_borrowings_{fy}", text, r.current.borrowings)


def _net_debt(r: Report, rng: random.Random) -> Group:
    c = r.current
    text = f"Net debt at the end of {r.fy}: total borrowings minus cash and cash equivalents (negative if net cash)."
    return _one(f"net_debt_{r.fy.lower()}", text, c.borrowings - c.cash)


def _gross_margin(r: Report, rng: random.Random) -> Group:
    c = r.current
    text = f"Gross margin for {r.fy} in percent (gross profit / revenue x 100), rounded to two decimals."
    return _one(f"gross_margin_pct_{r.fy.lower()}", text, round(100 * c.gross_profit / c.revenue, 2), "percent")


def _current_ratio(r: Report, rng: random.Random) -> Group:
    c = r.current
    text = f"Current ratio at the end of {r.fy} (current assets / current liabilities), rounded to two decimals."
    return _one(f"current_ratio_{r.fy.lower()}", text, round(c.current_assets / c.current_liabilities, 2), "ratio")


def _prior_revenue(r: Report, rng: random.Random) -> Group:
    return _one(f"revenue_{r.prior_fy.lower()}", f"Revenue for the prior year, {r.prior_fy}.", r.prior.revenue)


def _dividends(r: Report, rng: random.Random) -> Group:
    text = f"Dividends paid during {r.fy} (Note 5)."
    return _one(f"dividends_paid_{r.fy.lower()}", text, r.dividends)


def _fourth_quarter(r: Report, rng: random.Random) -> Group:
    text = f"Revenue in the fourth quarter of {r.fy} (Note 6 gives the first three quarters)."
    return _one(f"q4_revenue_{r.fy.lower()}", text, r.quarters[3])


def _gross_profit_as_reported(r: Report, rng: random.Random) -> Group:
    text = f"{r.prior_fy} gross profit as originally reported, before the restatement in Note 4."
    return _one(f"gross_profit_as_reported_{r.prior_fy.lower()}", text, r.prior.revenue - r.prior_cost_as_reported)


def _revenue_growth(r: Report, rng: random.Random) -> Group:
    text = f"Revenue growth from {r.prior_fy} to {r.fy} in percent, rounded to two decimals (negative if it fell)."
    growth = 100 * (r.current.revenue - r.prior.revenue) / r.prior.revenue
    return _one(f"revenue_growth_pct_{r.fy.lower()}", text, round(growth, 2), "percent")


def _return_on_equity(r: Report, rng: random.Random) -> Group:
    text = (
        f"Return on average equity for {r.fy} in percent: net income / the mean of {r.prior_fy} and {r.fy} "
        "total equity x 100, rounded to two decimals."
    )
    average = (r.current.total_equity + r.prior.total_equity) / 2
    return _one(f"return_on_equity_pct_{r.fy.lower()}", text, round(100 * r.current.net_income / average, 2), "percent")


def _operating_income_millions(r: Report, rng: random.Random) -> Group:
    text = f"Operating income for {r.fy} in millions of {r.currency}, to three decimals."
    return _one(f"operating_income_millions_{r.fy.lower()}", text, r.current.operating_income / 1000, "millions")


GroupKind = Callable[[Report, random.Random], Group]
GROUP_KINDS: dict[int, tuple[GroupKind, ...]] = {
    1: (_statement_figure, _current_assets, _equity, _gross_profit_bridge),
    2: (_segments, _borrowings, _net_debt, _gross_margin, _current_ratio, _prior_revenue, _dividends, _equity),
    3: (
        _fourth_quarter,
        _gross_profit_as_reported,
        _revenue_growth,
        _return_on_equity,
        _operating_income_millions,
        _net_debt,
        _segments,
    ),
}
STATEMENT_KINDS: dict[int, tuple[GroupKind, ...]] = {
    1: (_income_figure, _prior_revenue),
    2: (_gross_profit_bridge, _gross_margin),
    3: (_revenue_growth, _operating_income_millions),
}
# level: (segments, notes shown, notes per page, quarterly note)
_LAYOUT = {1: (2, 2, 2, False), 2: (3, 5, 2, False), 3: (4, 6, 1, True)}


class FinancialDocsOptions(GeneratorOptions):
    difficulty: int | None = Field(default=None, ge=1, le=3, description="level 1-3; default: each task draws one")
    groups: int = Field(default=2, ge=1, le=6, description="question groups per task (a group asks 1-5 fields)")
    document: Literal["report", "statement"] = Field(
        default="report",
        description="report: a several-page annual report; statement: its income statement alone, one page",
    )
    domain: str = Field(default="financial_docs", min_length=1, description="domain name of the tasks")


def _asked(
    report: Report, rng: random.Random, table: dict[int, tuple[GroupKind, ...]], level: int, count: int
) -> tuple[list[Ask], list[tuple[str, tuple]]]:
    kinds = rng.sample(table[level], min(count, len(table[level])))
    asks: dict[str, Ask] = {}
    identities: list[tuple[str, tuple[str, ...]]] = []
    for kind in kinds:
        group = kind(report, rng)
        for ask in group.asks:
            asks.setdefault(ask.name, ask)
        identities += [i for i in group.identities if i not in identities]
    return list(asks.values()), identities


def _report_prompt(report: Report, level: int, asks: list[Ask]) -> str:
    _, shown, per_page, quarterly = _LAYOUT[level]
    lines = [
        f"Below is the {report.year} annual report of {report.company}.",
        "",
        "\n\n".join(pages(report, quarterly, per_page, shown)),
        "",
        "Extract these figures. Amounts are in thousands of "
        f"{report.currency} unless the question says otherwise; percentages and ratios rounded to two decimals.",
    ]
    lines += [f"- {a.name}: {a.text}" for a in asks]
    lines += ["", ANSWER_FORMAT]
    return "\n".join(lines)


def _statement_prompt(report: Report, level: int, asks: list[Ask]) -> str:
    """The one-page document, worded tersely: every character is about a token here."""
    lines = [f"From the annual report of {report.company}:", "", income_statement(report), ""]
    lines += [f"In thousands of {report.currency} unless asked otherwise; percentages to two decimals."]
    lines += [f"- {a.name}: {a.text}" for a in asks]
    lines += ["", "Answer with a JSON object of these names in a ```json block; any other key counts as fabricated."]
    return "\n".join(lines)


PROMPTS: dict[str, Callable[[Report, int, list[Ask]], str]] = {"report": _report_prompt, "statement": _statement_prompt}


def _verifier(asks: list[Ask], identities: list[tuple[str, tuple[str, ...]]]) -> dict:
    return {
        "kind": "document_fields",
        "rel_tol": 0.0,
        "units": {a.name: a.unit for a in asks},
        "tolerances": {a.name: {"abs_tol": _TOLERANCE[a.unit]} for a in asks},
        "identities": [{"total": total, "parts": list(parts)} for total, parts in identities],
    }


@register_generator("financial-docs", FinancialDocsOptions)
def generate_financial_docs(options: FinancialDocsOptions) -> list[Task]:
    """Annual reports over several pages; figures extracted and derived, checked by ``document_fields``."""
    tasks = []
    variant = id_variant(options, ("document", "difficulty", "groups"))
    for index, rng in seeded_streams("financial-docs", options):
        level = options.difficulty or rng.randint(1, 3)
        report = draw_report(rng, segments=_LAYOUT[level][0])
        table = STATEMENT_KINDS if options.document == "statement" else GROUP_KINDS
        asks, identities = _asked(report, rng, table, level, options.groups)
        metadata = {"company": report.company, "fields": len(asks), "cross_checks": len(identities)}
        metadata["document"] = options.document
        tasks.append(
            generated_task(
                "financial-docs",
                options,
                index,
                level,
                len(GROUP_KINDS),
                metadata,
                variant,
                domain=options.domain,
                prompt=PROMPTS[options.document](report, level, asks),
                verifier=_verifier(asks, identities),
                gold={a.name: a.value for a in asks},
            )
        )
    return tasks
