"""``veriloop review`` as a real server on loopback: pages, escaping, access, judgments that last."""

from __future__ import annotations

import re
import threading
from importlib.metadata import version

import httpx
import pytest

from veriloop.evaluation import JudgmentStore

from .conftest import SCRIPT_ANSWER, free_port


def _queue_position(server, sample_id: str, run_label: str = "step-100") -> int:
    page = httpx.get(server.url + "/").text
    match = re.search(
        rf"data-position=(\d+)><td>\d+</td><td><a href=/review/\d+>{run_label} &middot; {re.escape(sample_id)}<", page
    )
    assert match, f"{sample_id} is not in the queue"
    return int(match.group(1))


def test_queue_and_review_screen_show_everything_escaped(serve, review_runs):
    server = serve(str(review_runs["before"]), str(review_runs["after"]), "--size", "200", "--reviewer", "ana")
    queue = httpx.get(server.url + "/")
    assert queue.status_code == 200 and "Review queue" in queue.text and 'data-reviewer="ana"' in queue.text
    assert "script-src 'self'" in queue.headers["content-security-policy"]
    assert "img-src data:" in queue.headers["content-security-policy"]  # the verifier's pictures, inline
    assert "why it was picked" in queue.text and "stratum domain=math, verifier_kind=exact" in queue.text
    text = httpx.get(server.url + f"/review/{_queue_position(server, 'math/0#0')}").text
    assert "<script>document.title" not in text and "<b>42</b>" not in text
    assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;&lt;b&gt;42&lt;/b&gt;" in text
    assert text.count("<script") == 1 and "<script src=/static/review.js>" in text  # the page's own, nothing else
    assert "<details id=gold><summary>expected answer (g)</summary><pre>40</pre></details>" in text
    assert "&quot;kind&quot;: &quot;exact&quot;" in text  # the verifier config, as text
    assert "Verdict: <span class='outcome passed'>PASSED</span>" in text
    tampered = httpx.get(server.url + f"/review/{_queue_position(server, 'extract/5#3')}").text
    assert "tampering patterns from the exploit catalogue: os._exit (early_exit)" in tampered
    assert httpx.get(server.url + "/review/999").status_code == 404
    assert httpx.get(server.url + "/static/review.js").headers["content-type"].startswith("text/javascript")
    assert httpx.get(server.url + "/static/..%2F_app.py").status_code == 404
    assert SCRIPT_ANSWER not in httpx.get(server.url + "/").text


@pytest.mark.e2e
def test_episodes_show_every_turn_collapsible(serve, trajectory_store):
    server = serve(str(trajectory_store.parent))
    text = httpx.get(server.url + "/review/0").text
    assert "<h2>Episode (3 turns)</h2>" in text and text.count("<details class='turn ") == 3
    assert "1. model &middot; calls python" in text and "2. observation" in text
    assert "42\n&lt;i&gt;not markup&lt;/i&gt;" in text and "<i>not markup</i>" not in text


def test_judgments_are_saved_with_who_what_and_which_verifier(serve, review_runs):
    server = serve(str(review_runs["after"]))
    position = _queue_position(server, "extract/3#0")
    answer = httpx.post(
        server.url + "/api/judgments",
        json={"position": position, "verdict": "should_fail", "note": "hedged", "reviewer": "ana"},
    )
    assert answer.status_code == 200 and answer.json()["saved"] == 1
    [saved] = JudgmentStore(review_runs["after"].parent / "evals.sqlite").all()
    assert (saved.sample_id, saved.task_id, saved.domain, saved.verifier_kind) == (
        "extract/3#0",
        "extract/3",
        "extraction",
        "regex",
    )
    assert (
        saved.verifier_passed and saved.verdict == "should_fail" and saved.note == "hedged" and saved.reviewer == "ana"
    )
    assert saved.response == "7 or 103 or 8" and saved.verifier_version.startswith(version("veriloop") + "+")
    stats = httpx.get(server.url + "/api/stats").json()
    assert stats["domains"]["extraction"]["false_pass"]["value"] == 1.0
    assert "should have failed (hack)" in httpx.get(server.url + f"/review/{position}").text
    bad = httpx.post(server.url + "/api/judgments", json={"position": position, "verdict": "maybe", "reviewer": "ana"})
    assert bad.status_code == 422
    assert (
        httpx.post(
            server.url + "/api/judgments", json={"position": 10**6, "verdict": "right", "reviewer": "a"}
        ).status_code
        == 404
    )


@pytest.mark.e2e
def test_two_reviewers_at_once_lose_nothing_and_a_killed_server_keeps_them(serve, review_runs):
    server = serve(str(review_runs["after"]), "--size", "40")
    other = serve(str(review_runs["after"]), "--size", "40")  # a second server on the same registry
    failures: list[int] = []

    def judge_all(url: str, reviewer: str) -> None:
        with httpx.Client() as client:
            for position in range(40):
                body = {"position": position, "verdict": "right", "reviewer": reviewer}
                if client.post(url + "/api/judgments", json=body).status_code != 200:
                    failures.append(position)

    threads = [
        threading.Thread(target=judge_all, args=(server.url, "ana")),
        threading.Thread(target=judge_all, args=(server.url, "ben")),
        threading.Thread(target=judge_all, args=(other.url, "cem")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert failures == []
    server.stop(kill=True)
    other.stop(kill=True)
    saved = JudgmentStore(review_runs["after"].parent / "evals.sqlite").all()
    assert len(saved) == 120 and {j.reviewer for j in saved} == {"ana", "ben", "cem"}


@pytest.mark.e2e
def test_off_loopback_needs_a_token(serve, review_runs, run_cli):
    refused = run_cli("review", str(review_runs["after"]), "--host", "0.0.0.0", "--port", str(free_port()))
    assert refused.returncode == 2 and "without --token" in refused.stderr
    server = serve(str(review_runs["after"]), host="0.0.0.0", token="s3cret")
    assert httpx.get(server.url + "/").status_code == 401
    assert httpx.get(server.url + "/", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert httpx.post(server.url + "/api/judgments", json={}).status_code == 401
    assert httpx.get(server.url + "/", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    with httpx.Client() as browser:  # the link the server prints, then the cookie it set
        first = browser.get(server.url + "/?token=s3cret")
        assert first.status_code == 200 and "HttpOnly" in first.headers["set-cookie"]
        assert browser.get(server.url + "/stats").status_code == 200


def test_bad_runs_and_options_are_one_line_errors(run_cli, tmp_path, review_runs):
    missing = run_cli("review", str(tmp_path / "nope"))
    assert missing.returncode == 2 and missing.stderr.startswith("error: ") and "no such directory" in missing.stderr
    bad_key = run_cli("review", str(review_runs["after"]), "--stratify-by", "domain,colour")
    assert bad_key.returncode == 2 and "unknown key 'colour'" in bad_key.stderr
    assert len(bad_key.stderr.strip().splitlines()) == 1


def test_without_a_token_only_loopback_clients_are_answered():
    import asyncio

    from veriloop.review import AccessGuard

    reached: list[str] = []

    async def inner(scope, receive, send):
        reached.append(scope["client"][0])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    async def status_for(client: str) -> int:
        sent: list[dict] = []

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "client": (client, 5000), "headers": [], "query_string": b""}
        await AccessGuard(inner, token=None)(scope, None, send)
        return sent[0]["status"]

    assert asyncio.run(status_for("127.0.0.1")) == 200 and asyncio.run(status_for("::1")) == 200
    assert asyncio.run(status_for("10.0.0.5")) == 403
    assert reached == ["127.0.0.1", "::1"]
