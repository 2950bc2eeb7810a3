"""Peer benchmark against POT.

1. T-step (Frank-Wolfe, C fixed) against ``ot.gromov.semirelaxed_gromov_wasserstein``: same graph, block
   matrix, starting coupling and number of iterations; time per iteration and final loss (n = 1000, K = 31).
2. The whole estimator (block-coordinate descent from a k-means start) against
   ``ot.gromov.semirelaxed_gromov_barycenters(G0="kmeans", warmstartT=True)`` with one input graph: wall time,
   final srGW loss to A and ARI to the planted blocks (3-block SBM) on the same graph. The two k-means starts are
   drawn differently, so the losses differ by the local optimum each reaches.
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
        C = SRGWGraphonEstimator(K, random_state=0, max_iter=1, n_init=1).fit(A).relaxed_block_matrix_
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
    rows += _whole_estimator(quick)
    for r in rows:
        print(r)
    return rows


def _whole_estimator(quick: bool) -> list[dict]:
    import ot
    from sklearn.metrics import adjusted_rand_score

    from neurips26.harness import time_repeats
    from neurips26.transport.srgw_graphon import SBMS, SRGWGraphonEstimator, sample_sbm, srgw_loss

    rows = []
    for n in [800] if quick else [800, 1600]:
        A, _, z = sample_sbm(*SBMS["3-block"], n, random_state=0)
        p = np.full(n, 1.0 / n)
        ours: dict = {}
        pot: dict = {}

        def fit_ours(A=A, ours=ours):
            ours["est"] = SRGWGraphonEstimator(3, random_state=0, n_init=1).fit(A)

        def fit_pot(A=A, p=p, pot=pot):
            pot["C"], pot["log"] = ot.gromov.semirelaxed_gromov_barycenters(
                3, [A], [p], G0="kmeans", warmstartT=True, log=True, random_state=0, tol=1e-6
            )

        t_ours = time_repeats(fit_ours, repeat=1 if quick else 3, warmup=0)["min"]
        t_pot = time_repeats(fit_pot, repeat=1 if quick else 3, warmup=0)["min"]
        T_pot = pot["log"]["T"][0]
        est = ours["est"]
        rows.append(
            {
                "n": n,
                "K": 3,
                "whole fit": "ours BCD vs POT semirelaxed_gromov_barycenters",
                "ours s": t_ours,
                "POT s": t_pot,
                "time ratio POT/ours": t_pot / t_ours,
                "loss ours": est.loss_,
                "loss POT": srgw_loss(A, T_pot, pot["C"]),
                "ARI ours": adjusted_rand_score(z, est.labels_),
                "ARI POT": adjusted_rand_score(z, T_pot.argmax(axis=1)),
            }
        )
    return rows


if __name__ == "__main__":
    main()
