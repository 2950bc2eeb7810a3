"""Reproduction of "Network Learning with Semi-relaxed Gromov-Wasserstein" (arXiv 2606.02223).

Checks (digest, thresholds fixed):
1. SBMs with the true K (2-block assortative, 3-block): ARI >= 0.95 and MSE <= 1.1x spectral clustering +
   block averaging at n = 800; log-log slope of MSE against n in [-1.3, -0.7].
2. Relaxation gap from the fractional "product" start: n * gap bounded (max/min over the n grid <= 3) or the
   gap exactly 0; fraction of fractional rows <= 5% at n = 1600.
3. Five graphons with K = floor(sqrt(n)): MSE decreases with n on every graphon; srGW MSE <= 1.15x the best of
   USVT and SAS on at least 3 of 5 graphons at n = 1000.
4. (full mode) runtime at n = 4000, K = 63 below 60 s.

MSE is the authors' "loss_to_theta" with a hard map: (1/n^2) sum_{i,k} (Theta_ik - Theta_hat_ik)^2 over all
pairs, where Theta has a zero diagonal (no self-loops, as in the authors' sampler).
"""

from __future__ import annotations

import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.metrics import adjusted_rand_score, roc_auc_score  # noqa: E402

from neurips26.harness import Run  # noqa: E402

from .baselines import sas_estimate, spectral_sbm_estimate, usvt_estimate  # noqa: E402
from .estimator import SRGWGraphonEstimator, initial_coupling  # noqa: E402
from .random_graphs import GRAPHONS, SBMS, sample_graphon, sample_sbm, theta_mse  # noqa: E402
from .srgw import srgw_conditional_gradient  # noqa: E402

SBM_MODELS = ("2-block assortative", "3-block")
GRAPHON_SET = (
    "u*v",
    "exp(-(u^0.7+v^0.7))",
    "1-|u-v|",
    "0.5+0.5sin(2pi u)sin(2pi v)",
    "log(1+0.5max(u,v))",
)


def _slope(ns: list[int], values: list[float]) -> float:
    return float(np.polyfit(np.log(ns), np.log(values), 1)[0])


def _offdiag_mse(theta: np.ndarray, theta_hat: np.ndarray) -> float:
    off = ~np.eye(theta.shape[0], dtype=bool)
    return float(np.mean((theta - theta_hat)[off] ** 2))


def _sbm_part(run: Run, seeds: list[int]) -> dict:
    ns = run.pick(quick=[200, 400, 800], full=[200, 400, 800, 1600])
    rows, curves = [], {}
    for model in run.progress(SBM_MODELS, "SBM rates"):
        B, pi = SBMS[model]
        K = B.shape[0]
        for n in ns:
            acc = {k: [] for k in ("mse", "mse_sc", "ari", "ari_sc", "off", "t", "t_sc")}
            for s in seeds:
                A, theta, z = sample_sbm(B, pi, n, random_state=s)
                t0 = time.perf_counter()
                est = SRGWGraphonEstimator(K, random_state=s).fit(A)
                acc["t"].append(time.perf_counter() - t0)
                P = est.probability_matrix()
                acc["mse"].append(theta_mse(theta, P))
                acc["off"].append(_offdiag_mse(theta, P))
                acc["ari"].append(adjusted_rand_score(z, est.labels_))
                t0 = time.perf_counter()
                P_sc, lab_sc = spectral_sbm_estimate(A, K, random_state=s)
                acc["t_sc"].append(time.perf_counter() - t0)
                acc["mse_sc"].append(theta_mse(theta, P_sc))
                acc["ari_sc"].append(adjusted_rand_score(z, lab_sc))
            m = {k: float(np.mean(v)) for k, v in acc.items()}
            curves[(model, n)] = m
            rows.append(
                {
                    "model": model,
                    "n": n,
                    "srGW MSE": m["mse"],
                    "spectral MSE": m["mse_sc"],
                    "srGW off-diag MSE": m["off"],
                    "srGW ARI": m["ari"],
                    "spectral ARI": m["ari_sc"],
                    "srGW s": m["t"],
                    "spectral s": m["t_sc"],
                }
            )
    run.table(
        rows,
        name="sbm",
        caption="SBMs with the true K (k-means start); means over seeds. MSE over all "
        "pairs (diagonal included, Theta_ii = 0); off-diag MSE excludes i = k.",
    )
    n_ref = 800
    run.check(
        "SBM: min ARI at n = 800 (over the 2 models)",
        min(curves[(mdl, n_ref)]["ari"] for mdl in SBM_MODELS),
        ">=",
        0.95,
    )
    run.check(
        "SBM: max MSE(srGW) / MSE(spectral) at n = 800",
        max(curves[(mdl, n_ref)]["mse"] / curves[(mdl, n_ref)]["mse_sc"] for mdl in SBM_MODELS),
        "<=",
        1.1,
    )
    for model in SBM_MODELS:
        run.check(
            f"SBM {model}: log-log slope of MSE vs n",
            _slope(ns, [curves[(model, n)]["mse"] for n in ns]),
            "in",
            (-1.3, -0.7),
        )
        run.metric(f"off-diagonal MSE slope, {model}", _slope(ns, [curves[(model, n)]["off"] for n in ns]))
    return {"ns": ns, "curves": curves}


def _gap_part(run: Run, seeds: list[int]) -> None:
    ns = [200, 400, 800, 1600]
    rows, n_gap, frac = [], {}, {}
    for n in run.progress(ns, "relaxation gap"):
        gaps, fracs, aris = [], [], []
        for model in SBM_MODELS:
            B, pi = SBMS[model]
            for s in seeds:
                A, _, z = sample_sbm(B, pi, n, random_state=s)
                est = SRGWGraphonEstimator(B.shape[0], init="product", random_state=s).fit(A)
                gap = est.loss_ - est.relaxed_loss_
                # the expanded loss carries ~1e-15 round-off: a gap at that level is an exact 0
                gaps.append(0.0 if abs(gap) <= 1e-12 * max(est.relaxed_loss_, 1e-300) else gap)
                fracs.append(est.fractional_rows_)
                aris.append(adjusted_rand_score(z, est.labels_))
        n_gap[n] = n * float(np.mean(gaps))
        frac[n] = float(np.mean(fracs))
        rows.append(
            {
                "n": n,
                "mean gap": float(np.mean(gaps)),
                "n x gap": n_gap[n],
                "max |gap|": float(np.max(np.abs(gaps))),
                "fractional rows": frac[n],
                "ARI from product start": float(np.mean(aris)),
            }
        )
    run.table(
        rows,
        name="relaxation_gap",
        caption="Product (fractional) start, true K; gap = loss_to_A(rounded) "
        "- loss_to_A(relaxed), means over both SBMs and the seeds.",
    )
    vals = np.array(list(n_gap.values()))
    if np.all(vals == 0.0):
        ratio = 1.0
        run.note(
            "Relaxation gap: every relaxed solution from the product start ended deterministic (gap exactly "
            "0 up to 1e-12 relative round-off), so the n x gap check is recorded as max/min = 1."
        )
    elif np.all(vals > 0):
        ratio = float(vals.max() / vals.min())
    else:
        ratio = float("inf")
    run.check(
        "gap: max/min of n x gap over n in {200, 400, 800, 1600} (1 if all gaps are 0)", ratio, "<=", 3.0
    )
    run.check("gap: fraction of fractional rows at n = 1600", frac[1600], "<=", 0.05)
    run.metric(
        "mean ARI from the product start (init sensitivity)",
        float(np.mean([r["ARI from product start"] for r in rows])),
    )


def _graphon_part(run: Run, seeds: list[int]) -> dict:
    ns = run.pick(quick=[250, 500, 1000], full=[250, 500, 1000, 2000])
    rows, mse = [], {}
    for W in run.progress(GRAPHON_SET, "graphon rates"):
        for n in ns:
            acc = {"srGW": [], "USVT": [], "SAS": [], "t": []}
            for s in seeds:
                A, theta, _ = sample_graphon(GRAPHONS[W], n, random_state=s)
                t0 = time.perf_counter()
                est = SRGWGraphonEstimator("sqrt", random_state=s).fit(A)
                acc["t"].append(time.perf_counter() - t0)
                acc["srGW"].append(theta_mse(theta, est.probability_matrix()))
                acc["USVT"].append(theta_mse(theta, usvt_estimate(A)))
                acc["SAS"].append(theta_mse(theta, sas_estimate(A)))
            m = {k: float(np.mean(v)) for k, v in acc.items()}
            mse[(W, n)] = m
            rows.append(
                {
                    "graphon": W,
                    "n": n,
                    "K": int(np.sqrt(n)),
                    "srGW MSE": m["srGW"],
                    "USVT MSE": m["USVT"],
                    "SAS MSE": m["SAS"],
                    "srGW / best": m["srGW"] / min(m["USVT"], m["SAS"]),
                    "srGW s": m["t"],
                }
            )
    run.table(rows, name="graphons", caption="Graphons, K = floor(sqrt(n)), k-means start; means over seeds.")
    decreasing = sum(
        all(mse[(W, a)]["srGW"] > mse[(W, b)]["srGW"] for a, b in zip(ns, ns[1:])) for W in GRAPHON_SET
    )
    run.check("graphons: number (of 5) on which srGW MSE decreases with n", decreasing, ">=", 5)
    wins = sum(
        mse[(W, 1000)]["srGW"] <= 1.15 * min(mse[(W, 1000)]["USVT"], mse[(W, 1000)]["SAS"])
        for W in GRAPHON_SET
    )
    run.check("graphons: number (of 5) with srGW MSE <= 1.15x best(USVT, SAS) at n = 1000", wins, ">=", 3)
    for W in GRAPHON_SET:
        run.metric(f"srGW MSE slope, {W}", _slope(ns, [mse[(W, n)]["srGW"] for n in ns]))
    return {"ns": ns, "mse": mse}


def _solver_speed(run: Run, seed: int) -> None:
    """Time per Frank-Wolfe iteration, ours vs POT's semirelaxed solver, same start, n = 1000, K = 31."""
    import ot

    n, K = 1000, 31
    A, _, _ = sample_graphon(GRAPHONS["u*v"], n, random_state=seed)
    C = SRGWGraphonEstimator(K, random_state=seed, max_iter=1).fit(A).relaxed_block_matrix_
    K = C.shape[0]
    T0 = initial_coupling(A, K, "random", random_state=seed)
    p = np.full(n, 1.0 / n)
    t0 = time.perf_counter()
    T, log = srgw_conditional_gradient(A, C, T0, max_iter=30, tol=0.0, log=True)
    t_ours = time.perf_counter() - t0
    t0 = time.perf_counter()
    Tp, logp = ot.gromov.semirelaxed_gromov_wasserstein(
        A, C, p, symmetric=True, G0=T0, log=True, max_iter=30, tol_rel=0.0, tol_abs=0.0
    )
    t_pot = time.perf_counter() - t0
    it_ours, it_pot = max(log["n_iter"], 1), max(len(logp["loss"]) - 1, 1)
    ratio = (t_pot / it_pot) / (t_ours / it_ours)
    run.metric("FW time per iteration, ours (s), n=1000 K=31", t_ours / it_ours)
    run.metric("FW time per iteration, POT (s), n=1000 K=31", t_pot / it_pot)
    run.metric("FW per-iteration speed-up over POT", ratio)
    run.metric("final loss ours - POT (same start)", log["loss"][-1] - float(logp["srgw_dist"]))
    run.table(
        [
            {
                "solver": "ours",
                "iterations": it_ours,
                "s / iteration": t_ours / it_ours,
                "loss": log["loss"][-1],
            },
            {
                "solver": "POT semirelaxed_gromov_wasserstein",
                "iterations": it_pot,
                "s / iteration": t_pot / it_pot,
                "loss": float(logp["srgw_dist"]),
            },
        ],
        name="solver_speed",
        caption="T-step (Frank-Wolfe, C fixed) from the same random coupling, n = 1000, K = 31.",
    )


def _real_graphs(run: Run, seed: int) -> None:
    """Held-out dyad AUC on karate and Les Miserables (sanity, not a pass gate)."""
    import networkx as nx

    rows = []
    rng = np.random.default_rng(seed)
    for name, G in (("karate", nx.karate_club_graph()), ("les miserables", nx.les_miserables_graph())):
        A = (nx.to_numpy_array(G) > 0).astype(float)
        n = A.shape[0]
        iu = np.triu_indices(n, 1)
        held = rng.uniform(size=iu[0].size) < 0.1
        A_tr = A.copy()
        A_tr[iu[0][held], iu[1][held]] = 0.0
        A_tr[iu[1][held], iu[0][held]] = 0.0
        K = int(np.sqrt(n))
        P = SRGWGraphonEstimator(K, random_state=seed).fit(A_tr).probability_matrix()
        P_sc, _ = spectral_sbm_estimate(A_tr, K, random_state=seed)
        y = A[iu][held]
        rows.append(
            {
                "graph": name,
                "n": n,
                "K": K,
                "srGW AUC": roc_auc_score(y, P[iu][held]),
                "spectral SBM AUC": roc_auc_score(y, P_sc[iu][held]),
            }
        )
    run.table(
        rows,
        name="real_graphs",
        caption="Held-out 10% of dyads (set to 0 for fitting); AUC of the estimated "
        "probabilities on the held-out dyads. Sanity only.",
    )


def _figure(run: Run, sbm: dict, gr: dict) -> None:
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    ax = axes[0]
    for model, ls in zip(SBM_MODELS, ("-", "--")):
        ns = sbm["ns"]
        ax.loglog(
            ns, [sbm["curves"][(model, n)]["mse"] for n in ns], "o" + ls, color="C0", label=f"srGW, {model}"
        )
        ax.loglog(
            ns,
            [sbm["curves"][(model, n)]["mse_sc"] for n in ns],
            "x" + ls,
            color="C1",
            label=f"spectral, {model}",
        )
        ax.loglog(
            ns,
            [sbm["curves"][(model, n)]["off"] for n in ns],
            "s" + ls,
            color="C2",
            alpha=0.6,
            label=f"srGW off-diag, {model}",
        )
    ax.set(xlabel="n", ylabel="MSE to Theta", title="SBMs, true K")
    ax.legend(fontsize=7)
    ax = axes[1]
    ns = gr["ns"]
    for i, method in enumerate(("srGW", "USVT", "SAS")):
        gm = [float(np.exp(np.mean([np.log(gr["mse"][(W, n)][method]) for W in GRAPHON_SET]))) for n in ns]
        ax.loglog(ns, gm, "o-", color=f"C{i}", label=f"{method} (geo. mean of 5 graphons)")
        for W in GRAPHON_SET:
            ax.loglog(ns, [gr["mse"][(W, n)][method] for n in ns], "-", color=f"C{i}", alpha=0.15)
    ax.set(xlabel="n", ylabel="MSE to Theta", title="Graphons, K = floor(sqrt(n))")
    ax.legend(fontsize=7)
    fig.tight_layout()
    run.figure(fig, "mse_vs_n", caption="MSE to the probability matrix against n (log-log), per method.")


def run(run: Run) -> None:
    seeds = run.seeds(run.pick(quick=2, full=5))
    run.expect(
        "partial",
        reason=(
            "srGW with K = floor(sqrt(n)) blocks is a step-function estimate; at n = 1000 its MSE is "
            "2.2-3.1x the best of USVT (Chatterjee scaling) and SAS on the smooth graphons u*v, "
            "exp(-(u^0.7+v^0.7)), the sine product and log(1+0.5max); it is within 1.15x of the best "
            "baseline only on 1-|u-v| "
            "(where SAS's degree sort fails). A start from the true latent order (oracle) still leaves srGW "
            "about 2x above USVT/SAS on u*v, so the shortfall is the K = sqrt(n) block estimator, not the "
            "optimiser. The SBM, relaxation-gap and monotone-rate checks reproduce."
        ),
    )
    run.note(
        "quick mode: SBM n in {200, 400, 800}, graphon n in {250, 500, 1000}, 2 seeds (full: SBM up to "
        "1600, graphons up to 2000, 5 seeds, plus the n = 4000 scaling check); thresholds unchanged."
    )
    with run.timer("sbm"):
        sbm = _sbm_part(run, seeds)
    run.note(
        "The SBM MSE includes the diagonal, where Theta_ii = 0 (no self-loops) but the estimate is C_zz; "
        "that term is ~mean(C_zz^2)/n and sets the n^-1 slope. With exact recovery the off-diagonal MSE "
        "decays about like K^2/n^2 (see the off-diagonal slope metrics), faster than the minimax rate shape."
    )
    with run.timer("relaxation_gap"):
        _gap_part(run, seeds)
    with run.timer("graphons"):
        gr = _graphon_part(run, seeds)
    with run.timer("solver_speed"):
        _solver_speed(run, seeds[0])
    with run.timer("real_graphs"):
        _real_graphs(run, seeds[0])
    if run.full:
        A, _, _ = sample_graphon(GRAPHONS["u*v"], 4000, random_state=seeds[0])
        t0 = time.perf_counter()
        est = SRGWGraphonEstimator(63, random_state=seeds[0]).fit(A)
        elapsed = time.perf_counter() - t0
        run.metric("n = 4000 outer / FW iterations", [est.n_iter_, est.n_fw_iter_])
        run.check("scaling: fit time (s) at n = 4000, K = 63", elapsed, "<", 60.0)
    _figure(run, sbm, gr)
