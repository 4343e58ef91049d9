"""Layer 4: eval runs, pass@k, the run registry, compare and gate, the HTML report.

Importing this package is light: the rollout layer (torch) loads when ``run_eval`` runs and
matplotlib when a report is drawn.
"""

from veriloop.evaluation._agreement import (
    AgreementBlock,
    AgreementReport,
    Rate,
    agreement,
    agreement_block,
    agreement_html,
    false_pass_failures,
)
from veriloop.evaluation._judgments import VERDICTS, Judgment, JudgmentStore, Verdict, verifier_version
from veriloop.evaluation._benchmarks import BENCHMARKS, Benchmark, benchmark_tasks
from veriloop.evaluation._compare import MIN_TASKS, Comparison, DomainDelta, Flip, compare, paired_bootstrap
from veriloop.evaluation._failures import export_failures, failed_tasks
from veriloop.evaluation._overlap import DEFAULT_NGRAM, OverlapReport, overlap
from veriloop.evaluation._passk import (
    effective_trials,
    mean_pass_at_k,
    pass_at_k,
    pass_rate_interval,
    wilson_interval,
)
from veriloop.evaluation._report import Utilisation, pipeline_utilisation, render_report, write_report
from veriloop.evaluation._run import (
    EvalSettings,
    eval_episode_config,
    load_task_inputs,
    open_engine,
    resolve_model_dir,
    run_eval,
)
from veriloop.evaluation._scenes import Scene, find_scene, replay_scene
from veriloop.evaluation._rescore import (
    RescoreChange,
    RescoreFlip,
    RescoreOutcome,
    RescoreReport,
    RescoreTally,
    RescoreTaskChange,
    rescore_destination,
    rescore_run,
    write_rescore,
)
from veriloop.evaluation._run_registry import REGISTRY_FILE, RegisteredRun, RunRegistry, default_registry_path
from veriloop.evaluation._samples import (
    SAMPLES_FILE,
    EvalRun,
    EvalSample,
    load_run,
    load_run_tasks,
    read_samples,
    task_counts,
)
from veriloop.evaluation._summary import score_block, summarize, task_set_hash

__all__ = [
    "BENCHMARKS",
    "Benchmark",
    "benchmark_tasks",
    "AgreementBlock",
    "AgreementReport",
    "Judgment",
    "JudgmentStore",
    "Rate",
    "VERDICTS",
    "Verdict",
    "agreement",
    "agreement_block",
    "agreement_html",
    "false_pass_failures",
    "verifier_version",
    "DEFAULT_NGRAM",
    "MIN_TASKS",
    "REGISTRY_FILE",
    "Comparison",
    "DomainDelta",
    "EvalRun",
    "EvalSample",
    "EvalSettings",
    "Flip",
    "OverlapReport",
    "RegisteredRun",
    "RunRegistry",
    "Scene",
    "Utilisation",
    "compare",
    "default_registry_path",
    "effective_trials",
    "export_failures",
    "failed_tasks",
    "load_run",
    "load_task_inputs",
    "mean_pass_at_k",
    "open_engine",
    "overlap",
    "paired_bootstrap",
    "pass_at_k",
    "pass_rate_interval",
    "pipeline_utilisation",
    "read_samples",
    "render_report",
    "resolve_model_dir",
    "eval_episode_config",
    "find_scene",
    "replay_scene",
    "run_eval",
    "score_block",
    "summarize",
    "task_counts",
    "task_set_hash",
    "wilson_interval",
    "write_report",
    "SAMPLES_FILE",
    "load_run_tasks",
    "RescoreChange",
    "RescoreFlip",
    "RescoreOutcome",
    "RescoreReport",
    "RescoreTally",
    "RescoreTaskChange",
    "rescore_destination",
    "rescore_run",
    "write_rescore",
]
