"""Peer benchmark: srGW T-step (Frank-Wolfe, C fixed) against POT's ``semirelaxed_gromov_wasserstein``.

Same graph, same block matrix, same starting coupling, same number of iterations; reports the time per
iteration and the final loss of each, and their ratios (n = 1000, K = 31, as in the issue).
"""

from __future__ import annotations

import time

import numpy as np


def main(quick: bool = True) -> list[dict]:
    import ot

    from neurips26.transport.srgw_graphon import (
        GRAPHONS,
        SRGWGraphonEstimator,
        initial_coupling,
        sample_graphon,
        srgw_conditional_gradient,
    )

    rows = []
    sizes = [(1000, 31)] if quick else [(1000, 31), (2000, 44)]
    for n, K in sizes:
        A, _, _ = sample_graphon(GRAPHONS["u*v"], n, random_state=0)
        C = SRGWGraphonEstimator(K, random_state=0, max_iter=1).fit(A).relaxed_block_matrix_
        T0 = initial_coupling(A, C.shape[0], "random", random_state=0)
        p = np.full(n, 1.0 / n)
        iters = 30
        t0 = time.perf_counter()
        _, log = srgw_conditional_gradient(A, C, T0, max_iter=iters, tol=0.0, log=True)
        t_ours = (time.perf_counter() - t0) / max(log["n_iter"], 1)
        t0 = time.perf_counter()
        _, log_pot = ot.gromov.semirelaxed_gromov_wasserstein(
            A, C, p, symmetric=True, G0=T0, log=True, max_iter=iters, tol_rel=0.0, tol_abs=0.0
        )
        t_pot = (time.perf_counter() - t0) / max(len(log_pot["loss"]) - 1, 1)
        loss_ours, loss_pot = log["loss"][-1], float(log_pot["srgw_dist"])
        rows.append(
            {
                "n": n,
                "K": C.shape[0],
                "ours s/iter": t_ours,
                "POT s/iter": t_pot,
                "time ratio POT/ours": t_pot / t_ours,
                "loss ours": loss_ours,
                "loss POT": loss_pot,
                "loss ratio ours/POT": loss_ours / loss_pot,
            }
        )
    for r in rows:
        print(r)
    return rows


if __name__ == "__main__":
    main()
