"""Caching: delayed-hit caching simulator and policies (UCB-DH, LA-FTPL, baselines)."""

from .._lazy import attach

_EXPORTS = {
    "simulate": ".delayed_hit_caching",
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
