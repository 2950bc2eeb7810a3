"""Regret-optimal delayed-hit caching: UCB-DH and LA-FTPL (NeurIPS 2026 abstract; real title not found).

A cache of ``K`` slots serves one request per slot; a miss on item ``i`` starts a fetch that completes
``Z_i`` slots later, and requests arriving meanwhile are *delayed hits* that wait only the remaining fetch
time (Atre et al., SIGCOMM 2020). The objective is total latency. This package holds a delayed-hit simulator
with completion-time admission (:func:`simulate`; compiled with numba when it is installed), the paper's
learning policies UCB-DH (optimistic delayed-hit shadow values, optionally restarted) and LA-FTPL (follow the
perturbed leader on action-independent shadow losses, optionally restarted), the baselines LRU, FIFO, LFU,
randomized Marker and LRU-MAD, a :class:`Policy` interface for your own policies, the best static set in
hindsight (exact: top-K by realised uncached latency), the shadow-value formula, readers for CSV and
libCacheSim oracleGeneral traces (any integer or hashable ids, byte-sized objects), and the synthetic traces
S1-S5 of the reproduction check.

Reconstructed [R] (the paper's full text is not available): the exact UCB index and confidence bonus, the
LA-FTPL perturbation scale ``eta_t = c (Z + sqrt(C_B Z)) sqrt(t / (K log N))``, the slotted shadow-value
formula, the LRU-MAD ranking details, the restart schedule, and the convention that in-flight items occupy
no cache slot (completion-time admission).
"""

from .policies import (
    DELAYED_HIT,
    FIFO,
    HIT,
    LAFTPL,
    LFU,
    LRU,
    LRUMAD,
    MISS,
    UCBDH,
    BestStatic,
    CacheView,
    Marker,
    Policy,
    make_policy,
)
from .simulator import (
    SimulationResult,
    best_static_latency,
    best_static_set,
    shadow_losses,
    shadow_value,
    simulate,
    static_regret,
)
from .trace_io import read_csv_trace, read_oracle_general, write_oracle_general
from .traces import Trace, encode_ids, make_trace, zipf_probabilities

__all__ = [
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
]
