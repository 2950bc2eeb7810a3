"""Peer benchmark for the H_K estimator at up to 1e6 tokens, against pydivsufsort.

Same token sequences (i.i.d. Zipf(1.3) ids and a low-entropy 2-state Markov chain), same process. Our
increasing-window match lengths are Lambda_i = 1 + min(LPF_i, i). The default path (``backend="auto"`` with
pydivsufsort installed) takes pydivsufsort's suffix array (C) and computes the longest previous factor from it
in one compiled pass (numba; pydivsufsort's own ``longest_previous_factor`` without numba); our numpy
prefix-doubling code is the fallback and the reference. Rows per source and size give the default path, the
numpy path, their ratio and exact agreement (1.0 = identical lengths); the naive O(n^2) scan is timed at small
n and extrapolated by a fitted power law. The headline rows time the whole ``entropy_rate(x)`` call (id remap,
match lengths, formula) against what a user would write instead, a pydivsufsort suffix array + LCP array
(divsufsort + kasai) of the same tokens.
"""

from __future__ import annotations

import numpy as np

from neurips26.harness import loglog_slope, time_repeats
from neurips26.streams.hk_entropy_filter import match_lengths, naive_match_lengths


def whole_call_vs_suffix_array(x: np.ndarray, repeats: int, source: str = "zipf") -> dict:
    """``entropy_rate(x)`` (id remap, match lengths, formula) against a pydivsufsort suffix array + LCP
    (divsufsort + kasai) of the same tokens; interleaved, minimum CPU seconds over repeats (CPU time: wall
    time on a shared machine measures the neighbours)."""
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
        "source": source,
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
    rows, whole = [], []
    match_lengths(np.array([0, 1, 0]))  # load the compiled pass before timing
    for source in ("zipf", "markov"):
        if source == "zipf":
            full = np.minimum(rng.zipf(1.3, size=max(sizes)), 5000)
        else:
            flips = rng.random(max(sizes)) < np.where(np.arange(max(sizes)) % 2 == 0, 0.05, 0.1)
            full = np.cumsum(flips) % 2
        whole.append(whole_call_vs_suffix_array(full, 7 if quick else 11, source))
        naive_t = [
            time_repeats(lambda n=n, full=full: naive_match_lengths(full[:n]), repeat=3)["min"]
            for n in naive_n
        ]
        fit = loglog_slope(naive_n, naive_t)
        for n in sizes:
            x = full[:n]
            reps = 3 if quick or n < 1_000_000 else 5
            t_default = time_repeats(lambda x=x: match_lengths(x, backend="pydivsufsort"), repeat=reps)["min"]
            t_ours = time_repeats(
                lambda x=x: match_lengths(x, backend="numpy"), repeat=1 if n >= 1e6 else reps
            )
            same = np.array_equal(match_lengths(x, backend="numpy"), match_lengths(x, backend="pydivsufsort"))
            t_naive = float(np.exp(fit.intercept + fit.slope * np.log(n)))
            rows.append(
                {
                    "source": source,
                    "n": n,
                    "default_s": t_default,
                    "ours_numpy_s": t_ours["min"],
                    "time_ratio_numpy_over_default": t_ours["min"] / t_default,
                    "naive_s_extrapolated": t_naive,
                    "speedup_default_over_naive": t_naive / t_default,
                    "agreement": 1.0 if same else 0.0,
                }
            )
    rows.extend(whole)
    for row in rows:
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()})
    return rows


if __name__ == "__main__":
    main()
