"""Reproduction of NBFFG (digest ``nbffg``): synthetic trees with exact references.

Gate 1 (linear sanity): with ``f`` affine the BFFG guide is the posterior: guide-only log-weights are 0
(beyond the constant ``log p~(y)``), the guide's node means/variances equal the dense Gaussian ("Kalman")
posterior, and the trained residual stays at 0 (sticking-the-landing gradients vanish there). These hold by
construction and are sanity checks.
Gate 2 (nonlinear): depth-5 balanced binary tree, ``x_c | x_p ~ N(x_p + 0.8 sin x_p, 0.3)``, root N(0, 1),
leaves ``y = x + N(0, 0.1^2)``; proxy = least-squares linear fit of ``f`` on prior samples; truth = 512-point
grid sum-product. Bootstrap IS, BFFG guide-only IS, mean-field Gaussian VI (+ IS), BFFG-MCMC (pCN on the
guide's innovations) and NBFFG (residual trained on the path-subsampled ELBO) each use N = 2000 proposals (MCMC:
20 chains x 100 iterations). Scores: normalised ESS, mean |posterior-mean error| at internal nodes, |log Z_hat -
log Z_grid|, each the median over 9 independent batches of N = 2000 (one batch's log Z carries Monte Carlo
noise about 1/sqrt(ESS), as large as the bar), one value per data seed (quick 2, full 3); the outcome is decided
on the interval over seeds.
Gate 3 (sanity): the Horvitz-Thompson path estimate averaged over all 32 leaf paths equals the full-tree loss.
Gate 4: time per training step, path vs full tree, at depth 7 (128 leaves), the minimum over interleaved
repeats of each (robust to CPU contention).
Gate 5 (full mode only): 2-D double-well diffusion edges (Euler, 50 steps per edge on the time-changed grid of
guided proposals) with a shift-only (controlled-SDE) residual: ESS/N(NBFFG) >= 1.5 x ESS/N(guide-only).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch

from neurips26.harness import Run

from .backward_filter import dense_gaussian_tree_posterior
from .baselines import MeanFieldGaussianVI, bffg_mcmc
from .grid import grid_posterior_1d
from .nbffg import NBFFG, bootstrap_importance_sampling, importance_summary, linearised_proxy, simulate_tree
from .tree import as_tree, balanced_binary_tree, diffusion_grid

Q_VAR, R_VAR, ROOT_MEAN, ROOT_VAR = 0.3, 0.1**2, 0.0, 1.0
N_PROPOSALS = 2000
# every importance-sampling score is the median over independent batches of N = 2000 proposals: one batch's
# log Z estimate carries Monte Carlo noise of about 1 / sqrt(ESS) (0.06-0.1 here), as large as the 0.1 bar
IS_BATCHES = 9
MCMC_CHAINS, MCMC_ITER = 20, 100  # the same 2000 guided tree simulations as the importance samplers
BATCH = 128
LR = 5e-3


def f_torch(x: torch.Tensor) -> torch.Tensor:
    return x + 0.8 * torch.sin(x)


def f_numpy(x: np.ndarray) -> np.ndarray:
    return x + 0.8 * np.sin(x)


def f_linear(x: torch.Tensor) -> torch.Tensor:
    return 0.9 * x + 0.1


def _nbffg(f, proxy="lstsq", steps=0, seed=0, batch_size=BATCH, **kw) -> NBFFG:
    return NBFFG(
        f,
        Q_VAR,
        ROOT_MEAN,
        ROOT_VAR,
        R_VAR,
        proxy=proxy,
        n_steps=steps,
        batch_size=batch_size,
        learning_rate=LR,
        random_state=seed,
        **kw,
    )


def _linear_gate(run: Run, seed: int, steps: int) -> None:
    parent = balanced_binary_tree(5)
    _, y = simulate_tree(parent, f_linear, Q_VAR, ROOT_MEAN, ROOT_VAR, R_VAR, 1, seed)
    y = y[0]
    with run.timer("linear sanity"):
        model = _nbffg(f_linear, steps=steps, seed=seed).fit(parent, y)
        _, log_w = model.sample(N_PROPOSALS, residual=False, random_state=seed + 1)
        edge_log_w = log_w - model.log_evidence_proxy_
        means, covs = model.guided_moments()
        k_means, k_covs, k_log_ev = dense_gaussian_tree_posterior(
            parent, y, R_VAR, [[0.9]], [0.1], Q_VAR, ROOT_MEAN, ROOT_VAR
        )
        resid = model.residual_magnitude(512, random_state=seed + 2)
    run.metric("linear: |log p~(y) - log p(y) (Kalman)|", abs(model.log_evidence_proxy_ - k_log_ev))
    run.check("linear_guide_log_weights", float(np.max(np.abs(edge_log_w))))
    err = max(float(np.max(np.abs(means - k_means))), float(np.max(np.abs(covs - k_covs))))
    run.check("linear_guide_moments_vs_kalman", err)
    run.check("linear_residual_stays_zero", resid)


def _nonlinear_seed(run: Run, seed: int, steps: int) -> dict:
    parent = balanced_binary_tree(5)
    tree = as_tree(parent)
    _, y = simulate_tree(parent, f_torch, Q_VAR, ROOT_MEAN, ROOT_VAR, R_VAR, 1, seed)
    y = y[0]
    inner = ~tree.is_leaf
    with run.timer("grid posterior"):
        truth = grid_posterior_1d(parent, y, f_numpy, Q_VAR, ROOT_MEAN, ROOT_VAR, R_VAR, grid=512)

    def err(means: np.ndarray) -> float:
        return float(np.mean(np.abs(means[inner, 0] - truth.means[inner])))

    def score(name: str, draw) -> dict:
        """Median over IS_BATCHES independent batches of N proposals (``draw(k)`` gives batch k)."""
        per = []
        for k in range(IS_BATCHES):
            s = importance_summary(*draw(k))
            per.append((s["ess"], err(s["means"]), abs(s["log_evidence"] - truth.log_evidence)))
        per = np.array(per)
        med = np.median(per, axis=0)
        return {
            "method": name,
            "seed": seed,
            "ESS/N": med[0],
            "mean |node-mean error|": med[1],
            "|log Z error|": med[2],
            "|log Z error| range over batches": [float(per[:, 2].min()), float(per[:, 2].max())],
        }

    with run.timer("bootstrap IS"):
        boot = score(
            "bootstrap IS",
            lambda k: bootstrap_importance_sampling(
                parent, y, f_torch, Q_VAR, ROOT_MEAN, ROOT_VAR, R_VAR, N_PROPOSALS, seed + 1 + 1000 * k
            ),
        )
    with run.timer("NBFFG training"):
        model = _nbffg(f_torch, steps=steps, seed=seed).fit(parent, y)
    with run.timer("guided sampling"):
        guide = score(
            "BFFG guide-only IS",
            lambda k: model.sample(N_PROPOSALS, residual=False, random_state=seed + 2 + 1000 * k),
        )
        ours = score(
            f"NBFFG ({steps} steps, path ELBO)",
            lambda k: model.sample(N_PROPOSALS, random_state=seed + 3 + 1000 * k),
        )
    with run.timer("mean-field VI"):
        vi = MeanFieldGaussianVI(
            f_torch, Q_VAR, ROOT_MEAN, ROOT_VAR, R_VAR, n_steps=steps, batch_size=BATCH, random_state=seed
        ).fit(parent, y)
        vi_row = score(
            "mean-field Gaussian VI + IS", lambda k: vi.sample(N_PROPOSALS, random_state=seed + 4 + 1000 * k)
        )
    with run.timer("BFFG-MCMC"):
        mc = bffg_mcmc(model, MCMC_CHAINS, MCMC_ITER, random_state=seed + 5)
    mcmc_row = {
        "method": f"BFFG-MCMC (pCN, {MCMC_CHAINS} chains x {MCMC_ITER})",
        "seed": seed,
        "ESS/N": float("nan"),
        "mean |node-mean error|": err(mc["means"]),
        "|log Z error|": float("nan"),
        "acceptance": mc["acceptance"],
    }
    rows = [boot, guide, vi_row, mcmc_row, ours]
    if run.full:  # step 7 of the digest: BFFG-MCMC with the trained NBFFG proposal as the map
        mc_n = bffg_mcmc(model, MCMC_CHAINS, MCMC_ITER, residual=True, random_state=seed + 6)
        rows.append(
            {
                "method": "BFFG-MCMC with the NBFFG proposal",
                "seed": seed,
                "ESS/N": float("nan"),
                "mean |node-mean error|": err(mc_n["means"]),
                "|log Z error|": float("nan"),
                "acceptance": mc_n["acceptance"],
            }
        )
    # the digest's pitfall: guide-only ESS depends on the proxy; report it across proxy choices
    local = linearised_proxy(parent, y, f_torch, Q_VAR, ROOT_MEAN, ROOT_VAR, R_VAR)
    proxies = {
        "lstsq fit (gated)": None,
        "identity (Phi=1, beta=0)": ([[1.0]], [0.0]),
        "tangent at 0 (Phi=1.8)": ([[1.8]], [0.0]),
        "iterated local linearisation (per edge)": local,
    }
    proxy_rows = []
    for name, px in proxies.items():
        m = model if px is None else _nbffg(f_torch, proxy=px, seed=seed).fit(parent, y)
        sc = score(
            "guide-only",
            lambda k, m=m: m.sample(N_PROPOSALS, residual=False, random_state=seed + 2 + 1000 * k),
        )
        proxy_rows.append(
            {
                "proxy": name,
                "seed": seed,
                "guide-only ESS/N": sc["ESS/N"],
                "guide-only node-mean error": sc["mean |node-mean error|"],
                "guide-only |log Z error|": sc["|log Z error|"],
            }
        )
    if run.full:  # NBFFG on the strongest proxy too (reported, not gated)
        with run.timer("NBFFG training (local proxy)"):
            m = _nbffg(f_torch, proxy=local, steps=steps, seed=seed).fit(parent, y)
        sc = score("NBFFG", lambda k: m.sample(N_PROPOSALS, random_state=seed + 3 + 1000 * k))
        proxy_rows.append(
            {
                "proxy": "iterated local linearisation + NBFFG residual",
                "seed": seed,
                "NBFFG ESS/N": sc["ESS/N"],
                "NBFFG node-mean error": sc["mean |node-mean error|"],
                "NBFFG |log Z error|": sc["|log Z error|"],
            }
        )
    return {"rows": rows, "proxy_rows": proxy_rows, "model": model, "truth": truth, "tree": tree}


def _nonlinear_gates(run: Run, seeds: list[int], steps: int) -> dict:
    results = [_nonlinear_seed(run, s, steps) for s in run.progress(seeds, "nonlinear tree, per seed")]
    run.table(
        [r for res in results for r in res["rows"]],
        name="nonlinear",
        caption="Depth-5 binary tree, f(x) = x + 0.8 sin x, N = 2000 proposals; "
        "errors against the 512-point grid posterior.",
    )
    run.table(
        [r for res in results for r in res["proxy_rows"]],
        name="proxies",
        caption="Guide-only importance sampling under different linear proxies (same data).",
    )
    per = {k: [] for k in ("boot", "guide", "vi", "mcmc", "ours")}
    for res in results:
        for key, row in zip(per, res["rows"][:5], strict=True):
            per[key].append(row)
    col = lambda key, name: np.array([r[name] for r in per[key]])  # noqa: E731
    ess, err, logz = "ESS/N", "mean |node-mean error|", "|log Z error|"
    run.metric("ess_floor", 1.0 / N_PROPOSALS)
    for key in per:
        run.metric(f"ess_{key}", col(key, ess).tolist())
        run.metric(f"node_mean_error_{key}", col(key, err).tolist())
        run.metric(f"logz_error_{key}", col(key, logz).tolist())
    run.metric("ess_guide_max", float(col("guide", ess).max()))
    run.metric("ess_boot_max", float(col("boot", ess).max()))
    run.metric("ess_vi_max", float(col("vi", ess).max()))
    for key in ("boot", "guide", "vi"):
        run.metric(f"logz_error_{key}_min", float(col(key, logz).min()))
    run.metric(
        "guide_ess_best_proxy_max",
        float(
            max(
                r["guide-only ESS/N"] for res in results for r in res["proxy_rows"] if "guide-only ESS/N" in r
            )
        ),
    )
    # a ratio against a baseline is decided only when the baseline is off the 1/N floor (claims.toml)
    run.check("bootstrap_off_the_floor", col("boot", ess))
    run.check("guide_off_the_floor", col("guide", ess))
    run.check("mean_field_vi_off_the_floor", col("vi", ess))
    run.metric("mcmc_acceptance", [r["acceptance"] for r in per["mcmc"]])
    run.check("ess_ratio_vs_guide", col("ours", ess) / col("guide", ess))
    run.check("ess_ratio_vs_bootstrap", col("ours", ess) / col("boot", ess))
    run.check("ess_ratio_vs_mean_field_vi", col("ours", ess) / col("vi", ess))
    run.check("node_mean_error_ratio_vs_guide", col("ours", err) / col("guide", err))
    run.check("node_mean_error_ratio_vs_mean_field_vi", col("ours", err) / col("vi", err))
    run.check("node_mean_error_ratio_vs_bffg_mcmc", col("ours", err) / col("mcmc", err))
    run.check("logz_error", col("ours", logz))
    run.check("logz_error_ratio_vs_guide", col("ours", logz) / col("guide", logz))
    run.check("logz_error_ratio_vs_bootstrap", col("ours", logz) / col("boot", logz))
    run.check("logz_error_ratio_vs_mean_field_vi", col("ours", logz) / col("vi", logz))
    return results[0]


def _subsampling_gate(run: Run, model: NBFFG, seed: int) -> None:
    tree = model.tree_
    noise = np.random.default_rng(seed).standard_normal((16, tree.n_nodes, model.d_))
    full = model.loss_estimate(noise)
    paths = np.mean([model.loss_estimate(noise, np.full(16, leaf)) for leaf in range(tree.n_leaves)], axis=0)
    run.check("subsampled_loss_unbiased", float(np.max(np.abs(paths - full))))


def _cost_gate(run: Run, seed: int) -> None:
    parent = balanced_binary_tree(7)
    _, y = simulate_tree(parent, f_torch, Q_VAR, ROOT_MEAN, ROOT_VAR, R_VAR, 1, seed)
    repeats = run.param("cost_repeats", quick=5, full=9)
    steps_per_repeat = run.param("cost_steps_per_repeat", quick=4, full=10)
    rows = []
    for batch in (64, BATCH):
        models = {
            est: _nbffg(f_torch, seed=seed, estimator=est, batch_size=batch).fit(parent, y[0])
            for est in ("path", "full")
        }
        times = {est: [] for est in models}
        for m in models.values():
            m.train(3)  # warm-up
        for _ in range(repeats):  # interleaved, so a burst of load hits both estimators alike
            for est, m in models.items():
                m.train(steps_per_repeat)
                times[est].append(m.step_seconds_)
        best = {est: float(np.min(v)) for est, v in times.items()}
        rows.append(
            {
                "batch": batch,
                "path step (ms, min)": 1e3 * best["path"],
                "full-tree step (ms, min)": 1e3 * best["full"],
                "path / full (min / min)": best["path"] / best["full"],
                "path / full (median / median)": float(np.median(times["path"]) / np.median(times["full"])),
            }
        )
    run.table(
        rows,
        name="cost",
        caption="Time per training step at depth 7 (255 nodes, 128 leaves, path of 7 edges), minimum and median "
        "over interleaved repeats; the experiment trains with batch 128.",
    )
    run.metric("step_ratio_median_training_batch", rows[-1]["path / full (median / median)"])
    run.check("path_step_cost_ratio", rows[-1]["path / full (min / min)"])


def double_well_drift(x: torch.Tensor) -> torch.Tensor:
    """-grad V for V(x) = (x_1^2 - 1)^2 + x_2^2 / 2."""
    return torch.stack([-4.0 * x[:, 0] * (x[:, 0] ** 2 - 1.0), -x[:, 1]], dim=1)


def _diffusion_gate(run: Run, seed: int) -> None:
    n_euler, sigma = 50, 0.7
    base = balanced_binary_tree(2)
    out, ratios = [], {}
    # data from a fine uniform Euler grid (the "true" diffusion), shared by both guided grids
    fine_parent, fine_map, fine_dt = diffusion_grid(base, 4 * n_euler, time_change=False)
    dt_f = torch.as_tensor(fine_dt)

    def f_fine(x, node):
        return x + double_well_drift(x) * dt_f[node][:, None]

    q_fine = sigma**2 * fine_dt[:, None, None] * np.eye(2)
    q_fine[0] = np.eye(2)
    xs, _ = simulate_tree(
        fine_parent, f_fine, q_fine, np.zeros(2), np.eye(2), 0.01 * np.eye(2), 1, seed, node_dependent=True
    )
    leaves_base = as_tree(base).leaves
    y_leaves = xs[0, fine_map[leaves_base]] + 0.1 * np.random.default_rng(seed).standard_normal(
        (len(leaves_base), 2)
    )
    for name, time_change in (("time-changed grid (gated)", True), ("uniform grid", False)):
        parent, node_map, dt = diffusion_grid(base, n_euler, time_change=time_change)
        dt_t = torch.as_tensor(dt)

        def f_euler(x, node, dt_t=dt_t):
            return x + double_well_drift(x) * dt_t[node][:, None]

        q = sigma**2 * dt[:, None, None] * np.eye(2)
        q[0] = np.eye(2)
        y = np.full((len(parent), 2), np.nan)
        y[node_map[leaves_base]] = y_leaves
        with run.timer(f"diffusion variant ({name})"):
            model = NBFFG(
                f_euler,
                q,
                np.zeros(2),
                np.eye(2),
                0.01 * np.eye(2),
                flow="shift",
                node_dependent=True,
                n_steps=600,
                batch_size=BATCH,
                learning_rate=LR,
                random_state=seed,
            ).fit(parent, y)
            guide = importance_summary(*model.sample(N_PROPOSALS, residual=False, random_state=seed + 1))
            ours = importance_summary(*model.sample(N_PROPOSALS, random_state=seed + 2))
        ratios[time_change] = ours["ess"] / guide["ess"]
        run.metric(
            f"diffusion_skipped_steps_{'time_changed' if time_change else 'uniform'}", model.n_skipped_steps_
        )
        out += [
            {
                "grid": name,
                "method": "BFFG guide-only IS",
                "ESS/N": guide["ess"],
                "log Z_hat": guide["log_evidence"],
            },
            {
                "grid": name,
                "method": "NBFFG (controlled-SDE residual)",
                "ESS/N": ours["ess"],
                "log Z_hat": ours["log_evidence"],
            },
        ]
    run.table(
        out,
        name="diffusion",
        caption="2-D double-well diffusion edges, Euler 50 steps per edge, depth-2 tree; the gate uses the "
        "time-changed grid t = u (2 - u), which refines the steps towards each child end.",
    )
    run.metric("diffusion_ess_ratio_uniform_grid", ratios[False])
    run.check("diffusion_ess_ratio_vs_guide", ratios[True])


def _figure(run: Run, res: dict) -> None:
    rows, model, truth, tree = res["rows"], res["model"], res["truth"], res["tree"]
    inner = ~tree.is_leaf
    fig, ax = plt.subplots(1, 3, figsize=(14, 4))
    shown = [r for r in rows if np.isfinite(r["ESS/N"])]
    ax[0].bar([r["method"].split(" (")[0] for r in shown], [r["ESS/N"] for r in shown])
    ax[0].tick_params(axis="x", labelrotation=30, labelsize=7)
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
    seeds = run.seeds(8)
    torch.manual_seed(seeds[0])
    n_seeds = run.param("nonlinear_seeds", quick=2, full=3)
    steps = run.param("nbffg_steps", quick=1000, full=2000)
    run.param("obs_noise_var", quick=R_VAR)
    _linear_gate(run, seeds[0], run.param("linear_steps", quick=200, full=1000))
    first = _nonlinear_gates(run, seeds[4 : 4 + n_seeds], steps)
    _subsampling_gate(run, first["model"], seeds[1])
    with run.timer("cost scaling"):
        _cost_gate(run, seeds[2])
    if run.full:
        _diffusion_gate(run, seeds[3])
    _figure(run, first)
