"""Reinforcement learning and games: tabular MDP toolkit, Navigate-and-Stop, PMD with TD critics, FTRL surplus."""

from .._lazy import attach

_EXPORTS = {
    "NavigateAndStop": ".nas_bpi",
    "policy_mirror_descent": ".pmd_td",
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
