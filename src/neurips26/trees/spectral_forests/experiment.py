"""Reproduction: spectral distillation of random forests and gradient boosting (arXiv 2605.11841).

Protocol (digest): Friedman1/2/3 (Friedman's 3:1 signal-to-noise for 2 and 3) and sklearn diabetes;
56/14/30 train/validation/test split (the validation part is used only by the pruning baseline's selection);
RandomForestRegressor(500 trees, min_samples_leaf=5), GradientBoostingRegressor(300 rounds, depth 3, nu=0.1);
the spectral student is an MLP 2x32 over r = 20 components. Baselines at the student's size budget: pruned forest
(greedy subset + depth truncation, node budget = the student's parameter count), small forest (5 trees, depth 4),
FIGS and RuleFit with 50 rules (imodels, optional), the same MLP distilled directly on the forest's predictions,
and ridge (floor). Checks use medians over seeds.
"""

from __future__ import annotations

import pickle
import time
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.datasets import load_diabetes, make_friedman1, make_friedman2, make_friedman3  # noqa: E402
from sklearn.ensemble import GradientBoostingRegressor, RandomForestRegressor  # noqa: E402
from sklearn.linear_model import RidgeCV  # noqa: E402
from sklearn.metrics import mean_squared_error, r2_score  # noqa: E402

from neurips26.harness import Run  # noqa: E402

from .distill import SpectralForestDistiller  # noqa: E402
from .pruning import PrunedForest, count_nodes  # noqa: E402
from .smoother import (  # noqa: E402
    TreeSmoother,
    eigen_decay_exponent,
    minimax_rate_exponent,
    smoother_spectrum,
)

DATASETS = ("friedman1", "friedman2", "friedman3", "diabetes")
RULE_BASELINES = ("pruned forest", "FIGS", "RuleFit")


def _load(name: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    if name == "friedman1":
        return make_friedman1(n, noise=1.0, random_state=seed)
    if name == "friedman2":
        return make_friedman2(n, noise=125.0, random_state=seed)
    if name == "friedman3":
        return make_friedman3(n, noise=0.1, random_state=seed)
    X, y = load_diabetes(return_X_y=True)
    return X, y


def _student_bytes(d: SpectralForestDistiller) -> int:
    state = (d.weights_, d.biases_, d.coef_, d.intercept_, d._x_mean, d._x_scale)
    return len(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))


def _imodels() -> tuple[Any, Any] | None:
    try:
        from imodels import FIGSRegressor, RuleFitRegressor
    except Exception:  # imodels is an optional extra (neurips26[trees])
        return None
    return FIGSRegressor, RuleFitRegressor


def _row(method: str, model: Any, X_te: np.ndarray, y_te: np.ndarray, size: int, nbytes: int | None) -> dict:
    t0 = time.perf_counter()
    pred = model.predict(X_te)
    per_10k = (time.perf_counter() - t0) * 1e4 / len(y_te)
    return {
        "method": method,
        "R2": float(r2_score(y_te, pred)),
        "RMSE": float(np.sqrt(mean_squared_error(y_te, pred))),
        "size": int(size),
        "bytes": nbytes,
        "ms per 1e4 rows": 1e3 * per_10k,
    }


def _one_dataset(
    run: Run, name: str, n: int, seed: int, with_gbm: bool, diag: bool
) -> tuple[list[dict], dict]:
    X, y = _load(name, n, seed)
    perm = np.random.default_rng(seed).permutation(len(y))
    a, b = int(0.56 * len(y)), int(0.70 * len(y))
    tr, va, te = perm[:a], perm[a:b], perm[b:]
    X_tr, y_tr, X_va, y_va, X_te, y_te = X[tr], y[tr], X[va], y[va], X[te], y[te]
    rows: list[dict] = []
    info: dict[str, Any] = {}
    hidden, r = (32, 32), 20

    with run.timer("random forest"):
        rf = RandomForestRegressor(n_estimators=500, min_samples_leaf=5, n_jobs=2, random_state=seed)
        rf.fit(X_tr, y_tr)
    rf_nodes = count_nodes(rf)
    rows.append(_row("random forest (teacher)", rf, X_te, y_te, rf_nodes, len(pickle.dumps(rf))))

    with run.timer("spectral distillation"):
        dist = SpectralForestDistiller(
            rf, prefit=True, n_components=r, hidden_layer_sizes=hidden, random_state=seed
        ).fit(X_tr, y_tr)
    rows.append(_row("spectral distilled RF", dist, X_te, y_te, dist.n_parameters_, _student_bytes(dist)))
    info["size_ratio"] = dist.n_parameters_ / rf_nodes
    with run.timer("direct distillation"):
        direct = SpectralForestDistiller(
            rf, prefit=True, target="direct", hidden_layer_sizes=hidden, random_state=seed
        ).fit(X_tr, y_tr)
    rows.append(
        _row(
            "direct-prediction MLP (ablation)",
            direct,
            X_te,
            y_te,
            direct.n_parameters_,
            _student_bytes(direct),
        )
    )
    rows.append(
        {
            "method": f"rank-{r} spectral surrogate f_r (uses the forest)",
            "R2": float(r2_score(y_te, dist.teacher_predict(X_te, rank=r))),
        }
    )
    rows.append(
        {
            "method": "kernel smoother K y (forest, leaf values on all train)",
            "R2": float(r2_score(y_te, dist.teacher_predict(X_te))),
        }
    )

    budget = dist.n_parameters_
    with run.timer("baselines"):
        pruned = PrunedForest(rf, max_nodes=budget).fit(X_va, y_va)
        rows.append(_row("pruned forest (same budget)", pruned, X_te, y_te, pruned.n_nodes_, None))
        small = RandomForestRegressor(n_estimators=5, max_depth=4, random_state=seed).fit(X_tr, y_tr)
        rows.append(
            _row(
                "small forest (5 trees, depth 4)",
                small,
                X_te,
                y_te,
                count_nodes(small),
                len(pickle.dumps(small)),
            )
        )
        im = _imodels()
        if im is not None:
            figs = im[0](max_rules=50, random_state=seed).fit(X_tr, y_tr)
            rows.append(
                _row("FIGS (50 rules)", figs, X_te, y_te, 2 * figs.complexity_ + len(figs.trees_), None)
            )
            rulefit = im[1](max_rules=50, random_state=seed).fit(X_tr, y_tr)
            rows.append(_row("RuleFit (50 rules)", rulefit, X_te, y_te, rulefit.complexity_, None))
        ridge = RidgeCV(alphas=np.logspace(-3, 3, 13)).fit(X_tr, y_tr)
        rows.append(_row("ridge (floor)", ridge, X_te, y_te, X.shape[1] + 1, None))

    r2 = {row["method"]: row["R2"] for row in rows}
    info["rf_r2"] = r2["random forest (teacher)"]
    info["dist_r2"] = r2["spectral distilled RF"]
    competitors = [v for k, v in r2.items() if k.split(" (")[0] in RULE_BASELINES]
    info["best_baseline_r2"] = max(competitors)
    info["beats_baselines"] = info["dist_r2"] >= info["best_baseline_r2"]

    if diag:  # rank-r truncation on training points and eigen-decay of K (Friedman1 only)
        with run.timer("spectrum diagnostics"):
            sm = TreeSmoother(rf, X_tr)
            lam, V, _ = smoother_spectrum(sm, 30, random_state=seed)
            f30 = V @ (lam * (V.T @ y_tr))  # f_r on training points: V Lambda V^T y
            info["sanity_r2"] = float(r2_score(rf.predict(X_tr), f30))
            info["sanity_r2_vs_smoother"] = float(r2_score(sm.matmat(y_tr), f30))
            info["eigvals"] = lam
            psi_te = sm.apply_table(X_te, *sm.leaf_table(V / lam))
            c = lam * (V.T @ y_tr)
            info["truncation"] = {k: float(r2_score(y_te, psi_te[:, :k] @ c[:k])) for k in (5, 10, 20, 30)}

    if with_gbm:
        with run.timer("gradient boosting"):
            gbm = GradientBoostingRegressor(
                n_estimators=300, max_depth=3, learning_rate=0.1, random_state=seed
            )
            gbm.fit(X_tr, y_tr)
        rows.append(
            _row("gradient boosting (teacher)", gbm, X_te, y_te, count_nodes(gbm), len(pickle.dumps(gbm)))
        )
        with run.timer("spectral distillation"):
            gdist = SpectralForestDistiller(
                gbm, prefit=True, n_components=r, hidden_layer_sizes=hidden, random_state=seed
            ).fit(X_tr, y_tr)
        rows.append(
            _row("spectral distilled GBM", gdist, X_te, y_te, gdist.n_parameters_, _student_bytes(gdist))
        )
        info["gbm_r2"] = rows[-2]["R2"]
        info["gdist_r2"] = rows[-1]["R2"]
    for row in rows:
        row["dataset"] = name
        row["seed"] = seed
    return rows, info


def run(run: Run) -> None:
    n_seeds = run.pick(quick=1, full=5)
    sizes = run.pick(
        quick={"friedman1": 4000, "friedman2": 2000, "friedman3": 2000, "diabetes": 442},
        full={"friedman1": 6000, "friedman2": 6000, "friedman3": 6000, "diabetes": 442},
    )
    seeds = run.seeds(n_seeds)
    if _imodels() is None:
        run.note(
            "imodels is not installed: FIGS and RuleFit are skipped, the baseline set is the pruned forest only"
        )
    run.note(
        "quick mode: one seed, Friedman1 n = 4000 and Friedman2/3 n = 2000 (full: 5 seeds, n = 6000); "
        "same models, r = 20, MLP 2x32"
    )

    run.expect(
        "partial",
        reason=(
            "Quick mode (seed 0): the spectral student reproduces the size claim (2109 parameters = 1/107 of "
            "the forest's 226k nodes), the GBM distillation (R^2 0.931 vs 0.935, gap -0.004) and the rank-30 "
            "sanity check (R^2 0.975 against the forest's training predictions), but the distilled RF loses "
            "0.060 R^2 on Friedman1 (0.795 vs 0.856; threshold 0.03), and it is at least as good as the best "
            "of pruned forest/FIGS/RuleFit on 2 of 4 datasets (Friedman2, diabetes), not 3: FIGS wins "
            "Friedman1 (0.924) and the pruned forest edges Friedman3 (0.8601 vs 0.8594, a tie). The RF loss is the "
            "rank-r truncation itself: the forest kernel's eigenvalues decay slowly (power-law exponent 0.18), "
            "so the surrogate f_r with the forest still in the loop scores 0.787 at r = 20 and 0.808 at "
            "r = 30; choosing components by contribution c_j^2 from the top 150 only lifts r = 20 to 0.83 "
            "(exploration, not in the experiment). The same MLP distilled directly on the forest's predictions "
            "(ablation) reaches 0.886, so on Friedman1 the spectral targets hurt; on Friedman2/3 and diabetes "
            "the spectral student matches or beats the forest. Full mode (5 seeds, n = 6000, medians; run once, "
            "28 min on shared cores): size 1/161, RF gap -0.033, GBM gap -0.012, 2 of 4 datasets, rank-30 "
            "sanity 0.973; again partial."
        ),
    )
    all_rows: list[dict] = []
    infos: dict[str, list[dict]] = {d: [] for d in DATASETS}
    jobs = [(d, s) for s in seeds for d in DATASETS]
    for name, seed in run.progress(jobs, "datasets x seeds"):
        rows, info = _one_dataset(
            run, name, sizes[name], seed, with_gbm=name == "friedman1", diag=name == "friedman1"
        )
        all_rows.extend(rows)
        infos[name].append(info)

    def med(name: str, key: str) -> float:
        return float(np.median([i[key] for i in infos[name]]))

    # summary table: medians over seeds
    methods = list(dict.fromkeys(r["method"] for r in all_rows))
    summary = []
    for name in DATASETS:
        for m in methods:
            sel = [r for r in all_rows if r["dataset"] == name and r["method"] == m]
            if sel:
                summary.append(
                    {
                        "dataset": name,
                        "method": m,
                        **{
                            k: float(np.median([s[k] for s in sel]))
                            for k in ("R2", "RMSE", "size", "ms per 1e4 rows")
                            if all(s.get(k) is not None for s in sel)
                        },
                        "bytes": sel[0].get("bytes"),
                    }
                )
    run.table(
        summary,
        name="results",
        caption="Test R^2, size (nodes / parameters), bytes (pickled), inference time; medians over seeds",
    )

    f1 = infos["friedman1"]
    wins = float(np.median([sum(infos[d][k]["beats_baselines"] for d in DATASETS) for k in range(n_seeds)]))
    trunc = {k: float(np.median([i["truncation"][k] for i in f1])) for k in f1[0]["truncation"]}
    decay = float(np.median([eigen_decay_exponent(i["eigvals"]) for i in f1]))
    run.metric("eigen_decay_exponent_friedman1", decay)
    run.metric("implied_minimax_risk_exponent", minimax_rate_exponent(decay))
    run.metric("test_R2_of_rank_r_surrogate_friedman1", trunc)
    run.metric("rank30_R2_vs_kernel_smoother_train", med("friedman1", "sanity_r2_vs_smoother"))
    run.metric("size_ratio_per_dataset", {d: med(d, "size_ratio") for d in DATASETS})
    run.metric("R2_gap_per_dataset", {d: med(d, "dist_r2") - med(d, "rf_r2") for d in DATASETS})

    run.check("distilled RF size / RF node count (Friedman1)", med("friedman1", "size_ratio"), "<=", 0.01)
    run.check(
        "R2(distilled RF) - R2(RF) (Friedman1)",
        med("friedman1", "dist_r2") - med("friedman1", "rf_r2"),
        ">=",
        -0.03,
    )
    run.check(
        "R2(distilled GBM) - R2(GBM) (Friedman1)",
        med("friedman1", "gdist_r2") - med("friedman1", "gbm_r2"),
        ">=",
        -0.03,
    )
    run.check("datasets (of 4) where distilled RF >= best of pruned/FIGS/RuleFit", wins, ">=", 3)
    run.check(
        "R2 of rank-30 smoother vs RF predictions on train (Friedman1)",
        med("friedman1", "sanity_r2"),
        ">=",
        0.95,
    )

    # figure: size vs R^2 (Friedman1) and the kernel spectrum
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for m in methods:
        sel = [r for r in summary if r["dataset"] == "friedman1" and r["method"] == m and "size" in r]
        if sel:
            ax.scatter(sel[0]["size"], sel[0]["R2"], s=40)
            label = (
                m.split(" (")[0].replace("gradient boosting", "GBM").replace("spectral distilled", "spectral")
            )
            below = "GBM" in label and "spectral" in label  # keep the two GBM labels apart
            ax.annotate(
                label,
                (sel[0]["size"], sel[0]["R2"]),
                fontsize=7,
                xytext=(3, -9 if below else 3),
                textcoords="offset points",
            )
    ax.set_xscale("log")
    ax.set_xlabel("model size (tree nodes / stored parameters)")
    ax.set_ylabel("test R^2")
    ax.set_title("Friedman1: size vs accuracy")
    lam = f1[0]["eigvals"]
    ax2.loglog(np.arange(1, lam.size + 1), lam, "o-", ms=3)
    ax2.set_xlabel("j")
    ax2.set_ylabel("eigenvalue of the RF kernel K")
    ax2.set_title(f"RF kernel spectrum (power-law exponent {decay:.2f})")
    fig.tight_layout()
    run.figure(
        fig,
        "size_vs_r2",
        caption="Left: model size against test R^2 on Friedman1. Right: leading "
        "eigenvalues of the forest kernel on the training points.",
    )
