"""The ``schedule`` section of a training config: mixture, normalisation, curriculum, seesaw."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator


class MixtureEntry(BaseModel):
    """One task file of the mixture; its weight applies to each domain the file holds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(min_length=1, description="training task set (.jsonl or .parquet)")
    weight: float | None = Field(default=None, gt=0, description="relative weight of each of its domains (default 1)")
    heldout: str = Field(default="", description="held-out tasks of the same domains, for seesaw checks (optional)")


class ScheduleConfig(BaseModel):
    """Multi-domain scheduling. It is on when ``enabled`` or any other field leaves its default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(default=False, description="sample and report per domain even when no other field is set")
    mixture: tuple[MixtureEntry, ...] = Field(
        default=(), description="task files to mix, each {path, weight, heldout}; replaces data.train"
    )
    weighting: str = Field(
        default="fixed", description="fixed (by weight) or temperature (by size ** (1 / temperature))"
    )
    temperature: float = Field(default=1.0, gt=0, description="size temperature of the temperature weighting")
    weights: dict[str, float] = Field(
        default_factory=dict, description="weight per domain name; overrides the mixture entry's"
    )
    normalization: str = Field(
        default="none", description="per-domain reward normalisation before advantages: none, running or group"
    )
    curriculum: bool = Field(
        default=False, description="favour tasks whose estimated pass rate is in the learnable band"
    )
    curriculum_low: float = Field(default=0.1, ge=0, le=1, description="a task below this pass rate is too hard")
    curriculum_high: float = Field(default=0.9, ge=0, le=1, description="a task above this pass rate is too easy")
    curriculum_smoothing: float = Field(
        default=0.5, gt=0, le=1, description="weight of the newest group in a task's pass-rate estimate"
    )
    curriculum_retry_every: int = Field(
        default=8, ge=0, description="out-of-band tasks: one retry per N draws of each learnable task (0: never)"
    )
    curriculum_retire_after: int = Field(
        default=2, ge=0, description="retire a task after this many all-passed groups in a row (0: never)"
    )
    seesaw_every: int = Field(
        default=0, ge=0, description="evaluate each domain's held-out tasks every N steps (0: off)"
    )
    seesaw_samples: int = Field(default=4, ge=1, description="samples per held-out task in a seesaw check")
    seesaw_min_delta: float = Field(
        default=0.05, ge=0, le=1, description="smallest significant pass@1 change that counts as a rise or a drop"
    )
    seesaw_action: str = Field(
        default="warn", description="on a seesaw: warn, reweight (lower the rising domains' weights) or stop"
    )
    seesaw_reweight_factor: float = Field(
        default=0.5, gt=0, lt=1, description="factor on a rising domain's weight under reweight"
    )

    @field_validator("weighting", "normalization", "seesaw_action")
    @classmethod
    def _registered(cls, name: str, info: ValidationInfo) -> str:
        from veriloop.scheduling._normalization import NORMALIZERS
        from veriloop.scheduling._seesaw import SEESAW_ACTIONS
        from veriloop.scheduling._weights import WEIGHTINGS

        registry = {"weighting": WEIGHTINGS, "normalization": NORMALIZERS, "seesaw_action": SEESAW_ACTIONS}[
            info.field_name
        ]
        if name not in registry:
            raise ValueError(f"unknown {registry.what} {name!r}; known: {', '.join(registry.names())}")
        return name

    @field_validator("weights")
    @classmethod
    def _positive(cls, weights: dict[str, float]) -> dict[str, float]:
        bad = sorted(domain for domain, weight in weights.items() if not weight > 0)
        if bad:
            raise ValueError(f"weights must be positive (domains {', '.join(bad)})")
        return weights

    @model_validator(mode="after")
    def _consistent(self) -> ScheduleConfig:
        if self.curriculum_low >= self.curriculum_high:
            raise ValueError("schedule.curriculum_low must be below schedule.curriculum_high")
        if self.weighting == "temperature" and (self.weights or any(e.weight is not None for e in self.mixture)):
            raise ValueError(
                "temperature weighting sets the weights from sizes: drop the explicit weights or use weighting: fixed"
            )
        return self

    @property
    def active(self) -> bool:
        """True when ``enabled`` or any field differs from its default."""
        return self.enabled or self != ScheduleConfig()
