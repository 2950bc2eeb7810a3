"""Peer benchmark for the H_K estimator: our match lengths against pydivsufsort's longest previous factor.

Same token sequence (i.i.d. Zipf(1.3) ids and a low-entropy 2-state Markov chain), same process. Our
increasing-window match lengths are Lambda_i = 1 + min(LPF_i, i); the peer's C implementation of the longest
previous factor (``pydivsufsort.longest_previous_factor``) gives LPF_i directly, so the quality column is exact
agreement (1.0 = identical) and the time ratio is ours / peer. The naive O(n^2) reference is timed at small n and
extrapolated by a fitted power law.
"""

from __future__ import annotations

import time

import numpy as np

from neurips26.streams.hk_entropy_filter import match_lengths, naive_match_lengths


def _timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def main(quick: bool = True) -> list[dict]:
    try:
        import pydivsufsort
    except ImportError:
        print("pydivsufsort is not installed; nothing to compare against")
        return []
    rng = np.random.default_rng(0)
    sizes = [10_000, 100_000] if quick else [10_000, 100_000, 1_000_000]
    naive_n = [200, 400, 800]
    rows = []
    for source in ("zipf", "markov"):
        if source == "zipf":
            full = np.minimum(rng.zipf(1.3, size=max(sizes)), 5000)
        else:
            flips = rng.random(max(sizes)) < np.where(np.arange(max(sizes)) % 2 == 0, 0.05, 0.1)
            full = np.cumsum(flips) % 2
        naive_t = [_timed(naive_match_lengths, full[:n])[1] for n in naive_n]
        coef = np.polyfit(np.log(naive_n), np.log(naive_t), 1)
        for n in sizes:
            x = full[:n]
            ids = np.unique(x, return_inverse=True)[1].astype(np.int64)
            ours, t_ours = _timed(match_lengths, ids)
            lpf, t_peer = _timed(pydivsufsort.longest_previous_factor, ids)
            peer = 1 + np.minimum(np.asarray(lpf), np.arange(n))
            t_naive = float(np.exp(np.polyval(coef, np.log(n))))
            rows.append(
                {
                    "source": source,
                    "n": n,
                    "ours_s": t_ours,
                    "pydivsufsort_s": t_peer,
                    "time_ratio_ours_over_peer": t_ours / t_peer,
                    "naive_s_extrapolated": t_naive,
                    "speedup_over_naive": t_naive / t_ours,
                    "agreement": float(np.mean(ours == peer)),
                }
            )
    for row in rows:
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()})
    return rows


if __name__ == "__main__":
    main()
