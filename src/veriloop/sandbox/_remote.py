"""The ``remote`` backend: the same Sandbox API, served by ``veriloop sandbox serve`` elsewhere."""

from __future__ import annotations

from veriloop.core import ExecResult, UserError
from veriloop.sandbox._backend import BACKENDS, BackendSettings, SandboxUnavailable
from veriloop.sandbox._job import Job
from veriloop.sandbox._limits import MIB

_GRACE_S = 30.0  # queueing at the service and moving files, on top of the run's own limit


@BACKENDS.register("remote")
class RemoteBackend:
    """Sends each Job to ``POST {url}/v1/exec``; up to ``workers`` requests at once."""

    def __init__(self, settings: BackendSettings):
        import httpx

        if settings.environment is not None:
            raise UserError(
                "a remote sandbox runs on the environment its service was started with "
                "(veriloop sandbox serve --env NAME); leave environment unset here"
            )
        if settings.preload:
            raise UserError("a remote sandbox cannot preload modules; leave preload unset here")
        if not settings.url:
            raise UserError("the remote sandbox backend needs url= (e.g. http://127.0.0.1:8080)")
        headers = {"Authorization": f"Bearer {settings.token}"} if settings.token else {}
        self._url = settings.url.rstrip("/")
        self._httpx = httpx
        self._client = httpx.Client(
            base_url=self._url,
            headers=headers,
            timeout=httpx.Timeout(30.0),
            limits=httpx.Limits(max_connections=settings.workers),
        )
        self._check(self._request("GET", "/v1/ping", timeout=30.0))

    def _request(self, method: str, path: str, timeout: float, body: bytes | None = None):
        try:
            return self._client.request(
                method, path, content=body, timeout=timeout, headers={"Content-Type": "application/json"}
            )
        except self._httpx.HTTPError as exc:
            raise SandboxUnavailable(f"sandbox service at {self._url} is unreachable: {exc}") from None

    def _check(self, response) -> None:
        if response.status_code in (401, 403):
            raise SandboxUnavailable(
                f"sandbox service at {self._url} refused us ({response.status_code}): check the token"
            )
        if response.status_code >= 500:
            raise SandboxUnavailable(
                f"sandbox service at {self._url} failed ({response.status_code}): {response.text[:200]}"
            )
        if response.status_code >= 400:
            raise UserError(
                f"sandbox service at {self._url} rejected the job ({response.status_code}): {response.text[:500]}"
            )

    def execute(self, job: Job) -> ExecResult:
        moved = sum(len(c) for c in job.files.values()) + len(job.stdin)
        timeout = job.limits.timeout_s + _GRACE_S + moved / MIB
        response = self._request("POST", "/v1/exec", timeout, job.model_dump_json().encode())
        self._check(response)
        return ExecResult.model_validate_json(response.content)

    def close(self) -> None:
        self._client.close()
