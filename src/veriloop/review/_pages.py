"""The review application's pages, rendered on the server as plain HTML.

Every piece of text that came from a task, a model or a verifier goes through ``html.escape``
(``_text``), so an answer holding markup or a script shows as the characters it is. The pages
carry no inline script or style (the application's Content-Security-Policy forbids both); the
keyboard handling lives in ``static/review.js`` and reads what it needs from ``data-``
attributes.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from veriloop.evaluation import VERDICTS, AgreementReport, Judgment, agreement_html
from veriloop.review._sampler import QueueItem, outcome

KEYS = (
    ("j / k", "next / previous sample"),
    ("1", VERDICTS["right"]),
    ("2", VERDICTS["should_pass"]),
    ("3", VERDICTS["should_fail"]),
    ("4", VERDICTS["unsure"]),
    ("n", "write a note (Esc leaves the note)"),
    ("g", "show or hide the expected answer"),
    ("t", "open or close every turn of the episode"),
    ("q / s", "the queue / the agreement figures"),
)
VERDICT_KEYS = {"1": "right", "2": "should_pass", "3": "should_fail", "4": "unsure"}


def _text(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def _json_text(value: Any) -> str:
    return _text(value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False, default=str))


def page(title: str, body: str, attributes: Mapping[str, str] | None = None) -> str:
    """A whole page: the shared stylesheet and script, ``body`` inside."""
    data = "".join(f' data-{name}="{_text(value)}"' for name, value in (attributes or {}).items())
    return (
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
        f"<title>{_text(title)}</title><link rel=stylesheet href=/static/review.css></head>"
        f"<body{data}><nav><a href=/>queue</a> <a href=/stats>agreement</a>"
        " <label>reviewer <input id=reviewer autocomplete=off></label></nav>"
        f"{body}<script src=/static/review.js></script></body></html>"
    )


def _verdict_label(judgment: Judgment | None) -> str:
    if judgment is None:
        return "<span class=todo>not judged</span>"
    return f"<span class='judged {judgment.verdict}'>{_text(VERDICTS[judgment.verdict])}</span> <span class=who>{_text(judgment.reviewer)}</span>"


def queue_page(
    queue: Sequence[QueueItem], judged: Mapping[str, Judgment], config_text: str, *, reviewer: str = ""
) -> str:
    """The queue: every pick with its stratum, reasons and latest judgment."""
    rows = []
    for item in queue:
        sample = item.sample
        rows.append(
            f"<tr class=pick data-position={item.position}><td>{item.position + 1}</td>"
            f"<td><a href=/review/{item.position}>{_text(sample.run_label)} &middot; {_text(sample.sample_id)}</a></td>"
            f"<td>{_text(sample.domain)}</td><td>{_text(sample.verifier_kind)}</td><td>{_text(outcome(sample))}</td>"
            f"<td>{item.priority:g}</td><td><ul>{''.join(f'<li>{_text(r)}</li>' for r in item.reasons)}</ul></td>"
            f"<td class=state>{_verdict_label(judged.get(sample.key))}</td></tr>"
        )
    done = sum(item.sample.key in judged for item in queue)
    body = (
        f"<h1>Review queue</h1><p class=meta>{done} of {len(queue)} judged &middot; drawn with {_text(config_text)}</p>"
        "<p class=meta>j / k move, Enter opens, s shows the agreement figures</p>"
        "<table id=queue><thead><tr><th>#</th><th>sample</th><th>domain</th><th>verifier</th><th>outcome</th>"
        f"<th>priority</th><th>why it was picked</th><th>judgment</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
    return page("review queue", body, {"page": "queue", "size": str(len(queue)), "reviewer": reviewer})


def _turns(item: QueueItem) -> str:
    turns = item.sample.turns
    if not turns:
        return f"<h2>Response</h2><pre id=response>{_text(item.sample.response)}</pre>"
    parts = [f"<h2>Episode ({len(turns)} turns)</h2><div id=turns>"]
    for number, turn in enumerate(turns, start=1):
        what = "model" if turn.role == "assistant" else "observation"
        tool = f" &middot; calls {_text(turn.tool)}" if turn.tool else ""
        opened = " open" if turn.role == "assistant" else ""
        parts.append(
            f"<details class='turn {turn.role}'{opened}><summary>{number}. {what}{tool} "
            f"<span class=meta>{len(turn.text)} characters</span></summary><pre>{_text(turn.text)}</pre></details>"
        )
    parts.append(f"</div><h2>Final answer (what was verified)</h2><pre id=response>{_text(item.sample.response)}</pre>")
    return "".join(parts)


def _task(item: QueueItem) -> str:
    sample = item.sample
    if not sample.has_task:
        verifier = "<p class=meta>the task record was not found (its task file is gone; pass --tasks)</p>"
        gold = "<p class=meta>expected answer not available</p>"
    else:
        verifier = (
            f"<details><summary>verifier config</summary><pre id=verifier>{_json_text(sample.verifier)}</pre></details>"
        )
        gold = (
            "<p class=meta>the task has no expected answer</p>"
            if sample.gold is None
            else f"<details id=gold><summary>expected answer (g)</summary><pre>{_json_text(sample.gold)}</pre></details>"
        )
    return f"<h2>Task</h2><pre id=prompt>{_text(sample.prompt)}</pre>{verifier}{gold}"


def review_page(item: QueueItem, size: int, history: Sequence[Judgment], *, reviewer: str = "") -> str:
    """The review screen of one pick: task, answer or episode, verdict, and the judging controls."""
    sample = item.sample
    verdict = {"passed": "PASSED", "failed": "FAILED", "infra_error": "INFRA ERROR"}[outcome(sample)]
    buttons = "".join(
        f"<button type=button class=verdict data-verdict={value}><kbd>{key}</kbd> {_text(VERDICTS[value])}</button>"
        for key, value in VERDICT_KEYS.items()
    )
    past = "".join(
        f"<li>{_verdict_label(j)} <span class=meta>{_text(j.created_at)}</span> {_text(j.note)}</li>" for j in history
    )
    body = (
        f"<h1>Sample {item.position + 1} of {size}</h1>"
        f"<p class=meta>{_text(sample.run_label)} &middot; {_text(sample.sample_id)} &middot; {_text(sample.domain)}"
        f" &middot; {_text(sample.verifier_kind)} <span class=version>{_text(sample.verifier_version)}</span></p>"
        f"<ul class=reasons>{''.join(f'<li>{_text(r)}</li>' for r in item.reasons)}</ul>"
        f"{_task(item)}{_turns(item)}"
        f"<h2>Verdict: <span class='outcome {outcome(sample)}'>{verdict}</span> &middot; reward {_text(sample.reward)}</h2>"
        f"<div class=label>detail</div><pre id=detail>{_text(sample.detail)}</pre>"
        f"<div class=label>feedback</div><pre id=feedback>{_text(sample.feedback)}</pre>"
        f"{_images(sample.images)}"
        f"<div id=judge><div class=buttons>{buttons}</div>"
        "<textarea id=note rows=2 placeholder='note (n)'></textarea><p id=status class=meta></p></div>"
        f"<h3>Judgments so far</h3><ul id=history>{past or '<li class=meta>none</li>'}</ul>"
        f"<details class=keys><summary>keys</summary><ul>{''.join(f'<li><kbd>{k}</kbd> {_text(v)}</li>' for k, v in KEYS)}</ul></details>"
    )
    return page(
        f"review {item.position + 1}",
        body,
        {"page": "review", "position": str(item.position), "size": str(size), "reviewer": reviewer},
    )


def _images(images: Mapping[str, str]) -> str:
    """The verifier's pictures as inline PNGs; anything that is not base64 of a PNG is left out."""
    shown = []
    for name, data in sorted(images.items()):
        try:
            png = base64.b64decode(data, validate=True)
        except ValueError:
            continue
        if png.startswith(b"\x89PNG\r\n\x1a\n"):
            shown.append(
                f"<figure class=image><img src='data:image/png;base64,{escape(data)}' alt='{_text(name)}'>"
                f"<figcaption class=meta>{_text(name)}</figcaption></figure>"
            )
    return "" if not shown else "<div class=label>pictures</div><div id=images>" + "".join(shown) + "</div>"


def stats_page(report: AgreementReport, *, reviewer: str = "") -> str:
    body = "<h1>Verifier-human agreement</h1>" + agreement_html(report)
    return page("agreement", body, {"page": "stats", "reviewer": reviewer})
