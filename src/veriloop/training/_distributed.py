"""Data-parallel training: one trainer process per rank on ``torch.distributed``.

A run of N ranks trains exactly the step a single process would train:

- every rank draws the same prompts (the sampler is seeded by ``run.seed`` alone and advances the
  same way everywhere), rolls out its contiguous share of them (``rank_share``; episode seeds come
  from a task's index in the whole step, so the samples do not depend on N), and the shares are
  gathered, so every rank sees the whole step: drop-and-refill decisions, advantages and the
  ledger are the single process's;
- each rank trains on its share of the kept groups; the loss of every micro-batch is weighted by
  its share of the *whole* step's tokens (or sequences), counted across ranks, and the gradients
  are summed across ranks once per optimizer step, so the update is the single-process update;
- only rank 0 writes (metrics, trajectories, ledger, checkpoints, ``OUT/final``).

Gradients are reduced with ``reduce_gradients``: one flattened all-reduce of every trainable
gradient per optimizer step, which is what ``DistributedDataParallel`` does with ``no_sync`` over
the micro-batches. The module is not wrapped in DDP because the lean decoder computes log-probs
from the weights without calling the module's ``forward`` (where DDP hooks in). Under
``distributed.strategy=ddp`` every rank holds the whole model and optimizer state and its engine
generates with its own replica; under ``fsdp`` the parameters, gradients and optimizer state are
sharded by FSDP2 and the full weights gathered once per step (``_parallel_strategy.py``).

A rank that dies is noticed by the others within ``distributed.lost_after_s``: every rank bumps a
counter in the rendezvous store each second (``RankWatch``); a collective that fails, or a counter
that stops, ends the survivors with ``RankLost`` naming the silent rank.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

import torch

from veriloop.core import UserError

TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
BEAT_INTERVAL_S = 1.0
EXIT_RANK_LOST = 3  # the process exit code when a rank is lost and the process must end at once


class RankLost(RuntimeError):
    """Another rank of the run stopped (its process or node died, or it hung)."""


@dataclasses.dataclass(frozen=True)
class RankInfo:
    """Where this process sits in a data-parallel run."""

    rank: int
    world_size: int
    local_rank: int  # the rank on this machine: the GPU index on CUDA
    master_addr: str = "127.0.0.1"
    master_port: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def ranks_from_environment(environ: dict[str, str] | None = None) -> RankInfo | None:
    """The rank torchrun (or the Ray launcher) set in the environment; None for a plain process.

    All of RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT, or none of them.
    """
    environ = dict(os.environ if environ is None else environ)
    present = [name for name in TORCHRUN_VARIABLES if name in environ]
    if not present:
        return None
    missing = [name for name in TORCHRUN_VARIABLES if name not in environ]
    if missing:
        raise UserError(
            f"environment: {', '.join(present)} set but not {', '.join(missing)}; "
            "start data-parallel runs with torchrun --nproc-per-node N -m veriloop train CONFIG"
        )
    try:
        info = RankInfo(
            int(environ["RANK"]),
            int(environ["WORLD_SIZE"]),
            int(environ["LOCAL_RANK"]),
            environ["MASTER_ADDR"],
            int(environ["MASTER_PORT"]),
        )
    except ValueError:
        raise UserError("environment: RANK, WORLD_SIZE, LOCAL_RANK and MASTER_PORT must be integers") from None
    if not 0 <= info.rank < info.world_size:
        raise UserError(f"environment: RANK={info.rank} is outside WORLD_SIZE={info.world_size}")
    return info


def rank_share(count: int, rank: int, world_size: int) -> range:
    """The contiguous share of ``range(count)`` that ``rank`` owns: the shares cover it in rank
    order, sizes differ by at most one, and some are empty when ``count < world_size``."""
    base, extra = divmod(count, world_size)
    start = rank * base + min(rank, extra)
    return range(start, start + base + (rank < extra))


class SingleProcess:
    """The group of one: every collective is the identity. A plain run uses this."""

    rank, world_size, is_main = 0, 1, True

    def share(self, count: int) -> range:
        return range(count)

    def gather(self, value: Any) -> list[Any]:
        return [value]

    def total(self, values: Sequence[float]) -> list[float]:
        return [float(v) for v in values]

    def sum_tensor(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor

    def reduce_gradients(self, parameters: Iterable[torch.nn.Parameter]) -> None:
        pass

    def broadcast_object(self, value: Any) -> Any:
        return value

    def barrier(self) -> None:
        pass

    def close(self) -> None:
        pass


class ProcessGroup(SingleProcess):
    """This rank in a ``torch.distributed`` process group (gloo on CPU, NCCL on CUDA).

    Collectives raise ``RankLost`` when another rank is gone. ``close`` ends the group cleanly
    (after a barrier): call it on every rank at the end of a run.
    """

    def __init__(self, info: RankInfo, device: str, timeout_s: float, lost_after_s: float):
        import torch.distributed as dist

        self.rank, self.world_size, self.is_main = info.rank, info.world_size, info.is_main
        self.info = info
        self.device = torch.device(device)
        backend = "nccl" if self.device.type == "cuda" else "gloo"
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        os.environ.setdefault("MASTER_ADDR", info.master_addr)
        os.environ.setdefault("MASTER_PORT", str(info.master_port))
        dist.init_process_group(
            backend,
            rank=info.rank,
            world_size=info.world_size,
            timeout=datetime.timedelta(seconds=timeout_s),
        )
        self.watch = RankWatch(info, lost_after_s)

    def share(self, count: int) -> range:
        return rank_share(count, self.rank, self.world_size)

    def gather(self, value: Any) -> list[Any]:
        """Every rank's ``value`` (picklable), in rank order, on every rank."""
        import torch.distributed as dist

        out: list[Any] = [None] * self.world_size
        self._collective("gather", lambda: dist.all_gather_object(out, value))
        return out

    def total(self, values: Sequence[float]) -> list[float]:
        """Each value summed over the ranks (float64)."""
        tensor = torch.tensor([float(v) for v in values], dtype=torch.float64)
        return [float(v) for v in self.sum_tensor(tensor)]

    def sum_tensor(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` summed over the ranks (a new tensor, on the tensor's device)."""
        import torch.distributed as dist

        summed = tensor.detach().clone().to(self._wire_device())
        self._collective("all-reduce", lambda: dist.all_reduce(summed))
        return summed.to(tensor.device)

    def reduce_gradients(self, parameters: Iterable[torch.nn.Parameter]) -> None:
        """Sum the gradients of ``parameters`` over the ranks, in place (one flattened all-reduce;
        a parameter without a gradient counts as zeros and gets the sum)."""
        params = list(parameters)
        if not params:
            return
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = self.sum_tensor(torch.cat([g.reshape(-1) for g in grads]))  # (sum of numels,)
        offset = 0
        for parameter, grad in zip(params, grads):
            reduced = flat[offset : offset + grad.numel()].view_as(grad).to(grad.dtype)
            offset += grad.numel()
            parameter.grad = reduced

    def broadcast_object(self, value: Any) -> Any:
        """Rank 0's ``value`` on every rank."""
        import torch.distributed as dist

        box = [value]
        self._collective("broadcast", lambda: dist.broadcast_object_list(box, src=0))
        return box[0]

    def barrier(self) -> None:
        import torch.distributed as dist

        self._collective("barrier", lambda: dist.barrier())

    def close(self) -> None:
        """A last barrier (no rank leaves while another still needs it), then the group ends."""
        import torch.distributed as dist

        if not dist.is_initialized():
            return
        try:
            self.barrier()
            self.watch.finish()
        finally:
            self.watch.stop()
            dist.destroy_process_group()

    def _wire_device(self) -> torch.device:
        return self.device if self.device.type == "cuda" else torch.device("cpu")

    def _collective(self, what: str, call: Any) -> None:
        self.watch.raise_if_lost()
        try:
            call()
        except Exception as error:
            if self.watch.wait_for_loss():
                self.watch.stop()  # this thread reports the loss; the watch need not end the process
                raise self.watch.error(what) from error
            raise


class RankWatch:
    """Liveness of the other ranks, through counters in the run's rendezvous store.

    A daemon thread bumps ``beat/RANK`` every ``BEAT_INTERVAL_S`` and reads the others'; a rank
    whose counter has not moved for ``lost_after_s`` (and that did not say it finished) is lost.
    When the main thread is not in a collective to notice, the thread itself ends the process
    (exit code ``EXIT_RANK_LOST``) a few seconds later, so that a rank never waits out the
    collective timeout for a peer that is gone.
    """

    def __init__(self, info: RankInfo, lost_after_s: float):
        import torch.distributed as dist

        self.info, self.lost_after_s = info, lost_after_s
        generation = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")  # torchrun restarts reuse the store
        store = dist.TCPStore(
            os.environ["MASTER_ADDR"],
            int(os.environ["MASTER_PORT"]),
            is_master=False,
            timeout=datetime.timedelta(seconds=max(lost_after_s, 5.0)),
        )
        self.store = dist.PrefixStore(f"veriloop/{generation}/", store)
        self.lost: list[int] = []
        self._found = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="veriloop-rank-watch", daemon=True)
        self._thread.start()

    def raise_if_lost(self) -> None:
        if self.lost:
            self.stop()
            raise self.error("next collective")

    def wait_for_loss(self) -> bool:
        """After a failed collective: True when a lost rank is (or within ``lost_after_s`` becomes) known."""
        return self._found.wait(self.lost_after_s + 2 * BEAT_INTERVAL_S)

    def error(self, what: str) -> RankLost:
        names = ", ".join(str(rank) for rank in self.lost)
        noun = "rank" if len(self.lost) == 1 else "ranks"
        return RankLost(
            f"{noun} {names} of {self.info.world_size} lost (no heartbeat for {self.lost_after_s:.0f} s; its "
            f"process or machine stopped) during the {what} on rank {self.info.rank}; rerun the same command "
            "to resume from the last checkpoint"
        )

    def finish(self) -> None:
        """Say that this rank ends on purpose: the others must not take its silence for a loss."""
        self.store.set(f"done/{self.info.rank}", "1")

    def stop(self) -> None:
        self._stopping.set()

    def _run(self) -> None:
        others = [r for r in range(self.info.world_size) if r != self.info.rank]
        last_count = {r: -1 for r in others}
        last_change = {r: time.monotonic() for r in others}
        while not self._stopping.wait(BEAT_INTERVAL_S):
            now = time.monotonic()
            try:
                self.store.add(f"beat/{self.info.rank}", 1)
                for rank in others:
                    count = self.store.add(f"beat/{rank}", 0)
                    if count != last_count[rank]:
                        last_count[rank], last_change[rank] = count, now
                lost = [r for r in others if now - last_change[r] > self.lost_after_s and not self._done(r)]
            except Exception:  # the store is gone: the process that hosts it (rank 0's machine) died
                lost = [0] if self.info.rank != 0 else others
                if now - min(last_change.values()) <= self.lost_after_s:
                    continue
            if lost and not self._stopping.is_set():
                self.lost = lost
                self._found.set()
                self._end_if_unnoticed()
                return

    def _done(self, rank: int) -> bool:
        return self.store.check([f"done/{rank}"])

    def _end_if_unnoticed(self) -> None:
        """Give the main thread a moment to raise ``RankLost`` itself, then end the process."""
        if self._stopping.wait(3 * BEAT_INTERVAL_S):
            return
        print(f"error: {self.error('run')}", file=sys.stderr, flush=True)
        os._exit(EXIT_RANK_LOST)


def process_group_for(section: Any, device: str, info: RankInfo | None = None) -> SingleProcess:
    """The group this process trains in: from ``info`` or torchrun's environment; alone otherwise.

    ``section`` is the config's ``distributed`` section.
    """
    info = info if info is not None else ranks_from_environment()
    if info is None or info.world_size == 1:
        return SingleProcess()
    if device.startswith("cuda") and ":" not in device:
        device = f"cuda:{info.local_rank}"  # "cuda" then means this rank's GPU (``torch.cuda.set_device``)
    return ProcessGroup(info, device, section.timeout_s, section.lost_after_s)


def check_data_parallel(config: Any, world_size: int) -> None:
    """A UserError when ``config`` (a TrainConfig) asks for something data-parallel RL does not do."""
    if world_size == 1:
        return
    pipeline = config.pipeline
    if pipeline.mode != "sync" or pipeline.backend != "local":
        raise UserError(
            f"pipeline: {world_size} data-parallel ranks sample on their own engines; use pipeline.mode=sync and "
            f"pipeline.backend=local (got mode={pipeline.mode}, backend={pipeline.backend})"
        )
    if config.schedule.active:
        raise UserError(
            f"schedule: multi-domain schedules train in one process for now; run {world_size} ranks with "
            "data.train, or the schedule with one process"
        )
