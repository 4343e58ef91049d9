"""Where training metrics go: always JSONL; TensorBoard, W&B and MLflow when asked and installed."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from veriloop.core import UserError


class MetricsLogger:
    """Appends one JSON object per step to ``out/metrics.jsonl`` and mirrors scalars to other sinks."""

    def __init__(self, out: Path, loggers: tuple[str, ...], config: dict[str, Any] | None = None):
        unknown = set(loggers) - {"jsonl", "tensorboard", "wandb", "mlflow"}
        if unknown:
            raise UserError(
                f"run.loggers: unknown logger(s) {sorted(unknown)}; known: jsonl, tensorboard, wandb, mlflow"
            )
        out.mkdir(parents=True, exist_ok=True)
        self.path = out / "metrics.jsonl"
        self._tensorboard = None
        self._wandb = None
        self._mlflow = None
        if "tensorboard" in loggers:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                raise UserError(
                    "run.loggers has tensorboard but it is not installed (pip install tensorboard)"
                ) from None
            self._tensorboard = SummaryWriter(log_dir=str(out / "tensorboard"))
        if "wandb" in loggers:
            try:
                import wandb
            except ImportError:
                raise UserError("run.loggers has wandb but it is not installed (pip install wandb)") from None
            self._wandb = wandb.init(dir=str(out), config=config or {}, resume="allow")
        if "mlflow" in loggers:
            try:
                import mlflow
            except ImportError:
                raise UserError("run.loggers has mlflow but it is not installed (pip install mlflow)") from None
            self._mlflow = mlflow
            mlflow.start_run()
            if config:
                mlflow.log_params({k: str(v) for k, v in _flatten(config).items()})

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        record = {"step": step, **metrics}
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\n")
        scalars = {
            k: float(v)
            for k, v in _flatten(metrics).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        }
        if self._tensorboard is not None:
            for key, value in scalars.items():
                self._tensorboard.add_scalar(key, value, step)
            self._tensorboard.flush()
        if self._wandb is not None:
            self._wandb.log(scalars, step=step)
        if self._mlflow is not None:
            self._mlflow.log_metrics({k.replace("@", "_at_"): v for k, v in scalars.items()}, step=step)

    def truncate_after(self, step: int) -> None:
        """On resume, forget records of steps after the checkpoint (they will be redone)."""
        if not self.path.exists():
            return
        kept = [
            line
            for line in self.path.read_text(encoding="utf-8").splitlines()
            if line.strip() and json.loads(line)["step"] <= step
        ]
        self.path.write_text("".join(line + "\n" for line in kept), encoding="utf-8")

    def close(self) -> None:
        if self._tensorboard is not None:
            self._tensorboard.close()
        if self._wandb is not None:
            self._wandb.finish()
        if self._mlflow is not None:
            self._mlflow.end_run()


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{name}/"))
        else:
            flat[name] = value
    return flat


def read_metrics(out: str | Path) -> list[dict[str, Any]]:
    """The per-step records a run wrote to ``OUT/metrics.jsonl``."""
    path = Path(out) / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
