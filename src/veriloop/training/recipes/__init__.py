"""The ``veriloop quickstart`` recipes: whole runs, from a base model to a measured gain, as
resumable stages that each write their outputs atomically. ``_quickstart`` holds the default
``arithmetic`` recipe and what every recipe shares (``RecipeConfig``, the stages, the report);
``_seed_loop`` trains code, math and tool use (and optionally cad and financial documents) in
one run; ``_smollm2`` starts from a real pretrained model.

Recipes drive the trainers, so they sit above them: they import ``veriloop.training``'s modules,
which never import a recipe. ``veriloop.training`` imports this package after its trainers and
re-exports the names below.
"""

from veriloop.training.recipes._quickstart import QuickstartConfig, run_quickstart
from veriloop.training.recipes._seed_loop import SeedLoopConfig, domain_results, run_seed_loop
from veriloop.training.recipes._smollm2 import SmolLM2Config, run_smollm2, smollm2_results

__all__ = [
    "QuickstartConfig",
    "SeedLoopConfig",
    "SmolLM2Config",
    "domain_results",
    "run_quickstart",
    "run_seed_loop",
    "run_smollm2",
    "smollm2_results",
]
