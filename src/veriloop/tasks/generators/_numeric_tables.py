"""The ``numeric-tables`` generator: a financial table in text, and questions computed from it.

Each task shows one company's results over several periods (revenue, cost of revenue,
operating expenses) as a Markdown table and asks a few named questions; the answers are
computed from the table and checked by the ``numeric`` verifier with a tolerance. Question
kinds by difficulty: 1 reads a cell; 2 adds one step (gross profit, totals, changes); 3 asks
for ratios and growth rates in percent, rounded to two decimals.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import Field

from veriloop.core import Task
from veriloop.tasks._sources import GeneratorOptions, generated_task, register_generator, seeded_streams

_NAME_FIRST = (
    "Northwind",
    "Bluepeak",
    "Ironbridge",
    "Silverline",
    "Redwood",
    "Harbor",
    "Summit",
    "Crescent",
    "Granite",
    "Evergreen",
    "Falcon",
    "Meridian",
    "Oakridge",
    "Pioneer",
    "Sterling",
    "Westbrook",
)
_NAME_SECOND = (
    "Logistics",
    "Foods",
    "Systems",
    "Energy",
    "Retail",
    "Pharma",
    "Robotics",
    "Textiles",
    "Media",
    "Analytics",
    "Outdoor",
    "Marine",
    "Materials",
    "Software",
    "Biotech",
    "Freight",
)
_NAME_SUFFIX = ("Ltd", "Inc.", "plc", "Group", "AG", "Corp.")


@dataclass(frozen=True)
class Table:
    """One company's figures: ``rows[item][period]`` in thousands of its currency."""

    company: str
    currency: str
    periods: tuple[str, ...]
    revenue: tuple[int, ...]
    cost: tuple[int, ...]
    opex: tuple[int, ...]

    def gross(self, p: int) -> int:
        return self.revenue[p] - self.cost[p]

    def operating(self, p: int) -> int:
        return self.gross(p) - self.opex[p]

    def text(self) -> str:
        header = "| Line item | " + " | ".join(self.periods) + " |"
        rule = "|---|" + "---:|" * len(self.periods)
        rows = [("Revenue", self.revenue), ("Cost of revenue", self.cost), ("Operating expenses", self.opex)]
        body = ["| " + label + " | " + " | ".join(f"{v:,}" for v in values) + " |" for label, values in rows]
        return "\n".join([header, rule, *body])


@dataclass(frozen=True)
class Question:
    name: str
    text: str
    value: float


def _slug(period: str) -> str:
    return period.lower().replace(" ", "_")


def company_name(rng: random.Random) -> str:
    """A made-up company name such as "Granite Robotics plc"."""
    return f"{rng.choice(_NAME_FIRST)} {rng.choice(_NAME_SECOND)} {rng.choice(_NAME_SUFFIX)}"


def _table(rng: random.Random, periods: int) -> Table:
    company = company_name(rng)
    year = rng.randint(2015, 2024)
    if rng.random() < 0.5:
        labels = tuple(f"Q{(q % 4) + 1} {year + q // 4}" for q in range(periods))
    else:
        labels = tuple(f"FY{year + y}" for y in range(periods))
    base = rng.randint(800, 90_000)
    revenue, cost, opex = [], [], []
    for _ in range(periods):
        base = max(100, round(base * rng.uniform(0.85, 1.25)))
        revenue.append(base)
        cost.append(round(base * rng.uniform(0.35, 0.75)))
        opex.append(round(base * rng.uniform(0.08, 0.3)))
    return Table(company, rng.choice(("USD", "EUR", "GBP")), labels, tuple(revenue), tuple(cost), tuple(opex))


def _lookup(t: Table, rng: random.Random) -> Question:
    p = rng.randrange(len(t.periods))
    item, values = rng.choice((("revenue", t.revenue), ("cost_of_revenue", t.cost), ("operating_expenses", t.opex)))
    label = item.replace("_", " ")
    return Question(f"{item}_{_slug(t.periods[p])}", f"What was {label} in {t.periods[p]}?", values[p])


def _gross_profit(t: Table, rng: random.Random) -> Question:
    p = rng.randrange(len(t.periods))
    return Question(
        f"gross_profit_{_slug(t.periods[p])}",
        f"What was gross profit (revenue minus cost of revenue) in {t.periods[p]}?",
        t.gross(p),
    )


def _operating_income(t: Table, rng: random.Random) -> Question:
    p = rng.randrange(len(t.periods))
    return Question(
        f"operating_income_{_slug(t.periods[p])}",
        f"What was operating income (gross profit minus operating expenses) in {t.periods[p]}?",
        t.operating(p),
    )


def _total_revenue(t: Table, rng: random.Random) -> Question:
    return Question("total_revenue", f"What was total revenue over all {len(t.periods)} periods?", sum(t.revenue))


def _opex_change(t: Table, rng: random.Random) -> Question:
    p = rng.randrange(1, len(t.periods))
    return Question(
        f"opex_change_{_slug(t.periods[p])}",
        f"By how much did operating expenses change from {t.periods[p - 1]} to {t.periods[p]} (negative if they fell)?",
        t.opex[p] - t.opex[p - 1],
    )


def _gross_margin(t: Table, rng: random.Random) -> Question:
    p = rng.randrange(len(t.periods))
    return Question(
        f"gross_margin_pct_{_slug(t.periods[p])}",
        f"What was the gross margin in {t.periods[p]}, in percent (gross profit / revenue x 100)?",
        round(100 * t.gross(p) / t.revenue[p], 2),
    )


def _revenue_growth(t: Table, rng: random.Random) -> Question:
    p = rng.randrange(1, len(t.periods))
    return Question(
        f"revenue_growth_pct_{_slug(t.periods[p])}",
        f"By what percent did revenue grow from {t.periods[p - 1]} to {t.periods[p]} (negative if it fell)?",
        round(100 * (t.revenue[p] - t.revenue[p - 1]) / t.revenue[p - 1], 2),
    )


def _operating_margin(t: Table, rng: random.Random) -> Question:
    p = rng.randrange(len(t.periods))
    return Question(
        f"operating_margin_pct_{_slug(t.periods[p])}",
        f"What was the operating margin in {t.periods[p]}, in percent (operating income / revenue x 100)?",
        round(100 * t.operating(p) / t.revenue[p], 2),
    )


QUESTION_KINDS: dict[int, tuple[Callable[[Table, random.Random], Question], ...]] = {
    1: (_lookup,),
    2: (_lookup, _gross_profit, _operating_income, _total_revenue, _opex_change),
    3: (_gross_profit, _operating_income, _gross_margin, _revenue_growth, _operating_margin),
}


class NumericTablesOptions(GeneratorOptions):
    difficulty: int | None = Field(default=None, ge=1, le=3, description="level 1-3; default: each task draws one")
    questions: int = Field(default=3, ge=1, le=8, description="questions per table")
    periods: int = Field(default=4, ge=2, le=8, description="periods (columns) per table")
    rel_tol: float = Field(default=1e-3, ge=0, description="relative tolerance of the numeric verifier")
    abs_tol: float = Field(default=0.01, ge=0, description="absolute tolerance (covers rounding to 2 decimals)")


def _questions(table: Table, rng: random.Random, level: int, count: int) -> list[Question]:
    chosen: dict[str, Question] = {}
    for _ in range(count * 20):
        question = rng.choice(QUESTION_KINDS[level])(table, rng)
        chosen.setdefault(question.name, question)
        if len(chosen) == count:
            break
    return list(chosen.values())


def _prompt(table: Table, questions: list[Question]) -> str:
    lines = [
        f"The table shows results for {table.company}, in thousands of {table.currency}.",
        "",
        table.text(),
        "",
        "Answer these questions (amounts in thousands of " + table.currency + "; percentages rounded to two decimals):",
    ]
    lines += [f"{i}. {q.name}: {q.text}" for i, q in enumerate(questions, start=1)]
    lines += ["", "Give each answer on its own line as `name: number`, with no other numbers on that line."]
    return "\n".join(lines)


@register_generator("numeric-tables", NumericTablesOptions)
def generate_numeric_tables(options: NumericTablesOptions) -> list[Task]:
    """Financial tables in text with questions computed from them, checked by ``numeric``."""
    tasks = []
    for index, rng in seeded_streams("numeric-tables", options):
        level = options.difficulty or rng.randint(1, 3)
        table = _table(rng, options.periods)
        questions = _questions(table, rng, level, options.questions)
        tasks.append(
            generated_task(
                "numeric-tables",
                options,
                index,
                level,
                len(QUESTION_KINDS),
                {"company": table.company},
                domain="numeric_tables",
                prompt=_prompt(table, questions),
                verifier={"kind": "numeric", "rel_tol": options.rel_tol, "abs_tol": options.abs_tol},
                gold={q.name: q.value for q in questions},
            )
        )
    return tasks
