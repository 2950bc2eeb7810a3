"""Mirror descent actor-critic for entropy-regularised MDPs (Zorba, Siska, Szpruch, arXiv 2602.10838).

Exact policy mirror descent, the single-loop actor-critic with a linear TD(0) critic, and the multi-TD-step
variant with constant, logarithmic and linear TD-step schedules. See :mod:`neurips26.rl.pmd_td.pmd`.
"""

from .pmd import policy_mirror_descent, regularised_gap, td_schedule

__all__ = ["policy_mirror_descent", "regularised_gap", "td_schedule"]
