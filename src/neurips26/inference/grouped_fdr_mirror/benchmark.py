"""Peer benchmark for the block Gaussian mirror: group-level selection against knockpy's group knockoffs.

Same grouped-lag data as part A of the reproduction (40 AR(1) series x 4 lags, n = 600, 8 non-null groups),
q = 0.1. Rows give wall time, group FDR and power per method, and time/power ratios against knockpy (when
installed; knockpy is an optional peer). Group BH on partial F-tests is the classical in-process reference.
"""

from __future__ import annotations

import time

import numpy as np

from neurips26.inference.grouped_fdr_mirror import (
    GroupedMirrorFDR,
    benjamini_hochberg,
    group_partial_f_pvalues,
)
from neurips26.inference.grouped_fdr_mirror.block_mirror import mirror_threshold
from neurips26.inference.grouped_fdr_mirror.experiment import (
    _knockpy_statistics,
    _rates,
    expected_lag_t,
    knockpy_available,
    simulate_a,
)


def _fdp_tpp(selected: set[int], true: set[int]) -> tuple[float, float]:
    return _rates(selected, true)[:2]


def main(quick: bool = True) -> list[dict]:
    reps = 5 if quick else 20
    s = 2.0 / expected_lag_t(np.random.default_rng(12345)).mean()
    acc: dict[str, list[tuple[float, float, float]]] = {}
    for r in range(reps):
        X, y, groups, true = simulate_a(np.random.default_rng(r), s)
        labels = np.unique(groups)
        t0 = time.perf_counter()
        sel = set(GroupedMirrorFDR(0.1, random_state=r).fit(X, y, groups).selected_groups_.tolist())
        acc.setdefault("block GM (ours)", []).append((time.perf_counter() - t0, *_fdp_tpp(sel, true)))
        t0 = time.perf_counter()
        rej = benjamini_hochberg(group_partial_f_pvalues(X, y, groups), 0.1)
        acc.setdefault("group BH (partial F)", []).append(
            (time.perf_counter() - t0, *_fdp_tpp(set(labels[rej].tolist()), true))
        )
        if knockpy_available():
            t0 = time.perf_counter()
            W = _knockpy_statistics(X, y, groups, r)
            peer = set(labels[W >= mirror_threshold(W, 0.1, offset=1)].tolist())
            acc.setdefault("knockpy group knockoffs (fixed-X, knockoff+)", []).append(
                (time.perf_counter() - t0, *_fdp_tpp(peer, true))
            )
    rows = [
        {
            "method": k,
            "seconds": float(np.mean([v[0] for v in vals])),
            "FDR": float(np.mean([v[1] for v in vals])),
            "power": float(np.mean([v[2] for v in vals])),
            "reps": len(vals),
        }
        for k, vals in acc.items()
    ]
    peer_row = next((r for r in rows if r["method"].startswith("knockpy")), None)
    for row in rows:
        if peer_row is None:
            row["peer"] = "knockpy not installed"
        else:
            row["time ratio (knockpy / this)"] = peer_row["seconds"] / row["seconds"]
            row["power minus knockpy power"] = row["power"] - peer_row["power"]
    for row in rows:
        print(row)
    return rows


if __name__ == "__main__":
    main()
