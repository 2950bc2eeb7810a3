"""Caching: delayed-hit caching simulator and policies (UCB-DH, LA-FTPL, baselines), trace readers."""

from .._lazy import attach

_EXPORTS = {
    name: ".delayed_hit_caching"
    for name in (
        "simulate",
        "SimulationResult",
        "Policy",
        "CacheView",
        "HIT",
        "DELAYED_HIT",
        "MISS",
        "LRU",
        "FIFO",
        "LFU",
        "Marker",
        "LRUMAD",
        "UCBDH",
        "LAFTPL",
        "BestStatic",
        "make_policy",
        "shadow_losses",
        "shadow_value",
        "best_static_set",
        "best_static_latency",
        "static_regret",
        "Trace",
        "encode_ids",
        "make_trace",
        "zipf_probabilities",
        "read_csv_trace",
        "read_oracle_general",
        "write_oracle_general",
    )
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
