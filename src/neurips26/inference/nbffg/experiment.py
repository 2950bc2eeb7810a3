"""Reproduction of NBFFG (digest ``nbffg``): synthetic trees with exact references.

Gate 1 (linear sanity): with ``f`` affine the BFFG guide is the posterior: guide-only log-weights are 0
(beyond the constant ``log p~(y)``), the guide's node means/variances equal the dense Gaussian ("Kalman")
posterior, and the trained residual stays at 0.
Gate 2 (nonlinear): depth-5 balanced binary tree, ``x_c | x_p ~ N(x_p + 0.8 sin x_p, 0.3)``, root N(0, 1),
leaves ``y = x + N(0, 0.1^2)``; proxy = least-squares linear fit of ``f`` on prior samples; truth = 512-point
grid sum-product. Bootstrap IS, BFFG guide-only IS and NBFFG (residual trained on the path-subsampled ELBO)
each use N = 2000 proposals; we score normalised ESS, mean |posterior-mean error| at internal nodes and
|log Z_hat - log Z_grid|.
Gate 3: the Horvitz-Thompson path estimate averaged over all 32 leaf paths equals the full-tree loss for a
fixed sample. Gate 4: time per training step, path vs full tree, at depth 7 (128 leaves).
Gate 5 (full mode only): 2-D double-well diffusion edges (Euler, 50 steps per edge) with a shift-only
(controlled-SDE) residual: ESS/N(NBFFG) >= 1.5 x ESS/N(guide-only).
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import torch

from neurips26.harness import Run

from .backward_filter import dense_gaussian_tree_posterior
from .grid import grid_posterior_1d
from .nbffg import NBFFG, bootstrap_importance_sampling, importance_summary, linearised_proxy, simulate_tree
from .tree import as_tree, balanced_binary_tree, subdivide_edges

Q_VAR, R_VAR, ROOT_MEAN, ROOT_VAR = 0.3, 0.1**2, 0.0, 1.0
N_PROPOSALS = 2000
BATCH = 128
LR = 5e-3


def f_torch(x: torch.Tensor) -> torch.Tensor:
    return x + 0.8 * torch.sin(x)


def f_numpy(x: np.ndarray) -> np.ndarray:
    return x + 0.8 * np.sin(x)


def f_linear(x: torch.Tensor) -> torch.Tensor:
    return 0.9 * x + 0.1


def _linear_gate(run: Run, seed: int) -> None:
    parent = balanced_binary_tree(5)
    _, y = simulate_tree(parent, f_linear, Q_VAR, ROOT_MEAN, ROOT_VAR, R_VAR, 1, seed)
    y = y[0]
    steps = run.pick(quick=200, full=1000)
    with run.timer("linear sanity"):
        model = NBFFG(
            f_linear,
            Q_VAR,
            ROOT_MEAN,
            ROOT_VAR,
            R_VAR,
            n_steps=steps,
            batch_size=BATCH,
            learning_rate=LR,
            random_state=seed,
        ).fit(parent, y)
        _, log_w = model.sample(N_PROPOSALS, residual=False, random_state=seed + 1)
        edge_log_w = log_w - model.log_evidence_proxy_
        means, covs = model.guided_moments()
        k_means, k_covs, k_log_ev = dense_gaussian_tree_posterior(
            parent, y, R_VAR, [[0.9]], [0.1], Q_VAR, ROOT_MEAN, ROOT_VAR
        )
        resid = model.residual_magnitude(512, random_state=seed + 2)
    run.metric("linear: |log p~(y) - log p(y) (Kalman)|", abs(model.log_evidence_proxy_ - k_log_ev))
    run.check(
        "linear: max |guide-only log-weight| (beyond log p~(y))",
        float(np.max(np.abs(edge_log_w))),
        "<=",
        1e-10,
    )
    err = max(float(np.max(np.abs(means - k_means))), float(np.max(np.abs(covs - k_covs))))
    run.check("linear: max |guide mean/var - Kalman|", err, "<=", 1e-8)
    run.check(f"linear: trained residual RMS ||u|| ({steps} steps)", resid, "<", 1e-3)


def _nonlinear_seed(run: Run, seed: int, steps: int) -> dict:
    parent = balanced_binary_tree(5)
    tree = as_tree(parent)
    _, y = simulate_tree(parent, f_torch, Q_VAR, ROOT_MEAN, ROOT_VAR, R_VAR, 1, seed)
    y = y[0]
    inner = ~tree.is_leaf
    with run.timer("grid posterior"):
        truth = grid_posterior_1d(parent, y, f_numpy, Q_VAR, ROOT_MEAN, ROOT_VAR, R_VAR, grid=512)

    def score(name: str, x: np.ndarray, log_w: np.ndarray) -> dict:
        s = importance_summary(x, log_w)
        return {
            "method": name,
            "seed": seed,
            "ESS/N": s["ess"],
            "mean |node-mean error|": float(np.mean(np.abs(s["means"][inner, 0] - truth.means[inner]))),
            "|log Z error|": abs(s["log_evidence"] - truth.log_evidence),
        }

    with run.timer("bootstrap IS"):
        rows = [
            score(
                "bootstrap IS",
                *bootstrap_importance_sampling(
                    parent, y, f_torch, Q_VAR, ROOT_MEAN, ROOT_VAR, R_VAR, N_PROPOSALS, seed + 1
                ),
            )
        ]
    with run.timer("NBFFG training"):
        model = NBFFG(
            f_torch,
            Q_VAR,
            ROOT_MEAN,
            ROOT_VAR,
            R_VAR,
            n_steps=steps,
            batch_size=BATCH,
            learning_rate=LR,
            estimator="path",
            random_state=seed,
        ).fit(parent, y)
    with run.timer("guided sampling"):
        rows.append(
            score("BFFG guide-only IS", *model.sample(N_PROPOSALS, residual=False, random_state=seed + 2))
        )
        rows.append(
            score(f"NBFFG ({steps} steps, path ELBO)", *model.sample(N_PROPOSALS, random_state=seed + 3))
        )
    # the digest's pitfall: guide-only ESS depends on the proxy; report it across proxy choices, and train
    # NBFFG on the strongest one too (reported, not gated: the gate uses the digest's least-squares proxy)
    local = linearised_proxy(parent, y, f_torch, Q_VAR, ROOT_MEAN, ROOT_VAR, R_VAR)
    proxies = {
        "lstsq fit (gated)": None,
        "identity (Phi=1, beta=0)": ([[1.0]], [0.0]),
        "tangent at 0 (Phi=1.8)": ([[1.8]], [0.0]),
        "iterated local linearisation (per edge)": local,
    }
    proxy_rows = []
    for name, px in proxies.items():
        m = (
            model
            if px is None
            else NBFFG(
                f_torch, Q_VAR, ROOT_MEAN, ROOT_VAR, R_VAR, proxy=px, n_steps=0, random_state=seed
            ).fit(parent, y)
        )
        sc = score("guide-only", *m.sample(N_PROPOSALS, residual=False, random_state=seed + 2))
        proxy_rows.append(
            {
                "proxy": name,
                "seed": seed,
                "guide-only ESS/N": sc["ESS/N"],
                "guide-only node-mean error": sc["mean |node-mean error|"],
                "guide-only |log Z error|": sc["|log Z error|"],
            }
        )
    with run.timer("NBFFG training (local proxy)"):
        m = NBFFG(
            f_torch,
            Q_VAR,
            ROOT_MEAN,
            ROOT_VAR,
            R_VAR,
            proxy=local,
            n_steps=steps,
            batch_size=BATCH,
            learning_rate=LR,
            random_state=seed,
        ).fit(parent, y)
    sc = score("NBFFG", *m.sample(N_PROPOSALS, random_state=seed + 3))
    proxy_rows.append(
        {
            "proxy": "iterated local linearisation + NBFFG residual",
            "seed": seed,
            "guide-only ESS/N": float("nan"),
            "NBFFG ESS/N": sc["ESS/N"],
            "NBFFG node-mean error": sc["mean |node-mean error|"],
            "NBFFG |log Z error|": sc["|log Z error|"],
        }
    )
    return {"rows": rows, "proxy_rows": proxy_rows, "model": model, "truth": truth, "y": y, "tree": tree}


def _nonlinear_gates(run: Run, seeds: list[int]) -> dict:
    steps = run.pick(quick=1000, full=2000)
    results = [_nonlinear_seed(run, s, steps) for s in run.progress(seeds, "nonlinear tree, per seed")]
    rows = [r for res in results for r in res["rows"]]
    run.table(
        rows,
        name="nonlinear",
        caption="Depth-5 binary tree, f(x) = x + 0.8 sin x, N = 2000 proposals; "
        "errors against the 512-point grid posterior.",
    )
    run.table(
        [r for res in results for r in res["proxy_rows"]],
        name="proxies",
        caption="Guide-only importance sampling under different linear proxies (same data).",
    )
    ess_ratio_guide, ess_ratio_boot, err_ratio, logz_err = [], [], [], []
    for res in results:
        boot, guide, ours = res["rows"]
        ess_ratio_guide.append(ours["ESS/N"] / guide["ESS/N"])
        ess_ratio_boot.append(ours["ESS/N"] / boot["ESS/N"])
        err_ratio.append(ours["mean |node-mean error|"] / guide["mean |node-mean error|"])
        logz_err.append(ours["|log Z error|"])
    for res in results:
        local_guide, local_ours = res["proxy_rows"][-2], res["proxy_rows"][-1]
        run.metric(
            f"seed {res['rows'][0]['seed']}: ESS/N ratio NBFFG / guide-only under the local-linearisation proxy",
            local_ours["NBFFG ESS/N"] / local_guide["guide-only ESS/N"],
        )
    run.note(
        "Guide-only ESS depends strongly on the proxy (table 'proxies'): with the digest's global least-squares "
        "proxy it collapses to about 1/N, with a per-edge iterated local linearisation it is far higher; the "
        "residual improves ESS under both proxies (metrics), but only the digest's proxy is gated."
    )
    worst = " (worst of seeds)" if len(seeds) > 1 else ""
    run.check(f"ESS/N(NBFFG) / ESS/N(guide-only){worst}", min(ess_ratio_guide), ">=", 1.5)
    run.check(f"ESS/N(NBFFG) / ESS/N(bootstrap){worst}", min(ess_ratio_boot), ">=", 10.0)
    run.check(f"node-mean error(NBFFG) / error(guide-only){worst}", max(err_ratio), "<=", 1.0)
    run.check(f"|log Z_hat(NBFFG) - log Z_grid|{worst}", max(logz_err), "<=", 0.1)
    return results[0]


def _subsampling_gate(run: Run, model: NBFFG, seed: int) -> None:
    tree = model.tree_
    noise = np.random.default_rng(seed).standard_normal((16, tree.n_nodes, model.d_))
    full = model.loss_estimate(noise)
    paths = np.mean([model.loss_estimate(noise, np.full(16, leaf)) for leaf in range(tree.n_leaves)], axis=0)
    run.check(
        f"subsampled loss averaged over all {tree.n_leaves} leaf paths vs full-tree loss",
        float(np.max(np.abs(paths - full))),
        "<=",
        1e-10,
    )


def _cost_gate(run: Run, seed: int) -> None:
    parent = balanced_binary_tree(7)
    _, y = simulate_tree(parent, f_torch, Q_VAR, ROOT_MEAN, ROOT_VAR, R_VAR, 1, seed)
    n_timed = run.pick(quick=12, full=40)
    rows = []
    for batch in (64, BATCH):
        sec = {}
        for est in ("path", "full"):
            m = NBFFG(
                f_torch,
                Q_VAR,
                ROOT_MEAN,
                ROOT_VAR,
                R_VAR,
                n_steps=0,
                batch_size=batch,
                learning_rate=LR,
                estimator=est,
                random_state=seed,
            ).fit(parent, y[0])
            m.train(3)  # warm-up
            m.train(n_timed)
            sec[est] = m.step_seconds_
        rows.append(
            {
                "batch": batch,
                "path step (ms)": 1e3 * sec["path"],
                "full-tree step (ms)": 1e3 * sec["full"],
                "path / full": sec["path"] / sec["full"],
            }
        )
    run.table(
        rows,
        name="cost",
        caption="Time per training step at depth 7 (255 nodes, 128 leaves, path of 7 "
        "edges); the experiment trains with batch 128.",
    )
    run.check(
        "depth 7: path-step time / full-tree-step time (training batch)", rows[-1]["path / full"], "<=", 0.2
    )


def double_well_drift(x: torch.Tensor) -> torch.Tensor:
    """-grad V for V(x) = (x_1^2 - 1)^2 + x_2^2 / 2."""
    return torch.stack([-4.0 * x[:, 0] * (x[:, 0] ** 2 - 1.0), -x[:, 1]], dim=1)


def _diffusion_gate(run: Run, seed: int) -> None:
    n_euler, sigma = 50, 0.7
    dt = 1.0 / n_euler
    base = balanced_binary_tree(2)
    parent, node_map = subdivide_edges(base, n_euler)

    def f_euler(x: torch.Tensor) -> torch.Tensor:
        return x + double_well_drift(x) * dt

    q = sigma**2 * dt * np.eye(2)
    _, y = simulate_tree(parent, f_euler, q, np.zeros(2), np.eye(2), 0.01 * np.eye(2), 1, seed)
    with run.timer("diffusion variant"):
        model = NBFFG(
            f_euler,
            q,
            np.zeros(2),
            np.eye(2),
            0.01 * np.eye(2),
            flow="shift",
            n_steps=600,
            batch_size=BATCH,
            learning_rate=LR,
            random_state=seed,
        ).fit(parent, y[0])
        guide = importance_summary(*model.sample(N_PROPOSALS, residual=False, random_state=seed + 1))
        ours = importance_summary(*model.sample(N_PROPOSALS, random_state=seed + 2))
    run.table(
        [
            {"method": "BFFG guide-only IS", "ESS/N": guide["ess"], "log Z_hat": guide["log_evidence"]},
            {
                "method": "NBFFG (controlled-SDE residual)",
                "ESS/N": ours["ess"],
                "log Z_hat": ours["log_evidence"],
            },
        ],
        name="diffusion",
        caption="2-D double-well diffusion edges, Euler 50 steps per edge, depth-2 tree.",
    )
    run.check("diffusion variant: ESS/N(NBFFG) / ESS/N(guide-only)", ours["ess"] / guide["ess"], ">=", 1.5)


def _figure(run: Run, res: dict) -> None:
    rows, model, truth, tree = res["rows"], res["model"], res["truth"], res["tree"]
    inner = ~tree.is_leaf
    fig, ax = plt.subplots(1, 3, figsize=(14, 4))
    ax[0].bar(["bootstrap", "guide-only", "NBFFG"], [r["ESS/N"] for r in rows], color=["grey", "C0", "C3"])
    ax[0].axhline(1.0 / N_PROPOSALS, color="k", ls=":", lw=0.8, label="1/N (one sample)")
    ax[0].legend()
    ax[0].set_yscale("log")
    ax[0].set_ylabel("normalised ESS (N = 2000)")
    ax[0].set_title("effective sample size")
    for residual, color, label in ((False, "C0", "guide-only"), (True, "C3", "NBFFG")):
        s = importance_summary(*model.sample(N_PROPOSALS, residual=residual, random_state=7))
        ax[1].scatter(truth.means[inner], s["means"][inner, 0], s=14, color=color, label=label)
    lim = [truth.means[inner].min() - 0.2, truth.means[inner].max() + 0.2]
    ax[1].plot(lim, lim, "k--", lw=0.8)
    ax[1].set_xlabel("grid posterior mean")
    ax[1].set_ylabel("importance-sampling estimate")
    ax[1].set_title("internal-node posterior means")
    ax[1].legend()
    h = model.loss_history_
    ax[2].plot(np.convolve(h, np.ones(25) / 25, mode="valid"), color="C3")
    ax[2].axhline(-truth.log_evidence, color="k", ls="--", lw=0.8, label="-log p(y) (grid)")
    ax[2].set_xlabel("Adam step")
    ax[2].set_ylabel("negative ELBO (path estimate, smoothed)")
    ax[2].legend()
    run.figure(
        fig, "nbffg_ess_means_loss", caption="ESS, posterior means vs the grid truth, and training curve."
    )


def run(run: Run) -> None:
    seeds = run.seeds(4)
    torch.manual_seed(seeds[0])
    _linear_gate(run, seeds[0])
    first = _nonlinear_gates(run, seeds[: run.pick(quick=1, full=3)])
    _subsampling_gate(run, first["model"], seeds[1])
    with run.timer("cost scaling"):
        _cost_gate(run, seeds[2])
    if run.full:
        _diffusion_gate(run, seeds[3])
    _figure(run, first)
    run.note(
        "Only the abstract of the paper was available: the residual (conditional affine flow on the guide's "
        "noise), the sticking-the-landing reverse-KL gradient and the Horvitz-Thompson path estimator are "
        "our reconstruction (digest [R])."
    )
    if run.quick:
        run.note(
            "Quick mode: 1 seed, 1000 Adam steps, 200 steps for the linear sanity run, no diffusion variant; "
            "full mode: 3 seeds, 2000 steps, plus the 2-D double-well diffusion variant (gate 5)."
        )
