"""The limits every sandboxed run gets: time, memory, processes, files, disk, output."""

from __future__ import annotations

from pydantic import Field

from veriloop.core import Record


class Limits(Record):
    """Resource limits of one run. Hitting one is a status of the ExecResult, not an exception.

    ``memory_mb`` bounds the address space of each process (``RLIMIT_AS``). When the host runs
    as root with a cgroup v1 memory controller it also bounds the run's processes together
    (plus its files in tmpfs, see ``_cgroup``); elsewhere a run of several processes may use up
    to ``max_processes`` times that much. ``disk_mb`` is the size of each writable place in
    the sandbox (the workspace, ``/tmp`` and ``/dev/shm``); it is fixed when a sandbox starts,
    so a per-run ``Limits`` can lower the file size limit but not grow a mount.
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
