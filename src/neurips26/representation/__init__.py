"""Representation learning: topological memorization diagnostics, non-colliding identity provisioning."""

from .._lazy import attach, field_exports

# Every name in a paper package's `__all__`, read without importing the package.
_EXPORTS, _PROBLEMS = field_exports(__name__, __file__)
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS, _PROBLEMS)
