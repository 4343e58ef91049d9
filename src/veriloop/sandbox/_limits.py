"""The limits every sandboxed run gets, and the exact numbers the sandbox server applies for them.

``Limits`` is what a caller asks for. ``enforced_limits`` turns it, on the host and once per
run, into ``EnforcedLimits``: the numbers sent to the server inside the sandbox, which applies
them as they are (lowering an rlimit only where its own hard limit is lower still).
"""

from __future__ import annotations

import math

from pydantic import Field

from veriloop.core import Record

MIB = 1 << 20
_SERVER_TASKS = 2  # the sandbox server (the PID namespace's init) and its template count against RLIMIT_NPROC


class Limits(Record):
    """Resource limits of one run (or of an isolated process, below). Hitting one is a status of
    the ExecResult, not an exception.

    | field          | what it limits                | mechanism                               | enforced in                   |
    |----------------|-------------------------------|-----------------------------------------|-------------------------------|
    | timeout_s      | wall time of the run          | deadline, then SIGKILL of every process | sandboxed/_supervise.py       |
    |                | a server that stops answering | host deadline (+ grace, transfer time)  | _server_handle.py             |
    | cpu_s          | CPU time of each process      | RLIMIT_CPU, rounded up; SIGKILL 1 s on  | sandboxed/_run.py             |
    | memory_mb      | address space of each process | RLIMIT_AS                               | sandboxed/_run.py             |
    |                | all processes and tmpfs files | memory cgroup (root, cgroup v1 only)    | _cgroup.py                    |
    | max_processes  | processes and threads at once | RLIMIT_NPROC, plus 2: server, template  | sandboxed/_run.py             |
    | max_open_files | file descriptors per process  | RLIMIT_NOFILE                           | sandboxed/_run.py             |
    | max_file_mb    | largest file written          | RLIMIT_FSIZE, at most disk_mb           | sandboxed/_run.py             |
    | disk_mb        | each writable mount           | tmpfs --size, set as the sandbox starts | _bwrap.py                     |
    |                | a snapshot of the workspace   | a larger one is not sent back           | sandboxed/_workspace_files.py |
    | output_bytes   | stdout and stderr, each       | the run ends one byte past it           | sandboxed/_supervise.py       |

    A long-lived isolated process (``start_isolated_process``, ``_isolated_process.py``) gets
    ``memory_mb``, ``max_processes``, ``max_open_files`` and ``max_file_mb`` as RLIMIT_AS,
    RLIMIT_NPROC (no more than ``max_processes``), RLIMIT_NOFILE and RLIMIT_FSIZE, set in its box
    before its command starts (``max_processes`` also as a pids cgroup as root, ``_cgroup.py``),
    ``disk_mb`` as the size of its private ``/tmp``, and ``cpu_s``, only when set, as RLIMIT_CPU
    for its whole life; it is not a run, so ``timeout_s`` and ``output_bytes`` do not apply (its
    caller bounds each exchange and what it reads).
    Network is no limit but a capability: a Sandbox has none unless asked (``network=True``), and
    an isolated process never has any.

    ``enforced_limits`` gives the server the numbers it applies. Without the memory cgroup (it
    needs a host running as root with a cgroup v1 memory controller) a run of several processes
    may use up to ``max_processes`` times ``memory_mb``. ``disk_mb`` is fixed when a sandbox
    starts, so a per-run ``Limits`` can lower the file size limit but not grow a mount.
    """

    timeout_s: float = Field(default=10.0, gt=0, le=3600, description="wall-clock seconds of the run")
    cpu_s: float | None = Field(
        default=None, gt=0, le=3600, description="CPU seconds of each process; defaults to timeout_s"
    )
    memory_mb: int = Field(default=512, ge=16, le=1 << 20, description="address space of each process, MiB")
    max_processes: int = Field(default=32, ge=1, le=4096, description="processes and threads alive at once")
    max_open_files: int = Field(default=256, ge=16, le=1 << 20, description="open file descriptors per process")
    max_file_mb: int = Field(default=64, ge=1, le=1 << 20, description="largest file a run may write, MiB")
    disk_mb: int = Field(default=128, ge=1, le=1 << 20, description="size of each writable mount, MiB")
    output_bytes: int = Field(
        default=1 << 20, ge=1024, le=1 << 30, description="bytes kept of stdout and of stderr each"
    )

    @property
    def cpu_limit_s(self) -> float:
        """The CPU budget actually applied: ``cpu_s`` or, when unset, ``timeout_s``."""
        return self.cpu_s if self.cpu_s is not None else self.timeout_s


class EnforcedLimits(Record):
    """The numbers the sandbox server applies to one run, in the units it applies them in.

    Built by ``enforced_limits`` on the host, once per run, and sent to the server
    (``sandboxed/``) as the job's ``enforced``; the server derives no limit of its own.
    """

    wall_limit_s: float = Field(description="seconds from the fork until every process of the run is killed")
    cpu_limit_s: float = Field(description="CPU budget; a process killed at or past it ran out of CPU time")
    cpu_soft_s: int = Field(description="RLIMIT_CPU soft limit (SIGXCPU), whole seconds")
    cpu_hard_s: int = Field(description="RLIMIT_CPU hard limit (SIGKILL), whole seconds")
    address_space_bytes: int = Field(description="RLIMIT_AS of each process")
    tasks: int = Field(description="RLIMIT_NPROC: the run's processes and threads, plus the server and its template")
    open_files: int = Field(description="RLIMIT_NOFILE of each process")
    file_bytes: int = Field(description="RLIMIT_FSIZE: largest file, never above a mount's size")
    output_bytes: int = Field(description="bytes kept of stdout and of stderr each; one more ends the run")
    snapshot_bytes: int = Field(description="largest workspace archive a captured run sends back")


def enforced_limits(limits: Limits) -> EnforcedLimits:
    """What the server applies for ``limits`` (its table says where each number is used)."""
    cpu_soft_s = max(1, math.ceil(limits.cpu_limit_s))
    return EnforcedLimits(
        wall_limit_s=limits.timeout_s,
        cpu_limit_s=limits.cpu_limit_s,
        cpu_soft_s=cpu_soft_s,
        cpu_hard_s=cpu_soft_s + 1,
        address_space_bytes=limits.memory_mb * MIB,
        tasks=limits.max_processes + _SERVER_TASKS,
        open_files=limits.max_open_files,
        file_bytes=min(limits.max_file_mb, limits.disk_mb) * MIB,
        output_bytes=limits.output_bytes,
        snapshot_bytes=2 * limits.disk_mb * MIB + MIB,  # a tar of the workspace, with room for its headers
    )
