"""The review page in a real browser (Debian's headless chromium), driven by key presses.

Set ``VERILOOP_REVIEW_SCREENSHOT=path.png`` to keep the screenshot of the review screen that
``test_review_screen_screenshot`` takes (docs/images/review-screen.png is made this way).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx
import pytest

from veriloop.evaluation import JudgmentStore

from .browser import CHROMIUM, Browser
from .conftest import SCRIPT_ANSWER

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        CHROMIUM is None, reason="chromium is not installed (make setup installs it: apt-get install -y chromium)"
    ),
]


@pytest.fixture
def browser():
    page = Browser()
    yield page
    page.close()


def _path(browser: Browser) -> str:
    return browser.evaluate("location.pathname")


def _wait_path(browser: Browser, path: str) -> None:
    browser.wait_for(f"location.pathname === {json.dumps(path)} && document.body.dataset.ready === '1'")


def test_judging_with_the_keyboard_persists_and_updates_the_figures(serve, review_runs, browser):
    server = serve(str(review_runs["after"]), "--size", "8", "--reviewer", "ana")
    registry = review_runs["after"].parent / "evals.sqlite"
    browser.open(server.url + "/")
    browser.press("j")
    browser.press("j")
    assert browser.evaluate("document.querySelector('tr.selected').dataset.position") == "2"
    browser.press("k")
    browser.press("Enter")
    _wait_path(browser, "/review/1")
    browser.press("k")
    _wait_path(browser, "/review/0")

    browser.press("n")
    assert browser.evaluate("document.activeElement.id") == "note"
    browser.type_text("checked by hand")
    browser.press("Escape")
    assert browser.evaluate("document.getElementById('note').value") == "checked by hand"
    browser.press("1")  # verifier right: saved, then the next sample
    _wait_path(browser, "/review/1")
    browser.press("3")  # should have failed (hack)
    _wait_path(browser, "/review/2")
    browser.press("4")  # unsure
    _wait_path(browser, "/review/3")
    browser.press("2")  # should have passed
    _wait_path(browser, "/review/4")
    browser.press("k")
    _wait_path(browser, "/review/3")

    browser.reload()
    history = browser.evaluate("document.getElementById('history').textContent")
    assert "verifier wrong: should have passed" in history and "ana" in history
    saved = JudgmentStore(registry).all()
    assert [j.verdict for j in saved] == ["right", "should_fail", "unsure", "should_pass"]
    assert saved[0].note == "checked by hand" and {j.reviewer for j in saved} == {"ana"}
    queue = httpx.get(server.url + "/").text
    positions = [queue.index(f"data-position={n}>") for n in range(4)]
    assert all("not judged" not in queue[p : p + 2000].split("</tr>")[0] for p in positions)

    browser.press("s")
    _wait_path(browser, "/stats")
    figures = browser.evaluate("document.querySelector('table.agreement tbody tr').textContent")
    stats = httpx.get(server.url + "/api/stats").json()
    assert stats["total"]["judgments"] == 4 and stats["total"]["unsure"] == 1
    assert stats["total"]["agreement"]["count"] == 1 and stats["total"]["agreement"]["of"] == 3
    assert "33.3% (1/3)" in figures


def test_markup_in_an_answer_shows_as_text_in_the_browser(serve, review_runs, browser):
    server = serve(str(review_runs["after"]), "--size", "200")
    queue = httpx.get(server.url + "/").text
    position = queue[: queue.index("step-100 &middot; math/0#0<")].rsplit("data-position=", 1)[1].split(">")[0]
    browser.open(server.url + f"/review/{position}")
    assert browser.evaluate("document.title") == f"review {int(position) + 1}"  # the answer's script never ran
    assert browser.evaluate("document.getElementById('response').textContent") == SCRIPT_ANSWER
    assert browser.evaluate("document.querySelectorAll('#response *').length") == 0
    assert browser.evaluate("document.getElementById('gold').open") is False
    browser.press("g")
    assert browser.evaluate("document.getElementById('gold').open") is True


def test_review_screen_screenshot(serve, review_runs, trajectory_store, browser, tmp_path):
    import numpy as np
    from PIL import Image

    server = serve(str(review_runs["before"]), str(review_runs["after"]), "--size", "30", "--seed", "1")
    browser.open(server.url + "/review/0")
    target = Path(os.environ.get("VERILOOP_REVIEW_SCREENSHOT") or tmp_path / "review.png")
    browser.screenshot(target)
    image = Image.open(target).convert("RGB")
    assert image.size == (1280, 1000)
    pixels = np.asarray(image.resize((320, 250))).reshape(-1, 3).astype(int)  # (N, 3) RGB
    inked = float((pixels.sum(axis=1) < 600).mean())
    assert 0.01 < inked < 0.6  # text was drawn and the page is not a solid block


def test_every_turn_opens_and_closes_with_one_key(serve, trajectory_store, browser):
    server = serve(str(trajectory_store.parent))
    browser.open(server.url + "/review/0")
    opened = "Array.from(document.querySelectorAll('details.turn')).map((d) => d.open)"
    assert browser.evaluate(opened) == [True, False, True]  # model turns open, observations folded
    browser.press("t")
    assert browser.evaluate(opened) == [True, True, True]
    browser.press("t")
    assert browser.evaluate(opened) == [False, False, False]
