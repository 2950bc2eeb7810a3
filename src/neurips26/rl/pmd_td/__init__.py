"""Mirror descent actor-critic for entropy-regularised MDPs (Zorba, Siska, Szpruch, arXiv 2602.10838).

Exact policy mirror descent, the single-loop actor-critic with a linear TD(0) critic, and the multi-TD-step
variant with constant, logarithmic and linear TD-step schedules (:mod:`neurips26.rl.pmd_td.pmd`); the baselines
soft policy iteration, entropy-regularised natural policy gradient and softmax policy gradient
(:mod:`neurips26.rl.pmd_td.baselines`).
"""

from .baselines import natural_policy_gradient, soft_policy_iteration, softmax_policy_gradient
from .pmd import policy_mirror_descent, regularised_gap, td_schedule

__all__ = [
    "policy_mirror_descent",
    "regularised_gap",
    "td_schedule",
    "soft_policy_iteration",
    "natural_policy_gradient",
    "softmax_policy_gradient",
]
