"""Navigate-and-Stop for best-policy identification in discounted MDPs.

Paper: "Non-asymptotic sample complexity of Navigate-and-Stop for best policy identification" (NeurIPS 2026,
descriptive title, full text not available); the algorithm is MDP-NaS (Al Marjani, Garivier & Proutiere,
NeurIPS 2021, arXiv 2106.02847). The method is reconstructed from our digest; see the module docstrings.

Public API: :class:`NavigateAndStop` (the algorithm and its baselines), :func:`oracle_allocation` (the
characteristic-time allocation over the navigation constraints, cvxpy + Clarabel), :func:`characteristic_time`
(the bound ``U(M, w)``), :func:`bound_terms`, and :class:`TabularEnv` (a known MDP behind the gymnasium-style
``reset``/``step`` interface that :meth:`NavigateAndStop.fit` also accepts for MDPs with unknown transitions).
"""

from .characteristic_time import (
    AllocationSolver,
    BoundTerms,
    bound_terms,
    characteristic_time,
    oracle_allocation,
)
from .navigate_and_stop import (
    DiscreteSpace,
    NavigateAndStop,
    TabularEnv,
    stopping_threshold,
    support_path_length,
)

__all__ = [
    "NavigateAndStop",
    "oracle_allocation",
    "characteristic_time",
    "TabularEnv",
    "DiscreteSpace",
    "bound_terms",
    "BoundTerms",
    "AllocationSolver",
    "stopping_threshold",
    "support_path_length",
]
