"""How a mixture's domains share the draws: weighting rules in a registry.

A rule maps each domain's size (tasks) and its configured weight (None when not given) to a
target share; shares are positive and sum to 1.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from veriloop.core import Registry

Weighting = Callable[[Mapping[str, int], Mapping[str, "float | None"], float], dict[str, float]]
WEIGHTINGS: Registry[Weighting] = Registry("mixture weighting")


def _normalised(raw: Mapping[str, float]) -> dict[str, float]:
    total = sum(raw.values())
    if not raw or total <= 0:
        raise ValueError("a mixture needs at least one domain with a positive weight")
    return {domain: value / total for domain, value in sorted(raw.items())}


@WEIGHTINGS.register("fixed")
def fixed_weights(
    sizes: Mapping[str, int], weights: Mapping[str, float | None], temperature: float
) -> dict[str, float]:
    """Shares proportional to the given weights; a domain without one weighs 1."""
    return _normalised({domain: 1.0 if weights.get(domain) is None else float(weights[domain]) for domain in sizes})


@WEIGHTINGS.register("temperature")
def temperature_weights(
    sizes: Mapping[str, int], weights: Mapping[str, float | None], temperature: float
) -> dict[str, float]:
    """Shares proportional to size ** (1 / temperature): 1 follows the sizes, large values flatten."""
    return _normalised({domain: float(size) ** (1.0 / temperature) for domain, size in sizes.items()})


def mixture_weights(
    rule: str, sizes: Mapping[str, int], weights: Mapping[str, float | None] | None = None, temperature: float = 1.0
) -> dict[str, float]:
    """Target share of each domain under the named rule (``fixed`` or ``temperature``)."""
    return WEIGHTINGS.get(rule)(sizes, weights or {}, temperature)
