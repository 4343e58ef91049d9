"""How often people agree with the verifier: agreement, false-pass and false-fail rates.

Counted over the latest judgment of each (reviewer, sample); "unsure" judgments are counted but
left out of every rate. For a group of judgments (one domain, one verifier kind, or all):

- agreement = "verifier right" / judged (judged: right + should_pass + should_fail);
- false-pass rate = "should have failed" / judged samples the verifier passed;
- false-fail rate = "should have passed" / judged samples the verifier failed.

Each rate comes with its Wilson interval, which stays honest on the small counts a spot check
gives (0 of 3 is not a 0% rate). ``false_pass_failures`` is the gate on these figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

from pydantic import Field

from veriloop.core import Record
from veriloop.evaluation._judgments import Judgment
from veriloop.evaluation._passk import wilson_interval

TOTAL = "(all)"


class Rate(Record):
    """A proportion with its Wilson interval; ``value`` is None when nothing was counted."""

    count: int = Field(description="judgments in the numerator")
    of: int = Field(description="judgments in the denominator")
    value: float | None
    ci: tuple[float, float]


class AgreementBlock(Record):
    """The figures of one group of judgments."""

    judgments: int = Field(description="latest judgments, unsure included")
    unsure: int
    agreement: Rate
    false_pass: Rate
    false_fail: Rate


class AgreementReport(Record):
    """Verifier-human agreement overall, per domain and per verifier kind."""

    confidence: float
    reviewers: tuple[str, ...]
    total: AgreementBlock
    domains: dict[str, AgreementBlock]
    verifier_kinds: dict[str, AgreementBlock]


def _rate(count: int, of: int, confidence: float) -> Rate:
    low, high = wilson_interval(count, of, confidence)
    return Rate(count=count, of=of, value=round(count / of, 6) if of else None, ci=(round(low, 6), round(high, 6)))


def agreement_block(judgments: Sequence[Judgment], confidence: float = 0.95) -> AgreementBlock:
    """The figures of ``judgments`` (see the module docstring)."""
    judged = [j for j in judgments if j.verdict != "unsure"]
    passed = [j for j in judged if j.verifier_passed]
    failed = [j for j in judged if not j.verifier_passed]
    return AgreementBlock(
        judgments=len(judgments),
        unsure=len(judgments) - len(judged),
        agreement=_rate(sum(j.verdict == "right" for j in judged), len(judged), confidence),
        false_pass=_rate(sum(j.verdict == "should_fail" for j in passed), len(passed), confidence),
        false_fail=_rate(sum(j.verdict == "should_pass" for j in failed), len(failed), confidence),
    )


def agreement(judgments: Sequence[Judgment], confidence: float = 0.95) -> AgreementReport:
    """Agreement figures over ``judgments`` (pass the store's ``latest``), total and by group."""
    by_domain: dict[str, list[Judgment]] = {}
    by_kind: dict[str, list[Judgment]] = {}
    for judgment in judgments:
        by_domain.setdefault(judgment.domain, []).append(judgment)
        by_kind.setdefault(judgment.verifier_kind, []).append(judgment)
    return AgreementReport(
        confidence=confidence,
        reviewers=tuple(sorted({j.reviewer for j in judgments})),
        total=agreement_block(judgments, confidence),
        domains={name: agreement_block(group, confidence) for name, group in sorted(by_domain.items())},
        verifier_kinds={name: agreement_block(group, confidence) for name, group in sorted(by_kind.items())},
    )


def false_pass_failures(report: AgreementReport, max_rate: float, min_judgments: int) -> list[str]:
    """One line per domain whose false-pass rate is above ``max_rate``, among domains with at
    least ``min_judgments`` judged samples the verifier passed (fewer say too little to gate on)."""
    return [
        f"{domain}: false-pass rate {block.false_pass.value:.3f} ({block.false_pass.count} of "
        f"{block.false_pass.of} passed samples judged hacks, {report.confidence:.0%} CI "
        f"[{block.false_pass.ci[0]:.3f}, {block.false_pass.ci[1]:.3f}]) is above {max_rate:.3f}"
        for domain, block in report.domains.items()
        if block.false_pass.of >= min_judgments and (block.false_pass.value or 0.0) > max_rate
    ]


def _rate_cell(rate: Rate) -> str:
    if rate.value is None:
        return "-"
    return f"{100 * rate.value:.1f}% <span class=ci>({rate.count}/{rate.of}) [{100 * rate.ci[0]:.1f}, {100 * rate.ci[1]:.1f}]</span>"


def agreement_table(groups: Mapping[str, AgreementBlock], heading: str) -> str:
    """One table of agreement figures, a row per group (shared with ``veriloop report``)."""
    rows = "".join(
        f"<tr><td>{escape(name)}</td><td>{block.judgments}</td><td>{block.unsure}</td><td>{_rate_cell(block.agreement)}</td>"
        f"<td>{_rate_cell(block.false_pass)}</td><td>{_rate_cell(block.false_fail)}</td></tr>"
        for name, block in groups.items()
    )
    return (
        f"<table class=agreement><thead><tr><th>{escape(heading)}</th><th>judgments</th><th>unsure</th><th>agreement</th>"
        f"<th>false-pass rate</th><th>false-fail rate</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def agreement_html(report: AgreementReport) -> str:
    """The figures as HTML: totals, per domain, per verifier kind (95% Wilson intervals)."""
    return (
        f"<p class=ci>{report.total.judgments} judgments by {len(report.reviewers)} "
        f"{'reviewer' if len(report.reviewers) == 1 else 'reviewers'} "
        f"({escape(', '.join(report.reviewers))}); intervals are {report.confidence:.0%} Wilson intervals. "
        "False-pass: passed samples a reviewer judged hacks; false-fail: failed samples that should have passed.</p>"
        + agreement_table({"(all)": report.total}, "")
        + "<h3>Per domain</h3>"
        + agreement_table(report.domains, "domain")
        + "<h3>Per verifier kind</h3>"
        + agreement_table(report.verifier_kinds, "verifier kind")
    )
