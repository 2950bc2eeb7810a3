"""Peer benchmark: our fair/empirical ensemble CRPS and Gaussian CRPS against properscoring (same inputs)."""

from __future__ import annotations

import numpy as np

from neurips26.harness import time_repeats

from .metrics import crps_ensemble, crps_gaussian


def main(quick: bool = True) -> list[dict]:
    import properscoring as ps

    rng = np.random.default_rng(0)
    n = 20_000 if quick else 200_000
    rows = []
    for m in (4, 8, 32):
        x, y = rng.normal(size=(m, n)), rng.normal(size=n)
        ours = time_repeats(lambda x=x, y=y: crps_ensemble(x, y, fair=False), repeat=3, clock="cpu")
        peer = time_repeats(lambda x=x, y=y: ps.crps_ensemble(y, x.T), repeat=3, clock="cpu")
        diff = float(np.max(np.abs(crps_ensemble(x, y, fair=False) - ps.crps_ensemble(y, x.T))))
        rows.append(
            {
                "score": f"ensemble CRPS, M={m}",
                "n": n,
                "max_abs_diff": diff,
                "time_ratio_peer_over_ours": peer["median"] / ours["median"],
            }
        )
    mu, sig, y = rng.normal(size=n), rng.uniform(0.2, 2, size=n), rng.normal(size=n)
    ours = time_repeats(lambda: crps_gaussian(mu, sig, y), repeat=3, clock="cpu")
    peer = time_repeats(lambda: ps.crps_gaussian(y, mu, sig), repeat=3, clock="cpu")
    rows.append(
        {
            "score": "Gaussian CRPS",
            "n": n,
            "max_abs_diff": float(np.max(np.abs(crps_gaussian(mu, sig, y) - ps.crps_gaussian(y, mu, sig)))),
            "time_ratio_peer_over_ours": peer["median"] / ours["median"],
        }
    )
    return rows
