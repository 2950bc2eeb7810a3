"""MulTaBench's admission rule: keep a candidate table only if it needs BOTH the joint signal and task awareness.

For a panel of learners, each scored under the conditions tabular-only, unstructured-only, Joint Frozen and Joint
TAR (higher is better: ROC-AUC, R^2, a normalised score), a table is admitted when

- **joint signal**: for at least ``rho`` learners, Joint Frozen beats each unimodal condition by ``>= delta``;
- **task awareness**: for at least ``rho`` learners, Joint TAR beats Joint Frozen by ``>= delta``.

The paper's constants are ``delta = 0.001`` and ``rho = 3`` of 5 learners. [R] The paper's text was read only in
part: "Joint" in the joint-signal test is taken to be Joint Frozen (the representation without task awareness), and
each criterion counts its own learners (a learner need not meet both).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

CONDITIONS = ("tab_only", "text_only", "joint_frozen", "joint_tar")


@dataclass(frozen=True)
class CurationDecision:
    """Outcome of :func:`curation_rule`; ``per_learner`` holds each learner's two margins."""

    admitted: bool
    joint_signal: bool
    task_awareness: bool
    n_joint_signal: int
    n_task_aware: int
    per_learner: dict[str, dict[str, float]] = field(default_factory=dict)


def curation_rule(
    scores: Mapping[str, Mapping[str, float]], *, delta: float = 0.001, rho: int = 3
) -> CurationDecision:
    """Decide admission from ``scores[learner][condition]`` (conditions: ``CONDITIONS``; higher is better).

    Example: ``curation_rule({"lgbm": {"tab_only": .70, "text_only": .60, "joint_frozen": .74,
    "joint_tar": .80}, ...}, rho=3)``.
    """
    if not isinstance(scores, Mapping) or not scores:
        raise ValueError("scores must be a non-empty mapping learner -> {condition: score}")
    if isinstance(rho, bool) or not isinstance(rho, int) or not 1 <= rho <= len(scores):
        raise ValueError(
            f"rho must be an integer in [1, {len(scores)}] (the number of learners), got {rho!r}"
        )
    if (
        isinstance(delta, bool)
        or not isinstance(delta, (int, float))
        or not (math.isfinite(delta) and delta >= 0)
    ):
        raise ValueError(f"delta must be a finite number >= 0, got {delta!r}")
    per_learner: dict[str, dict[str, float]] = {}
    for learner, row in scores.items():
        if not isinstance(row, Mapping):
            raise ValueError(f"scores[{learner!r}] must be a mapping condition -> score")
        missing = [c for c in CONDITIONS if c not in row]
        if missing:
            raise ValueError(f"scores[{learner!r}] lacks the conditions {missing} (needs {list(CONDITIONS)})")
        vals = {c: float(row[c]) for c in CONDITIONS}
        if not all(math.isfinite(v) for v in vals.values()):
            raise ValueError(f"scores[{learner!r}] must be finite, got {vals}")
        per_learner[str(learner)] = {
            "joint_signal_margin": vals["joint_frozen"] - max(vals["tab_only"], vals["text_only"]),
            "task_awareness_margin": vals["joint_tar"] - vals["joint_frozen"],
        }
    # a tiny tolerance so that a margin equal to delta in exact arithmetic is not lost to rounding
    tol = 1e-12
    n_js = sum(m["joint_signal_margin"] >= delta - tol for m in per_learner.values())
    n_ta = sum(m["task_awareness_margin"] >= delta - tol for m in per_learner.values())
    js, ta = n_js >= rho, n_ta >= rho
    return CurationDecision(js and ta, js, ta, n_js, n_ta, per_learner)
