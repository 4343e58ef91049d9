"""Layer 5: spot-check review of verifier verdicts (``veriloop review``).

Samples of eval runs and trajectory stores (``load_sources``) are drawn into a seeded,
stratified queue with suspicious samples first (``build_queue``); a local web application
(``create_review_app``) shows each one and records people's judgments in the run registry;
``export_hacks`` turns the "should have failed" judgments into a regression file that
``veriloop audit`` replays. The figures over judgments live in ``veriloop.evaluation``
(``agreement``), so reports and the compare gate use them without this layer.
"""

from veriloop.review._app import AccessGuard, JudgmentIn, create_review_app
from veriloop.review._export import export_hacks
from veriloop.review._sampler import QueueItem, SamplerConfig, build_queue, suspicion
from veriloop.review._sources import ReviewSample, ReviewTurn, load_sources, resolve_run

__all__ = [
    "AccessGuard",
    "JudgmentIn",
    "QueueItem",
    "ReviewSample",
    "ReviewTurn",
    "SamplerConfig",
    "build_queue",
    "create_review_app",
    "export_hacks",
    "load_sources",
    "suspicion",
    "resolve_run",
]
