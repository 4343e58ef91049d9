"""A company's annual report in figures, consistent across its statements, and its text pages.

``draw_report`` builds one fiscal year and its prior year: an income statement, a balance sheet
that balances (assets = liabilities + equity, every subtotal the sum of its lines), retained
earnings that roll forward (prior + net income - dividends), and notes that restate figures
elsewhere: revenue by segment and by quarter, borrowings in millions, a restated prior-year
cost of sales. ``pages`` renders it as numbered text pages with Markdown tables, including the
distractors a reader must not confuse with the asked figure (prior-year columns, the figure
before restatement, rounded highlights, footnotes with unrelated amounts).

All amounts are integers in thousands of the report's currency.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from veriloop.tasks.generators._numeric_tables import company_name

_SEGMENTS = ("Industrial", "Consumer", "Services", "Healthcare", "Digital", "Infrastructure", "Aftermarket")


@dataclass(frozen=True)
class Year:
    """One fiscal year's figures (thousands)."""

    revenue: int
    cost_of_sales: int
    selling_admin: int
    research: int
    finance_costs: int
    income_tax: int
    cash: int
    receivables: int
    inventories: int
    property_plant: int
    intangibles: int
    payables: int
    short_term_debt: int
    long_term_debt: int
    provisions: int
    share_capital: int
    retained_earnings: int

    @property
    def gross_profit(self) -> int:
        return self.revenue - self.cost_of_sales

    @property
    def operating_income(self) -> int:
        return self.gross_profit - self.selling_admin - self.research

    @property
    def profit_before_tax(self) -> int:
        return self.operating_income - self.finance_costs

    @property
    def net_income(self) -> int:
        return self.profit_before_tax - self.income_tax

    @property
    def current_assets(self) -> int:
        return self.cash + self.receivables + self.inventories

    @property
    def non_current_assets(self) -> int:
        return self.property_plant + self.intangibles

    @property
    def total_assets(self) -> int:
        return self.current_assets + self.non_current_assets

    @property
    def current_liabilities(self) -> int:
        return self.payables + self.short_term_debt

    @property
    def non_current_liabilities(self) -> int:
        return self.long_term_debt + self.provisions

    @property
    def total_liabilities(self) -> int:
        return self.current_liabilities + self.non_current_liabilities

    @property
    def total_equity(self) -> int:
        return self.share_capital + self.retained_earnings

    @property
    def borrowings(self) -> int:
        return self.short_term_debt + self.long_term_debt


@dataclass(frozen=True)
class Report:
    """The current year, the prior year (as restated) and the notes' breakdowns."""

    company: str
    currency: str
    year: int
    current: Year
    prior: Year
    prior_cost_as_reported: int  # the prior year's cost of sales before its restatement
    segments: tuple[tuple[str, int, int], ...]  # (name, current revenue, prior revenue)
    quarters: tuple[int, int, int, int]  # current year's revenue by quarter
    dividends: int
    employees: int
    write_down: int  # footnote: inventories net of this write-down

    @property
    def fy(self) -> str:
        return f"FY{self.year}"

    @property
    def prior_fy(self) -> str:
        return f"FY{self.year - 1}"


def _split(rng: random.Random, total: int, parts: int) -> list[int]:
    """``parts`` positive integers summing to ``total``."""
    weights = [rng.uniform(0.5, 1.5) for _ in range(parts)]
    shares = [round(total * w / sum(weights)) for w in weights[:-1]]
    return [*shares, total - sum(shares)]


def _income(rng: random.Random, revenue: int) -> dict[str, int]:
    """Income statement lines; profit before tax is always positive (costs stay below 96%)."""
    cost = round(revenue * rng.uniform(0.45, 0.7))
    selling = round(revenue * rng.uniform(0.08, 0.16))
    research = round(revenue * rng.uniform(0.02, 0.08))
    finance = round(revenue * rng.uniform(0.005, 0.02))
    pbt = revenue - cost - selling - research - finance
    tax = round(pbt * rng.uniform(0.19, 0.3))
    return {
        "revenue": revenue,
        "cost_of_sales": cost,
        "selling_admin": selling,
        "research": research,
        "finance_costs": finance,
        "income_tax": tax,
    }


_ASSET_SHARES = ((0.1, 0.18), (0.06, 0.14), (0.3, 0.42), (0.05, 0.12))  # of total assets; cash gets 14-49%


def _balance(rng: random.Random, share_capital: int, retained: int) -> dict[str, int]:
    """Balance sheet lines that balance: cash is what the other assets leave of the total."""
    equity = share_capital + retained
    liabilities = round(equity * rng.uniform(0.6, 1.4))
    payables, short_debt, long_debt, provisions = _split(rng, liabilities, 4)
    assets = liabilities + equity
    receivables, inventories, plant, intangibles = (round(assets * rng.uniform(lo, hi)) for lo, hi in _ASSET_SHARES)
    return {
        "cash": assets - receivables - inventories - plant - intangibles,
        "receivables": receivables,
        "inventories": inventories,
        "property_plant": plant,
        "intangibles": intangibles,
        "payables": payables,
        "short_term_debt": short_debt,
        "long_term_debt": long_debt,
        "provisions": provisions,
        "share_capital": share_capital,
        "retained_earnings": retained,
    }


def draw_report(rng: random.Random, segments: int = 3) -> Report:
    """One company's consistent two-year report; retained earnings roll forward."""
    prior_revenue = rng.randint(20_000, 900_000)
    share_capital = round(prior_revenue * rng.uniform(0.05, 0.2))
    prior = Year(
        **_income(rng, prior_revenue),
        **_balance(rng, share_capital, round(prior_revenue * rng.uniform(0.2, 0.6))),
    )
    income = _income(rng, round(prior_revenue * rng.uniform(0.9, 1.3)))
    net_income = income["revenue"] - sum(v for k, v in income.items() if k != "revenue")  # every other line is a cost
    dividends = round(net_income * rng.uniform(0.2, 0.5))
    current = Year(**income, **_balance(rng, share_capital, prior.retained_earnings + net_income - dividends))
    names = rng.sample(_SEGMENTS, segments)
    restatement = round(prior.cost_of_sales * rng.uniform(0.01, 0.04)) * rng.choice((1, -1))
    return Report(
        company=company_name(rng),
        currency=rng.choice(("USD", "EUR", "GBP", "CHF")),
        year=rng.randint(2016, 2025),
        current=current,
        prior=prior,
        prior_cost_as_reported=prior.cost_of_sales - restatement,
        segments=tuple(zip(names, _split(rng, current.revenue, segments), _split(rng, prior.revenue, segments))),
        quarters=tuple(_split(rng, current.revenue, 4)),  # type: ignore[arg-type]
        dividends=dividends,
        employees=rng.randint(150, 40_000),
        write_down=round(current.inventories * rng.uniform(0.02, 0.08)),
    )


def _table(report: Report, rows: list[tuple[str, int, int]], bold: frozenset[str] = frozenset()) -> str:
    lines = [f"| {report.currency} thousands | {report.fy} | {report.prior_fy} |", "|---|---:|---:|"]
    for label, now, before in rows:
        shown = f"**{label}**" if label in bold else label
        lines.append(f"| {shown} | {now:,} | {before:,} |")
    return "\n".join(lines)


def income_statement(report: Report) -> str:
    c, p = report.current, report.prior
    rows = [
        ("Revenue", c.revenue, p.revenue),
        ("Cost of sales", -c.cost_of_sales, -p.cost_of_sales),
        ("Gross profit", c.gross_profit, p.gross_profit),
        ("Selling, general and administrative expenses", -c.selling_admin, -p.selling_admin),
        ("Research and development", -c.research, -p.research),
        ("Operating income", c.operating_income, p.operating_income),
        ("Finance costs", -c.finance_costs, -p.finance_costs),
        ("Profit before tax", c.profit_before_tax, p.profit_before_tax),
        ("Income tax", -c.income_tax, -p.income_tax),
        ("Net income", c.net_income, p.net_income),
    ]
    return (
        f"## Consolidated income statement for the year ended 31 December {report.year}\n\n"
        + _table(report, rows, frozenset({"Gross profit", "Operating income", "Net income"}))
        + f"\n\nExpenses are shown as negative amounts. {report.prior_fy} cost of sales is restated (see Note 4)."
    )


def balance_sheet(report: Report) -> str:
    c, p = report.current, report.prior
    rows = [
        ("Cash and cash equivalents", c.cash, p.cash),
        ("Trade receivables", c.receivables, p.receivables),
        ("Inventories\u00b9", c.inventories, p.inventories),
        ("Total current assets", c.current_assets, p.current_assets),
        ("Property, plant and equipment", c.property_plant, p.property_plant),
        ("Intangible assets", c.intangibles, p.intangibles),
        ("Total non-current assets", c.non_current_assets, p.non_current_assets),
        ("Total assets", c.total_assets, p.total_assets),
        ("Trade payables", c.payables, p.payables),
        ("Short-term borrowings", c.short_term_debt, p.short_term_debt),
        ("Total current liabilities", c.current_liabilities, p.current_liabilities),
        ("Long-term borrowings", c.long_term_debt, p.long_term_debt),
        ("Provisions", c.provisions, p.provisions),
        ("Total non-current liabilities", c.non_current_liabilities, p.non_current_liabilities),
        ("Total liabilities", c.total_liabilities, p.total_liabilities),
        ("Share capital", c.share_capital, p.share_capital),
        ("Retained earnings", c.retained_earnings, p.retained_earnings),
        ("Total equity", c.total_equity, p.total_equity),
        ("Total liabilities and equity", c.total_liabilities + c.total_equity, p.total_liabilities + p.total_equity),
    ]
    return (
        f"## Consolidated balance sheet at 31 December {report.year}\n\n"
        + _table(report, rows, frozenset({"Total assets", "Total liabilities and equity"}))
        + f"\n\n\u00b9 Inventories are stated net of a write-down of {report.write_down:,} thousand."
    )


def _millions(thousands: int) -> str:
    return f"{thousands / 1000:,.3f}"


def notes(report: Report, quarterly: bool) -> list[str]:
    """The notes to the statements; ``quarterly`` adds the quarterly revenue note (Q4 left out)."""
    c, p, cur = report.current, report.prior, report.currency
    segment_rows = "\n".join(f"| {name} | {now:,} | {before:,} |" for name, now, before in report.segments)
    found = [
        f"### Note 1: Basis of preparation\n\nAmounts are in thousands of {cur} unless stated otherwise. "
        f"The group employed {report.employees:,} people at year end.",
        f"### Note 2: Revenue by segment\n\n| {cur} thousands | {report.fy} | {report.prior_fy} |\n|---|---:|---:|\n"
        + segment_rows
        + "\n\nSegment revenue adds up to the group's revenue.",
        f"### Note 3: Borrowings\n\nTotal borrowings (short-term and long-term) were {cur} {_millions(c.borrowings)} "
        f"million at 31 December {report.year} ({report.prior_fy}: {cur} {_millions(p.borrowings)} million). "
        f"Of the {report.year} total, {cur} {_millions(c.long_term_debt)} million falls due after more than one year.",
        f"### Note 4: Restatement\n\n{report.prior_fy} cost of sales was originally reported as "
        f"{report.prior_cost_as_reported:,} thousand and has been restated to {p.cost_of_sales:,} thousand "
        "after a reclassification of freight costs. The income statement shows the restated figure.",
        f"### Note 5: Equity\n\nDividends of {cur} {report.dividends:,} thousand were paid during {report.year}. "
        f"Retained earnings moved from {p.retained_earnings:,} to {c.retained_earnings:,} thousand.",
    ]
    if quarterly:
        q1, q2, q3, _ = report.quarters
        found.append(
            "### Note 6: Quarterly revenue (unaudited)\n\n"
            f"Revenue was {q1:,} thousand in Q1, {q2:,} thousand in Q2 and {q3:,} thousand in Q3 of {report.year}; "
            "the fourth quarter makes up the rest of the year's revenue."
        )
    return found


def highlights(report: Report) -> str:
    c = report.current
    return (
        f"# {report.company}: annual report {report.year}\n\n## Highlights\n\n"
        f"- Revenue of {report.currency} {c.revenue / 1000:,.1f} million\n"
        f"- Net income of {report.currency} {c.net_income / 1000:,.1f} million\n"
        f"- {report.employees:,} employees"
    )


def pages(report: Report, quarterly: bool, notes_per_page: int = 2, notes_shown: int = 6) -> list[str]:
    """The report as text pages: highlights, the two statements, then the first ``notes_shown`` notes."""
    found = notes(report, quarterly)[:notes_shown]
    grouped = ["\n\n".join(found[i : i + notes_per_page]) for i in range(0, len(found), notes_per_page)]
    body = [highlights(report), income_statement(report), balance_sheet(report)]
    body += ["## Notes to the financial statements\n\n" + grouped[0], *grouped[1:]]
    return [f"--- Page {number} ---\n\n{text}" for number, text in enumerate(body, start=1)]
