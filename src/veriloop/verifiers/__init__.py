"""Layer 2: verifier kinds in a registry, and ``verify`` which turns a response into a Score."""

from veriloop.verifiers.answers import _text  # noqa: F401  (registers the kinds)
from veriloop.verifiers.code import _python_tests, _stdio  # noqa: F401  (registers the code kinds)
from veriloop.verifiers import _combine  # noqa: F401
from veriloop.verifiers.answers import _json_schema, _math, _numeric, _reasoning_gym, _turn_constraints  # noqa: F401
from veriloop.verifiers.answers import _document_fields  # noqa: F401  (registers document_fields)
from veriloop.verifiers.answers import _bfcl  # noqa: F401  (registers bfcl)
from veriloop.verifiers.cad import _cad_geometry  # noqa: F401  (registers cad_geometry)
from veriloop.verifiers.workspace import _reward_script, _workspace_checks, _workspace_tests  # noqa: F401  (registers the workspace kinds)
from veriloop.verifiers.judge import _judge  # noqa: F401  (registers judge)
from veriloop.verifiers.openenv import _openenv  # noqa: F401  (registers openenv)
from veriloop.verifiers.prime_verifiers import _taskset  # noqa: F401  (registers verifiers_taskset)
from veriloop.verifiers._combine import AllOfConfig, CheckSpec, WeightedConfig
from veriloop.verifiers.answers._bfcl import BfclConfig
from veriloop.verifiers.answers._document_fields import DocumentFieldsConfig, Identity
from veriloop.verifiers.cad._cad_geometry import CadGeometryConfig
from veriloop.verifiers.answers._json_schema import JsonSchemaConfig
from veriloop.verifiers.answers._math import MathConfig
from veriloop.verifiers.answers._numeric import NumericConfig, Tolerance, extract_named_values
from veriloop.verifiers._penalties import PENALTIES, PenaltyConfig, PenaltyKind, register_penalty
from veriloop.verifiers.answers._reasoning_gym import ReasoningGymConfig
from veriloop.verifiers.answers._check_pool import CheckTimeout, close_shared_pools, set_check_workers
from veriloop.verifiers.audit._audit import AuditReport, AuditRow, audit_tasks
from veriloop.verifiers.audit._regressions import RegressionCase, read_regressions, regression_file_for
from veriloop.verifiers.audit._signatures import tampering_signs
from veriloop.verifiers._catalogue import KindField, markdown_table, verifier_fields
from veriloop.verifiers._batch import BATCH_CHECKS, register_batch_check, verify_many
from veriloop.verifiers.audit._exploits import CATEGORIES as EXPLOIT_CATEGORIES
from veriloop.verifiers.audit._exploits import EXPLOIT_ADAPTERS, Exploit, exploits_for, gold_response, gold_workspace
from veriloop.verifiers.code._code_sandbox import code_workers, new_code_sandbox, set_code_workers, start_code_sandbox
from veriloop.verifiers.code._code_sandbox import use_code_sandbox
from veriloop.verifiers.code._extract import candidate_program, extract_code
from veriloop.verifiers.code._python_tests import PythonTestsConfig
from veriloop.verifiers.code._stdio import StdioCase, StdioConfig
from veriloop.verifiers._registry import (
    VERIFIERS,
    GraderError,
    Verdict,
    VerifierConfig,
    VerifierKind,
    register_verifier,
    run_problems,
    task_problem,
    verify,
)
from veriloop.verifiers.answers._text import ExactConfig, RegexConfig
from veriloop.verifiers.answers._turn_constraints import TurnConstraintsConfig, broken_rule
from veriloop.verifiers.judge._backends import (
    JUDGE_BACKENDS,
    JudgeBackend,
    JudgeRequest,
    JudgeUnavailable,
)
from veriloop.verifiers.judge._config import JudgeConfig, JudgeCriterion, judge_specs, ranks_groups
from veriloop.verifiers.judge._prompt import JudgePrompt, judge_prompt
from veriloop.verifiers.judge._verdict import MalformedVerdict, read_verdict
from veriloop.verifiers.openenv._openenv import (
    EpisodeRecord,
    OpenEnvConfig,
    environment_session,
    episode_verdict,
    observation_text,
    take_step,
)
from veriloop.verifiers.prime_verifiers._taskset import (
    TasksetStep,
    VerifiersTasksetConfig,
    export_taskset,
    step_taskset,
)
from veriloop.verifiers.openenv._protocol import OpenEnvError, OpenEnvSession, StepResult, environment_description

__all__ = [
    "EpisodeRecord",
    "OpenEnvConfig",
    "OpenEnvError",
    "OpenEnvSession",
    "StepResult",
    "environment_description",
    "environment_session",
    "episode_verdict",
    "observation_text",
    "take_step",
    "TasksetStep",
    "VerifiersTasksetConfig",
    "export_taskset",
    "step_taskset",
    "KindField",
    "AllOfConfig",
    "AuditReport",
    "AuditRow",
    "BfclConfig",
    "EXPLOIT_ADAPTERS",
    "EXPLOIT_CATEGORIES",
    "Exploit",
    "CheckSpec",
    "CadGeometryConfig",
    "CheckTimeout",
    "DocumentFieldsConfig",
    "Identity",
    "JUDGE_BACKENDS",
    "JudgeBackend",
    "JudgeConfig",
    "JudgeCriterion",
    "JudgePrompt",
    "JudgeRequest",
    "JudgeUnavailable",
    "MalformedVerdict",
    "JsonSchemaConfig",
    "MathConfig",
    "NumericConfig",
    "PENALTIES",
    "PenaltyConfig",
    "PenaltyKind",
    "ReasoningGymConfig",
    "Tolerance",
    "TurnConstraintsConfig",
    "WeightedConfig",
    "close_shared_pools",
    "extract_named_values",
    "register_penalty",
    "set_check_workers",
    "VERIFIERS",
    "BATCH_CHECKS",
    "ExactConfig",
    "GraderError",
    "PythonTestsConfig",
    "RegexConfig",
    "StdioCase",
    "StdioConfig",
    "Verdict",
    "VerifierConfig",
    "VerifierKind",
    "candidate_program",
    "code_workers",
    "extract_code",
    "audit_tasks",
    "exploits_for",
    "gold_response",
    "judge_prompt",
    "judge_specs",
    "ranks_groups",
    "read_verdict",
    "gold_workspace",
    "markdown_table",
    "new_code_sandbox",
    "register_batch_check",
    "register_verifier",
    "set_code_workers",
    "start_code_sandbox",
    "use_code_sandbox",
    "verifier_fields",
    "verify",
    "verify_many",
    "RegressionCase",
    "broken_rule",
    "read_regressions",
    "regression_file_for",
    "tampering_signs",
    "run_problems",
    "task_problem",
]
