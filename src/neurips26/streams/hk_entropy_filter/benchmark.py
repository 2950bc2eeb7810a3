"""Peer benchmark for the H_K estimator: pydivsufsort's longest previous factor against our numpy suffix arrays.

Same token sequences (i.i.d. Zipf(1.3) ids and a low-entropy 2-state Markov chain), same process. Our
increasing-window match lengths are Lambda_i = 1 + min(LPF_i, i); ``match_lengths`` uses pydivsufsort's C
implementation (divsufsort + Kasai) when it is installed (``backend="pydivsufsort"``, the default) and our numpy
prefix-doubling code otherwise (``backend="numpy"``, the fallback and reference). Rows give both times, their
ratio and exact agreement (1.0 = identical lengths); the naive O(n^2) scan is timed at small n and extrapolated
by a fitted power law.
"""

from __future__ import annotations

import numpy as np

from neurips26.harness import loglog_slope, time_repeats
from neurips26.streams.hk_entropy_filter import match_lengths, naive_match_lengths


def whole_call_vs_suffix_array(x: np.ndarray, repeats: int) -> dict:
    """``entropy_rate(x)`` (id remap, match lengths, formula) against what a user would write instead, a
    pydivsufsort suffix array + LCP (divsufsort + kasai) of the same tokens; interleaved, minimum CPU seconds
    over repeats (CPU time: wall time on a shared machine measures the neighbours)."""
    import time

    import pydivsufsort

    from neurips26.streams.hk_entropy_filter import entropy_rate

    t_ours, t_peer = [], []
    for _ in range(repeats):
        t0 = time.process_time()
        entropy_rate(x)
        t_ours.append(time.process_time() - t0)
        t0 = time.process_time()
        pydivsufsort.kasai(x, pydivsufsort.divsufsort(x))
        t_peer.append(time.process_time() - t0)
    return {
        "source": "zipf",
        "n": int(x.size),
        "method": "entropy_rate (whole call) vs pydivsufsort divsufsort + kasai",
        "ours_cpu_s": min(t_ours),
        "peer_sa_lcp_cpu_s": min(t_peer),
        "time_ratio_ours_over_peer": min(t_ours) / min(t_peer),
    }


def main(quick: bool = True) -> list[dict]:
    try:
        import pydivsufsort  # noqa: F401
    except ImportError:
        print("pydivsufsort is not installed: pip install 'neurips26[streams]'")
        return []
    rng = np.random.default_rng(0)
    sizes = [10_000, 100_000, 1_000_000]
    naive_n = [200, 400, 800]
    rows = []
    for source in ("zipf", "markov"):
        if source == "zipf":
            full = np.minimum(rng.zipf(1.3, size=max(sizes)), 5000)
        else:
            flips = rng.random(max(sizes)) < np.where(np.arange(max(sizes)) % 2 == 0, 0.05, 0.1)
            full = np.cumsum(flips) % 2
        naive_t = [
            time_repeats(lambda n=n, full=full: naive_match_lengths(full[:n]), repeat=3)["min"]
            for n in naive_n
        ]
        fit = loglog_slope(naive_n, naive_t)
        for n in sizes:
            x = full[:n]
            reps = 3 if quick or n < 1_000_000 else 5
            t_peer = time_repeats(lambda x=x: match_lengths(x, backend="pydivsufsort"), repeat=reps)["min"]
            t_ours = time_repeats(
                lambda x=x: match_lengths(x, backend="numpy"), repeat=1 if n >= 1e6 else reps
            )
            same = np.array_equal(match_lengths(x, backend="numpy"), match_lengths(x, backend="pydivsufsort"))
            t_naive = float(np.exp(fit.intercept + fit.slope * np.log(n)))
            rows.append(
                {
                    "source": source,
                    "n": n,
                    "pydivsufsort_s": t_peer,
                    "ours_numpy_s": t_ours["min"],
                    "time_ratio_ours_over_peer": t_ours["min"] / t_peer,
                    "naive_s_extrapolated": t_naive,
                    "speedup_default_over_naive": t_naive / t_peer,
                    "agreement": 1.0 if same else 0.0,
                }
            )
    rows.append(
        whole_call_vs_suffix_array(np.minimum(rng.zipf(1.3, size=1_000_000), 5000), 5 if quick else 9)
    )
    for row in rows:
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()})
    return rows


if __name__ == "__main__":
    main()
