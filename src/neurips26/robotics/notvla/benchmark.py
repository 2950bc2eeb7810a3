"""Peer benchmark: our RDP (used by keyframe selection) against the ``rdp`` package on the same polylines.

The ``rdp`` package measures a point's distance to the infinite line through the segment's endpoints, ours to
the segment itself (the textbook definition), so on wandering polylines it can keep a few points fewer.
"""

from __future__ import annotations

import numpy as np

from neurips26.harness import time_repeats

from .narrative import rdp


def main(quick: bool = True) -> list[dict]:
    import rdp as rdp_peer

    rng = np.random.default_rng(0)
    rows = []
    eps = 0.02
    for n in (200, 1000) if quick else (200, 1000, 5000):
        p = np.cumsum(rng.normal(size=(n, 3)) * 0.01, axis=0)
        ours = rdp(p, eps)
        peer = np.flatnonzero(rdp_peer.rdp(p, epsilon=eps, algo="iter", return_mask=True))
        t_ours = time_repeats(lambda p=p: rdp(p, eps), repeat=3, clock="cpu")["median"]
        t_peer = time_repeats(
            lambda p=p: rdp_peer.rdp(p, epsilon=eps, algo="iter", return_mask=True), repeat=3, clock="cpu"
        )["median"]
        rows.append(
            {
                "polyline_points": n,
                "kept_ours": len(ours),
                "kept_peer": len(peer),
                "same_indices": bool(np.array_equal(ours, peer)),
                "time_ratio_peer_over_ours": t_peer / t_ours,
            }
        )
    return rows
