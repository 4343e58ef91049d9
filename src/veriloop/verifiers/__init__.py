"""Layer 2: verifier kinds in a registry, and ``verify`` which turns a response into a Score."""

from veriloop.verifiers import _text  # noqa: F401  (registers the kinds)
from veriloop.verifiers._registry import (
    VERIFIERS,
    GraderError,
    Verdict,
    VerifierConfig,
    VerifierKind,
    register_verifier,
    verify,
)
from veriloop.verifiers._text import ExactConfig, RegexConfig

__all__ = [
    "VERIFIERS",
    "ExactConfig",
    "GraderError",
    "RegexConfig",
    "Verdict",
    "VerifierConfig",
    "VerifierKind",
    "register_verifier",
    "verify",
]
