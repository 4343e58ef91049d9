"""The review page shows a verifier's pictures inline, and only real PNGs: anything else in a
score's ``images`` (not base64, or not a PNG) is left out, and names are escaped."""

from __future__ import annotations

import base64

from veriloop.review._pages import review_page
from veriloop.review._sampler import QueueItem
from veriloop.review._sources import ReviewSample

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(16)).decode()


def _page(images: dict[str, str]) -> str:
    sample = ReviewSample(
        run="/runs/a",
        run_label="a",
        sample_id="part#0",
        checkpoint=0,
        task_id="part",
        domain="cad",
        verifier_version="1",
        prompt="a plate",
        response="```python\n```",
        reward=0.5,
        passed=False,
        status="scored",
        images=images,
    )
    return review_page(QueueItem(position=0, sample=sample, stratum="s", priority=1.0, signals=(), reasons=()), 1, ())


def test_pngs_are_shown_and_anything_else_is_left_out():
    page = _page({"render.png": PNG, "<b>x</b>": PNG, "text": base64.b64encode(b"<script>").decode(), "bad": "%%"})
    assert f"<img src='data:image/png;base64,{PNG}' alt='render.png'>" in page
    assert "alt='&lt;b&gt;x&lt;/b&gt;'" in page and "<b>x</b>" not in page
    assert page.count("<img ") == 2 and "pictures" in page
    assert "<img " not in _page({}) and "pictures" not in _page({})
