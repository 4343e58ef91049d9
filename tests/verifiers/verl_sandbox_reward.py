"""verl's own SandboxFusion code reward, run with the Python of the verl environment.

``python verl_sandbox_reward.py URL CASES.json`` scores each case (``completion`` and ``tests``,
verl's ``{"inputs", "outputs"}``) with verl's ``default_compute_score`` for a ``codecontests`` row,
which posts to ``URL`` (a ``veriloop sandbox serve`` endpoint, its token in the URL), and prints the
scores as one JSON list.
"""

from __future__ import annotations

import json
import sys

from verl.utils.reward_score import default_compute_score


def main(url: str, cases_path: str) -> None:
    scores = []
    for case in json.loads(open(cases_path).read()):
        tests = json.dumps(case["tests"])
        # memory_limit_mb as verl's trainer passes it (reward.sandbox_fusion.memory_limit_mb, default 1024)
        score = default_compute_score(
            "codecontests", case["completion"], tests, sandbox_fusion_url=url, memory_limit_mb=1024
        )
        scores.append(float(score))
    print(json.dumps(scores))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
