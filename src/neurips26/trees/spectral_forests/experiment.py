"""Reproduction: spectral distillation of random forests and gradient boosting (arXiv 2605.11841).

Protocol (digest): Friedman1 (n = 6000, noise 1), Friedman2/3 (Friedman's 3:1 signal-to-noise), sklearn
diabetes and statsmodels "fair" (affairs); 56/14/30 train/validation/test split (the validation part is used
only by the pruning baseline's selection); RandomForestRegressor(500 trees, min_samples_leaf=5),
GradientBoostingRegressor(300 rounds, depth 3, nu=0.1).

The student is sized to the digest's budget on every data set: ``r = 20`` components and two hidden layers of
the widest width <= 32 whose stored parameters fit 1/100 of the forest's nodes (2x32 on the Friedman and fair
forests). Components are chosen by contribution ``c_j^2`` among the leading ``5 r`` eigenpairs (the library
default); the digest-literal student on the top ``r`` eigenpairs, a wider-spectrum student (``32x16`` hidden,
the largest ``r`` within the budget) and the same MLP distilled directly on the forest's predictions are run
beside it. Baselines at the student's size budget: pruned forest (greedy subset + depth truncation), FIGS and
RuleFit with 50 rules (imodels), small forest (5 trees, depth 4) and ridge (floor).
"""

from __future__ import annotations

import pickle
import time
import warnings
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_diabetes, make_friedman1, make_friedman2, make_friedman3
from sklearn.ensemble import GradientBoostingRegressor, RandomForestRegressor
from sklearn.linear_model import RidgeCV
from sklearn.metrics import mean_squared_error, r2_score

from neurips26.harness import Run, loglog_slope

from .distill import SpectralForestDistiller, mlp_parameter_count, student_layers_for_budget
from .pruning import PrunedForest, count_nodes
from .smoother import TreeSmoother, minimax_rate_exponent, smoother_spectrum

ALL_DATASETS = ("friedman1", "friedman2", "friedman3", "diabetes", "fair")
# the digest's "3 of 4 datasets": Friedman1, Friedman2/3 (one entry: each counts one half), diabetes, fair
WIN_WEIGHT = {"friedman1": 1.0, "friedman2": 0.5, "friedman3": 0.5, "diabetes": 1.0, "fair": 1.0}
RULE_BASELINES = ("pruned forest", "FIGS", "RuleFit")
N_COMPONENTS = 20
MAX_WIDTH = 32
SIZE_FRACTION = 0.01


def load_dataset(name: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """One of the digest's data sets; ``n`` rows for the generators (and a row sample of "fair")."""
    if name == "friedman1":
        return make_friedman1(n, noise=1.0, random_state=seed)
    if name == "friedman2":
        return make_friedman2(n, noise=125.0, random_state=seed)
    if name == "friedman3":
        return make_friedman3(n, noise=0.1, random_state=seed)
    if name == "diabetes":
        return load_diabetes(return_X_y=True)
    if name == "fair":  # statsmodels' bundled affairs data (6366 rows, 8 covariates), shipped in the wheel
        from statsmodels.datasets import fair

        data = fair.load_pandas().data
        X = data.drop(columns="affairs").to_numpy(dtype=np.float64)
        y = data["affairs"].to_numpy(dtype=np.float64)
        if n < len(y):
            keep = np.random.default_rng(seed).choice(len(y), n, replace=False)
            X, y = X[keep], y[keep]
        return X, y
    raise ValueError(f"unknown data set {name!r}")


def _student_bytes(d: SpectralForestDistiller) -> int:
    s = d.student_
    state = (s.coefs_, s.intercepts_, d.coef_, d.intercept_, d._x_mean, d._x_scale)
    return len(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))


def _imodels() -> tuple[Any, Any] | None:
    try:
        from imodels import FIGSRegressor, RuleFitRegressor
    except ImportError:  # imodels is an optional extra (neurips26[trees])
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


def _wide_spectrum_student(n_inputs: int, budget: int) -> tuple[tuple[int, int], int]:
    """Hidden (32, 16) and the largest r <= 60 whose student fits ``budget`` (a larger r within 1/100)."""
    hidden = (MAX_WIDTH, MAX_WIDTH // 2)
    r = 60
    while r > 1 and mlp_parameter_count(n_inputs, hidden, r) + r + 1 + 2 * n_inputs > budget:
        r -= 1
    return hidden, r


def _one_dataset(
    run: Run, name: str, n: int, seed: int, friedman1_extras: bool, baselines: str, inits: int
) -> tuple:
    X, y = load_dataset(name, n, seed)
    perm = np.random.default_rng(seed).permutation(len(y))
    a, b = int(0.56 * len(y)), int(0.70 * len(y))
    tr, va, te = perm[:a], perm[a:b], perm[b:]
    X_tr, y_tr, X_va, y_va, X_te, y_te = X[tr], y[tr], X[va], y[va], X[te], y[te]
    rows: list[dict] = []
    info: dict[str, Any] = {}

    with run.timer("random forest"):
        rf = RandomForestRegressor(n_estimators=500, min_samples_leaf=5, n_jobs=1, random_state=seed)
        rf.fit(X_tr, y_tr)
    rf_nodes = count_nodes(rf)
    budget = int(SIZE_FRACTION * rf_nodes)
    hidden = student_layers_for_budget(X.shape[1], N_COMPONENTS, budget, max_width=MAX_WIDTH)
    info["hidden_width"] = hidden[0]
    fixed = mlp_parameter_count(X.shape[1], (MAX_WIDTH, MAX_WIDTH), N_COMPONENTS) + N_COMPONENTS + 1
    info["fixed_student_size_ratio"] = (fixed + 2 * X.shape[1]) / rf_nodes  # the digest's 2x32 student
    rows.append(_row("random forest (teacher)", rf, X_te, y_te, rf_nodes, len(pickle.dumps(rf))))

    def distil(teacher: Any, **kw: Any) -> SpectralForestDistiller:
        with run.timer("spectral distillation"):
            return (
                SpectralForestDistiller(
                    teacher,
                    prefit=True,
                    n_components=N_COMPONENTS,
                    hidden_layer_sizes=hidden,
                    random_state=seed,
                )
                .set_params(**kw)
                .fit(X_tr, y_tr)
            )

    dist = distil(rf, n_init=inits)  # the library default: c_j^2-selected components
    w = f"{hidden[0]}x{hidden[1]}"
    rows.append(_row(f"spectral distilled RF (r={N_COMPONENTS}, c_j^2, {w})", dist, X_te, y_te,
                     dist.n_parameters_, _student_bytes(dist)))  # fmt: skip
    info["size_ratio"] = dist.n_parameters_ / rf_nodes
    top = distil(rf, component_selection="top", n_init=inits)
    rows.append(_row(f"spectral distilled RF (top-{N_COMPONENTS} eigenpairs, digest, {w})", top, X_te, y_te,
                     top.n_parameters_, _student_bytes(top)))  # fmt: skip
    direct = distil(rf, target="direct")
    rows.append(_row(f"direct-prediction MLP (ablation, {w})", direct, X_te, y_te, direct.n_parameters_,
                     _student_bytes(direct)))  # fmt: skip
    r2_rf = rows[0]["R2"]
    info.update(rf_r2=r2_rf, dist_r2=rows[1]["R2"], top_r2=rows[2]["R2"], direct_r2=rows[3]["R2"])
    for label, model in ((f"c_j^2-selected rank-{N_COMPONENTS}", dist), (f"top-{N_COMPONENTS}", top)):
        rows.append({"method": f"{label} surrogate f_r (uses the forest)",
                     "R2": float(r2_score(y_te, model.teacher_predict(X_te, rank=N_COMPONENTS)))})  # fmt: skip
    rows.append({"method": "kernel smoother K y (forest, leaf values on all train)",
                 "R2": float(r2_score(y_te, dist.teacher_predict(X_te)))})  # fmt: skip
    info["surrogate_r2"] = rows[4]["R2"]
    info["top_surrogate_r2"] = rows[5]["R2"]

    if friedman1_extras and run.full:  # a larger r within the 1/100 budget (narrower second layer)
        hid2, r2 = _wide_spectrum_student(X.shape[1], budget)  # (32, 16), r = 60 on Friedman1
        for sel in ("contribution", "top"):
            wide = distil(
                rf, n_components=r2, hidden_layer_sizes=hid2, component_selection=sel, n_candidates=150
            )
            rows.append(_row(f"spectral distilled RF (r={r2}, {sel}, {hid2[0]}x{hid2[1]})", wide, X_te, y_te,
                             wide.n_parameters_, _student_bytes(wide)))  # fmt: skip
            info[f"wide_{sel}_r2"] = rows[-1]["R2"]
        info["wide_r"] = r2

    if baselines != "none":
        budget_nodes = dist.n_parameters_
        with run.timer("baselines"):
            pruned = PrunedForest(rf, max_nodes=budget_nodes).fit(X_va, y_va)
            rows.append(_row("pruned forest (same budget)", pruned, X_te, y_te, pruned.n_nodes_, None))
            im = _imodels()
            if im is not None:
                figs = im[0](max_rules=50, random_state=seed).fit(X_tr, y_tr)
                rows.append(
                    _row("FIGS (50 rules)", figs, X_te, y_te, 2 * figs.complexity_ + len(figs.trees_), None)
                )
                if baselines == "all":
                    with warnings.catch_warnings():  # RuleFit's Lasso path warns on convergence
                        warnings.simplefilter("ignore")
                        rulefit = im[1](max_rules=50, random_state=seed).fit(X_tr, y_tr)
                    rows.append(_row("RuleFit (50 rules)", rulefit, X_te, y_te, rulefit.complexity_, None))
            if baselines == "all":
                small = RandomForestRegressor(n_estimators=5, max_depth=4, random_state=seed).fit(X_tr, y_tr)
                rows.append(_row("small forest (5 trees, depth 4)", small, X_te, y_te, count_nodes(small),
                                 len(pickle.dumps(small))))  # fmt: skip
                ridge = RidgeCV(alphas=np.logspace(-3, 3, 13)).fit(X_tr, y_tr)
                rows.append(_row("ridge (floor)", ridge, X_te, y_te, X.shape[1] + 1, None))
        competitors = [r["R2"] for r in rows if r["method"].split(" (")[0] in RULE_BASELINES]
        info["best_baseline_r2"] = max(competitors)
        info["margin_vs_baselines"] = info["dist_r2"] - info["best_baseline_r2"]
        info["top_margin_vs_baselines"] = info["top_r2"] - info["best_baseline_r2"]

    if friedman1_extras:
        with run.timer("spectrum diagnostics"):  # rank-30 truncation on training points, eigen-decay of K
            sm = TreeSmoother(rf, X_tr)
            lam, V, _ = smoother_spectrum(sm, 30, random_state=seed)
            f30 = V @ (lam * (V.T @ y_tr))  # f_r on training points: V Lambda V^T y
            info["rank30_r2"] = float(r2_score(rf.predict(X_tr), f30))
            info["rank30_r2_vs_smoother"] = float(r2_score(sm.matmat(y_tr), f30))
            info["eigvals"] = lam
            psi_te = sm.apply_table(X_te, *sm.leaf_table(V / lam))
            c = lam * (V.T @ y_tr)
            info["truncation"] = {k: float(r2_score(y_te, psi_te[:, :k] @ c[:k])) for k in (5, 10, 20, 30)}
        with run.timer("gradient boosting"):
            gbm = GradientBoostingRegressor(
                n_estimators=300, max_depth=3, learning_rate=0.1, random_state=seed
            )
            gbm.fit(X_tr, y_tr)
        gbm_nodes = count_nodes(gbm)
        rows.append(_row("gradient boosting (teacher)", gbm, X_te, y_te, gbm_nodes, len(pickle.dumps(gbm))))
        gdist = distil(gbm, n_init=inits)
        rows.append(_row(f"spectral distilled GBM (r={N_COMPONENTS}, c_j^2, {w})", gdist, X_te, y_te,
                         gdist.n_parameters_, _student_bytes(gdist)))  # fmt: skip
        info.update(
            gbm_r2=rows[-2]["R2"], gdist_r2=rows[-1]["R2"], gbm_size_ratio=gdist.n_parameters_ / gbm_nodes
        )
        gdirect = distil(gbm, target="direct")  # the key ablation for the boosting teacher too
        rows.append(_row(f"direct-prediction MLP of the GBM (ablation, {w})", gdirect, X_te, y_te,
                         gdirect.n_parameters_, _student_bytes(gdirect)))  # fmt: skip
        info["gdirect_r2"] = rows[-1]["R2"]
        if run.full:
            gtop = distil(gbm, component_selection="top", n_init=inits)
            rows.append(_row(f"spectral distilled GBM (top-{N_COMPONENTS}, {w})", gtop, X_te, y_te,
                             gtop.n_parameters_, _student_bytes(gtop)))  # fmt: skip
            info["gtop_r2"] = rows[-1]["R2"]
    for row in rows:
        row["dataset"] = name
        row["seed"] = seed
    return rows, info


def run(run: Run) -> None:
    datasets = run.param("datasets", quick=["friedman1"], full=list(ALL_DATASETS))
    sizes = run.param(
        "n_rows",
        quick={"friedman1": 4000},
        full={"friedman1": 6000, "friedman2": 6000, "friedman3": 6000, "diabetes": 442, "fair": 6366},
    )
    n_seeds = run.param("n_seeds", quick=1, full=5)
    run.param("forest", quick="RandomForestRegressor(500 trees, min_samples_leaf=5)")
    run.param("boosting", quick="GradientBoostingRegressor(300 rounds, depth 3, nu=0.1)")
    run.param("n_components", quick=N_COMPONENTS)
    run.param("size_fraction", quick=SIZE_FRACTION)
    # quick: pruned forest and FIGS on Friedman1 (RuleFit, 5 s on one core, only raises the best baseline)
    baselines = run.param("baselines", quick="pruned+FIGS", full="all")
    # restarts of the spectral students (main, top-r, GBM); the direct and wide-spectrum ablations train once
    inits = run.param("student_inits", quick=1, full=3)
    if _imodels() is None:
        run.note(
            "imodels is not installed: FIGS and RuleFit are skipped, the baseline set is the pruned forest only"
        )
    seeds = run.seeds(n_seeds)

    all_rows: list[dict] = []
    infos: dict[str, list[dict]] = {d: [] for d in datasets}
    jobs = [(d, s) for s in seeds for d in datasets]
    for name, seed in run.progress(jobs, "datasets x seeds"):
        rows, info = _one_dataset(
            run,
            name,
            sizes[name],
            seed,
            friedman1_extras=name == "friedman1",
            baselines=baselines,
            inits=inits,
        )
        all_rows.extend(rows)
        infos[name].append(info)

    def per_seed(name: str, key: str) -> list[float]:
        return [float(i[key]) for i in infos[name]]

    def med(name: str, key: str) -> float:
        return float(np.median(per_seed(name, key)))

    # summary table: medians over seeds
    methods = list(dict.fromkeys(r["method"] for r in all_rows))
    summary = []
    for name in datasets:
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
        caption="Test R^2, size (nodes / stored parameters), bytes (pickled), inference time; medians over seeds",
    )

    # the digest's key ablation: does the spectral representation beat the same MLP trained directly on the
    # ensemble's predictions (same inputs, same size)?
    ablation = []
    for name in datasets:
        teachers = [("random forest", "rf_r2", "dist_r2", "direct_r2")]
        if "gbm_r2" in infos[name][0]:
            teachers.append(("gradient boosting", "gbm_r2", "gdist_r2", "gdirect_r2"))
        for teacher, t_key, s_key, d_key in teachers:
            ablation.append(
                {
                    "dataset": name,
                    "teacher": teacher,
                    "teacher R2": med(name, t_key),
                    "spectral student R2": med(name, s_key),
                    "direct MLP student R2": med(name, d_key),
                    "spectral - direct": float(np.median([i[s_key] - i[d_key] for i in infos[name]])),
                }
            )
    run.table(
        ablation,
        name="ablation",
        caption="The digest's key ablation: the spectral student against the same MLP (same size, same "
        "distillation inputs) trained directly on the teacher's predictions; test R^2, medians over seeds",
    )
    f1 = infos["friedman1"]
    spec_minus_direct = [i["dist_r2"] - i["direct_r2"] for i in f1]
    gbm_spec_minus_direct = [i["gdist_r2"] - i["gdirect_r2"] for i in f1]
    run.metric("direct_mlp_r2_friedman1", med("friedman1", "direct_r2"))
    run.metric("gbm_direct_mlp_r2_friedman1", med("friedman1", "gdirect_r2"))
    run.metric("spectral_minus_direct_r2_friedman1", float(np.median(spec_minus_direct)))
    run.metric("gbm_spectral_minus_direct_r2_friedman1", float(np.median(gbm_spec_minus_direct)))
    run.metric(
        "spectral_minus_direct_r2_per_dataset",
        {d: float(np.median([i["dist_r2"] - i["direct_r2"] for i in infos[d]])) for d in datasets},
    )
    run.note(
        "Key ablation (table ablation): on Friedman1 the same MLP trained directly on the forest's predictions "
        f"reaches test R^2 {med('friedman1', 'direct_r2'):.3f} against the spectral student's "
        f"{med('friedman1', 'dist_r2'):.3f} (spectral - direct {np.median(spec_minus_direct):+.3f}; for the GBM "
        f"{np.median(gbm_spec_minus_direct):+.3f})."
    )
    gap = [i["dist_r2"] - i["rf_r2"] for i in f1]
    top_gap = [i["top_r2"] - i["rf_r2"] for i in f1]
    gbm_gap = [i["gdist_r2"] - i["gbm_r2"] for i in f1]
    trunc = {k: float(np.median([i["truncation"][k] for i in f1])) for k in f1[0]["truncation"]}
    slopes = [loglog_slope(np.arange(2, i["eigvals"].size + 1), i["eigvals"][1:]) for i in f1]
    decay = float(np.median([-s.slope for s in slopes]))
    run.metric("eigen_decay_exponent_friedman1", decay)
    run.metric("eigen_decay_exponent_ci", [-slopes[0].hi, -slopes[0].lo])
    run.metric("implied_minimax_risk_exponent", minimax_rate_exponent(decay))
    run.metric("test_r2_of_top_rank_r_surrogate_friedman1", trunc)
    run.metric("rf_r2_friedman1", med("friedman1", "rf_r2"))
    run.metric("rf_r2_gap_top_r", float(np.median(top_gap)))
    run.metric("rf_r2_gap_top_r_per_seed", top_gap)
    run.metric("rf_r2_gap_direct_mlp", med("friedman1", "direct_r2") - med("friedman1", "rf_r2"))
    run.metric("surrogate_r2_contribution_friedman1", med("friedman1", "surrogate_r2"))
    run.metric("surrogate_r2_top_r_friedman1", med("friedman1", "top_surrogate_r2"))
    run.metric("rank30_r2_vs_kernel_smoother_train", med("friedman1", "rank30_r2_vs_smoother"))
    run.metric("gbm_student_size_ratio", med("friedman1", "gbm_size_ratio"))
    run.metric("size_ratio_per_dataset", {d: med(d, "size_ratio") for d in datasets})
    run.metric("student_hidden_width_per_dataset", {d: med(d, "hidden_width") for d in datasets})
    run.metric(
        "fixed_2x32_student_size_ratio_per_dataset", {d: med(d, "fixed_student_size_ratio") for d in datasets}
    )
    run.metric("r2_gap_per_dataset", {d: med(d, "dist_r2") - med(d, "rf_r2") for d in datasets})
    if run.full:
        run.metric("wide_spectrum_r", int(med("friedman1", "wide_r")))
        run.metric(
            "rf_r2_gap_wide_contribution",
            med("friedman1", "wide_contribution_r2") - med("friedman1", "rf_r2"),
        )
        run.metric("rf_r2_gap_wide_top_r", med("friedman1", "wide_top_r2") - med("friedman1", "rf_r2"))
        run.metric("gbm_r2_gap_top_r", med("friedman1", "gtop_r2") - med("friedman1", "gbm_r2"))

    sizes_all = [i["size_ratio"] for d in datasets for i in infos[d]]
    run.check("size_ratio_max", max(sizes_all))
    run.check("rf_r2_gap_friedman1", gap if run.full else gap[0])
    run.check("gbm_r2_gap_friedman1", gbm_gap if run.full else gbm_gap[0])
    run.check("rank30_train_r2", per_seed("friedman1", "rank30_r2") if run.full else f1[0]["rank30_r2"])
    if run.quick:
        run.metric("best_baseline_r2_friedman1", f1[0]["best_baseline_r2"])
        run.metric("distilled_r2_friedman1", f1[0]["dist_r2"])
        run.check("friedman1_margin_vs_best_baseline", f1[0]["margin_vs_baselines"])
    else:
        scores = [
            sum(WIN_WEIGHT[d] * (infos[d][k]["margin_vs_baselines"] >= 0) for d in datasets)
            for k in range(n_seeds)
        ]
        top_scores = [
            sum(WIN_WEIGHT[d] * (infos[d][k]["top_margin_vs_baselines"] >= 0) for d in datasets)
            for k in range(n_seeds)
        ]
        run.metric(
            "margin_vs_best_baseline_per_dataset", {d: med(d, "margin_vs_baselines") for d in datasets}
        )
        run.metric(
            "wins_per_dataset",
            {d: int(sum(i["margin_vs_baselines"] >= 0 for i in infos[d])) for d in datasets},
        )
        run.metric("datasets_beating_baselines_top_r", top_scores)
        run.check("datasets_beating_baselines", scores)

    # figure: size vs R^2 (Friedman1) and the kernel spectrum
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for m in methods:
        sel = [r for r in summary if r["dataset"] == "friedman1" and r["method"] == m and "size" in r]
        if sel:
            ax.scatter(sel[0]["size"], sel[0]["R2"], s=40)
            label = (
                m.split(" (")[0].replace("gradient boosting", "GBM").replace("spectral distilled", "spectral")
            )
            if "top-" in m:
                label += " top-r"
            elif "r=" in m and "r=20" not in m:
                label += " wide"
            ax.annotate(
                label, (sel[0]["size"], sel[0]["R2"]), fontsize=7, xytext=(3, 3), textcoords="offset points"
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
        caption="Left: model size against test R^2 on Friedman1 (medians over seeds). Right: leading "
        "eigenvalues of the forest kernel on the training points.",
    )
