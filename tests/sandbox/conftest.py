"""Fixtures for sandbox tests: a shared sandbox, markers, and host-side witnesses.

Every containment test checks from the host: a file that must not appear, a listener that
must not be reached, a process that must still live, and a scan of /proc for a marker that
no leftover process may carry.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from veriloop.sandbox import Limits, Sandbox, SandboxUnavailable

HOST_SECRET = "vl-host-secret-" + secrets.token_hex(6)
os.environ["VERILOOP_TEST_HOST_SECRET"] = HOST_SECRET  # set before any sandbox starts

LIMITS = Limits(
    timeout_s=3,
    memory_mb=256,
    max_processes=24,
    max_open_files=64,
    max_file_mb=4,
    disk_mb=8,
    output_bytes=32 * 1024,
)


def processes_with(marker: str) -> list[int]:
    """Host pids whose command line or name holds ``marker`` (this process excluded)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        for name in ("cmdline", "comm"):
            try:
                data = Path(entry.path, name).read_bytes()
            except OSError:
                continue
            if marker.encode() in data:
                found.append(int(entry.name))
                break
    return found


@pytest.fixture(scope="session")
def sandbox() -> Iterator[Sandbox]:
    try:
        box = Sandbox(limits=LIMITS, workers=2)
    except SandboxUnavailable as exc:
        pytest.skip(f"no sandbox on this machine: {exc}")
    with box:
        yield box


@pytest.fixture(scope="session")
def limits() -> Limits:
    """The limits of the shared ``sandbox``."""
    return LIMITS


@pytest.fixture(scope="session")
def quick() -> Limits:
    """Like ``limits`` with a one-second wall limit, for runs meant to time out."""
    return LIMITS.model_copy(update={"timeout_s": 1.0})


@pytest.fixture(scope="session")
def host_secret() -> str:
    """A value in the host's environment (and in host files a test writes) that no run may see."""
    return HOST_SECRET


@pytest.fixture
def marker() -> str:
    """A short unique string (fits a 15-character process name)."""
    return "vlm" + secrets.token_hex(6)


class HostListener:
    """A TCP listener on the host's 127.0.0.1 that reports whether anyone connected."""

    def __init__(self) -> None:
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(8)
        self.socket.setblocking(False)
        self.port = self.socket.getsockname()[1]

    def was_reached(self) -> bool:
        try:
            conn, _ = self.socket.accept()
        except BlockingIOError:
            return False
        conn.close()
        return True


@pytest.fixture
def listener() -> Iterator[HostListener]:
    witness = HostListener()
    yield witness
    witness.socket.close()


@pytest.fixture
def leftovers():
    """``leftovers(marker)``: host pids still carrying ``marker`` (must be empty after a run)."""
    return processes_with


@pytest.fixture
def host_sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A host process the sandbox will try to signal."""
    proc = subprocess.Popen(["sleep", "120"])
    yield proc
    proc.kill()
    proc.wait()
