"""Layer 4: many domains in one RL run: task mixtures, per-domain reward normalisation, a
difficulty curriculum and the seesaw monitor, with per-domain accounting and metrics."""

from veriloop.scheduling._config import MixtureEntry, ScheduleConfig
from veriloop.scheduling._curriculum import BUCKETS, Curriculum, CurriculumState
from veriloop.scheduling._load import MixtureData, load_mixture
from veriloop.scheduling._mixture import MixtureState, TaskMixture, group_by_domain
from veriloop.scheduling._normalization import NORMALIZERS, NormalizerState, RewardNormalizer
from veriloop.scheduling._schedule import DomainSchedule, ScheduleState
from veriloop.scheduling._seesaw import SEESAW_ACTIONS, SeesawMonitor, SeesawState, SeesawVerdict, judge_seesaw
from veriloop.scheduling._weights import WEIGHTINGS, mixture_weights

__all__ = [
    "BUCKETS",
    "NORMALIZERS",
    "SEESAW_ACTIONS",
    "WEIGHTINGS",
    "Curriculum",
    "CurriculumState",
    "DomainSchedule",
    "MixtureData",
    "MixtureEntry",
    "MixtureState",
    "NormalizerState",
    "RewardNormalizer",
    "ScheduleConfig",
    "ScheduleState",
    "SeesawMonitor",
    "SeesawState",
    "SeesawVerdict",
    "TaskMixture",
    "group_by_domain",
    "judge_seesaw",
    "load_mixture",
    "mixture_weights",
]
