"""The HTTP service, against real ``veriloop sandbox serve`` processes on loopback."""

from __future__ import annotations

import base64
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from veriloop.core import UserError
from veriloop.sandbox import Sandbox, SandboxUnavailable

VERILOOP = Path(sys.executable).with_name("veriloop")
TOKEN = "test-token-" + "x" * 16


@pytest.fixture(scope="module")
def service(sandbox_server) -> Iterator[str]:
    with sandbox_server("--max-body-mb", "1", "--max-pending", "0", token=TOKEN) as url:
        yield url


@pytest.fixture(scope="module")
def open_service(sandbox_server) -> Iterator[str]:
    with sandbox_server(token=None) as url:
        yield url


def _post(url: str, body: dict | bytes, token: str | None = TOKEN, timeout: float = 60) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if isinstance(body, bytes):
        return httpx.post(url, content=body, headers={**headers, "Content-Type": "application/json"}, timeout=timeout)
    return httpx.post(url, json=body, headers=headers, timeout=timeout)


def test_requests_without_the_right_token_are_refused(service):
    code = {"code": "print(1)", "language": "python"}
    assert _post(f"{service}/run_code", code, token=None).status_code == 401
    assert _post(f"{service}/run_code", code, token="wrong").status_code == 401
    assert httpx.get(f"{service}/v1/ping").status_code == 401
    assert _post(f"{service}/run_code", code).status_code == 200


def test_sandboxfusion_requests_and_responses(service):
    python = _post(f"{service}/run_code", {"code": "print(input() * 2)", "language": "python", "stdin": "ab"}).json()
    assert python["status"] == "Success" and python["compile_result"] is None
    assert python["run_result"]["status"] == "Finished"
    assert python["run_result"]["stdout"] == "abab\n" and python["run_result"]["return_code"] == 0
    assert isinstance(python["run_result"]["execution_time"], float)
    failing = _post(f"{service}/run_code", {"code": "exit 3", "language": "bash"}).json()
    assert failing["status"] == "Failed" and failing["run_result"]["return_code"] == 3
    slow = _post(f"{service}/run_code", {"code": "while True: pass", "language": "python", "run_timeout": 1}).json()
    assert slow["status"] == "Failed" and slow["run_result"]["status"] == "TimeLimitExceeded"
    cpp = _post(f"{service}/run_code", {"code": '#include <cstdio>\nint main(){puts("hi");}', "language": "cpp"}).json()
    assert cpp["status"] == "Success" and cpp["compile_result"]["status"] == "Finished"
    assert cpp["run_result"]["stdout"] == "hi\n"


def test_files_go_in_as_base64_and_come_back_when_fetched(service):
    body = {
        "code": "cat data.txt > copy.txt; echo done",
        "language": "bash",
        "files": {"data.txt": base64.b64encode(b"payload").decode()},
        "fetch_files": ["copy.txt"],
    }
    answer = _post(f"{service}/run_code", body).json()
    assert answer["status"] == "Success"
    assert base64.b64decode(answer["files"]["copy.txt"]) == b"payload"


def test_malformed_and_oversized_requests(service):
    assert _post(f"{service}/run_code", b"{not json").status_code in (400, 422)
    assert _post(f"{service}/run_code", {"language": "python"}).status_code == 422
    assert _post(f"{service}/run_code", {"code": "x", "language": "cobol"}).status_code == 400
    assert _post(f"{service}/run_code", {"code": "x", "files": {"a": "!!not base64!!"}}).status_code == 400
    assert _post(f"{service}/run_code", {"code": "x", "files": {"../a": ""}}).status_code == 400
    assert _post(f"{service}/run_code", {"code": "#" * (2 << 20)}).status_code == 413
    assert _post(f"{service}/v1/exec", {"kind": "exec", "argv": []}).status_code == 422


@pytest.mark.e2e
def test_concurrency_is_bounded(service):
    slow = {"code": "import time; time.sleep(4)", "language": "python"}
    statuses: list[int] = []

    def call() -> None:
        statuses.append(_post(f"{service}/run_code", slow).status_code)

    callers = [threading.Thread(target=call) for _ in range(5)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    # two workers and --max-pending 0: of five requests at once, those beyond two are turned away
    assert 503 in statuses and 200 in statuses
    assert _post(f"{service}/run_code", {"code": "print(1)"}).status_code == 200


def test_without_a_token_loopback_clients_need_no_auth(open_service):
    answer = _post(f"{open_service}/run_code", {"code": "print('open')", "language": "python"}, token=None)
    assert answer.status_code == 200 and answer.json()["run_result"]["stdout"] == "open\n"


def test_remote_backend_speaks_the_same_api(service):
    with Sandbox(backend="remote", url=service, token=TOKEN, workers=2) as remote:
        assert remote.run_python("print(6 * 7)").stdout == "42\n"
        made = remote.run(["sh", "-c", "cat a.txt > b.txt"], files={"a.txt": "A"}, stdin="", capture=True)
        assert made.snapshot is not None and made.snapshot.files() == {"a.txt": b"A", "b.txt": b"A"}
        assert remote.run(["cat", "b.txt"], snapshot=made.snapshot).stdout == "A"
        assert [r.stdout for r in remote.map_python([f"print({i})" for i in range(6)])] == [f"{i}\n" for i in range(6)]
        timed_out = remote.run_python("while True: pass", limits=remote.limits.model_copy(update={"timeout_s": 1.0}))
        assert timed_out.status == "timeout"
        with pytest.raises(UserError):
            remote.run_python("pass", files={"/abs": "x"})


def test_remote_backend_reports_a_wrong_token_or_no_service(service):
    with pytest.raises(SandboxUnavailable, match="token"):
        Sandbox(backend="remote", url=service, token="wrong")
    with socket.socket() as bound_only, pytest.raises(SandboxUnavailable, match="unreachable"):
        bound_only.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        Sandbox(backend="remote", url=f"http://127.0.0.1:{bound_only.getsockname()[1]}")


def test_a_token_in_the_url_works_for_clients_that_take_only_a_url(service):
    """SandboxFusion's client and verl's sandbox reward take a URL: its user:password@ becomes HTTP Basic."""
    code = {"code": "print(6 * 7)", "language": "python"}
    with_token = service.replace("://", f"://veriloop:{TOKEN}@")
    answer = httpx.post(f"{with_token}/run_code", json=code, timeout=60)
    assert answer.status_code == 200 and answer.json()["run_result"]["stdout"] == "42\n"
    wrong = service.replace("://", "://veriloop:not-the-token@")
    assert httpx.post(f"{wrong}/run_code", json=code, timeout=60).status_code == 401
    garbled = {"Authorization": "Basic !!!not-base64"}
    assert httpx.post(f"{service}/run_code", json=code, headers=garbled, timeout=60).status_code == 401


def test_sandboxfusions_own_client_works_unmodified(service):
    """The official client takes only an endpoint URL: the token rides in it as a Basic password."""
    sandbox_fusion = pytest.importorskip("sandbox_fusion")

    request = sandbox_fusion.RunCodeRequest(code="print(input()[::-1])", language="python", stdin="abc")
    endpoint = service.replace("://", f"://veriloop:{TOKEN}@")
    result = sandbox_fusion.run_code(request, endpoint=endpoint, max_attempts=1)
    assert result.status == sandbox_fusion.RunStatus.Success and result.run_result.stdout == "cba\n"
