"""Reinforcement learning and games: tabular MDP toolkit, Navigate-and-Stop, PMD with TD critics, FTRL surplus."""

from .._lazy import attach, field_exports

# Every name in a paper package's `__all__`, and in the shared modules', read without importing them.
_EXPORTS, _PROBLEMS = field_exports(__name__, __file__, modules=(".mdp",))
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS, _PROBLEMS)
