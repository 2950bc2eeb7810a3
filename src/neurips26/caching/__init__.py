"""Caching: delayed-hit caching simulator and policies (UCB-DH, LA-FTPL, baselines)."""

from .._lazy import attach

_EXPORTS = {
    name: ".delayed_hit_caching"
    for name in (
        "simulate",
        "SimulationResult",
        "LRU",
        "LFU",
        "Marker",
        "LRUMAD",
        "UCBDH",
        "LAFTPL",
        "BestStatic",
        "Policy",
        "make_policy",
        "shadow_losses",
        "shadow_value",
        "best_static_set",
        "best_static_latency",
        "static_regret",
        "Trace",
        "make_trace",
        "zipf_probabilities",
    )
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
