"""Reproduction of the grouped-feature FDR claims with block mirror statistics (digest ``grouped-fdr-mirror``).

A. Grouped linear (the main gate): G = 40 AR(1) series (phi = 0.6) sharing a common AR(1) factor (cross-
   correlation 0.3), blocks of b = 4 lags, n = 600, 8 non-null groups with ``beta_g = s (1, -0.8, 0.6, -0.4) /
   norm`` and a random sign, q = 0.1, 100 repetitions (quick: 30). ``s`` is set once from a pilot design (its
   own seed) so that the expected |t| of the individual lag coefficients averages 2.0, the centre of the
   digest's "about 1.5 to 2.5"; the sensitivity row uses the strongest lag at t = 2.5 instead (not a gate).
   Methods: block GM (ours, norm and whitened statistics, GM and "+1" thresholds), coordinate-wise GM (a group
   is selected if any of its lags is), the max-over-members aggregation, group BH on partial F-tests, and
   knockpy group knockoffs when knockpy is installed.
B. Semi-real: statsmodels' macrodata (12 quarterly US series, made stationary: log-differences of the level
   series, first differences of the rates), 4 lags each, y from 3 fixed series plus Gaussian noise, 50 noise
   draws (fresh mirror draws each time).
C. Neural (full mode only): 15 AR(1) series x 5 lags, n = 1000, y = sum of tanh(w_g^T lags) over 5 series plus
   Gaussian noise whose s.d. is set once on a pilot draw so that the true lags' linearised |t| average 2; an MLP (~1.8k parameters) on all mirrored blocks; block Permutation SHAP (64 permutations,
   200 explained samples); 20 repetitions. Baseline: the same pipeline with b = 1 players (NGM route).
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from neurips26.harness import Run

from .block_mirror import (
    GroupedMirrorFDR,
    benjamini_hochberg,
    block_mirror_statistics,
    gaussian_mirror_statistics,
    group_partial_f_pvalues,
    lagged_design,
    mirror_threshold,
)

Q = 0.1
PATTERN = np.array([1.0, -0.8, 0.6, -0.4]) / np.linalg.norm([1.0, -0.8, 0.6, -0.4])
G_A, LAGS_A, N_A, K_A = 40, 4, 600, 8
MACRO_SERIES = [
    "realgdp",
    "realcons",
    "realinv",
    "realgovt",
    "realdpi",
    "cpi",
    "m1",
    "tbilrate",
    "unemp",
    "pop",
    "infl",
    "realint",
]
MACRO_LOG_DIFF = {"realgdp", "realcons", "realinv", "realgovt", "realdpi", "cpi", "m1", "pop"}


# --------------------------------------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------------------------------------
def factor_ar_series(
    rng: np.random.Generator, T: int, G: int, phi: float = 0.6, rho: float = 0.3
) -> np.ndarray:
    """``G`` unit-variance AR(1) series (coefficient ``phi``) loading ``sqrt(rho)`` on one common AR(1) factor."""
    burn = 100
    e = rng.standard_normal((T + burn, G + 1))
    s = np.empty_like(e)
    s[0] = e[0]
    for t in range(1, T + burn):  # a recursion in time; vectorised over series
        s[t] = phi * s[t - 1] + np.sqrt(1 - phi**2) * e[t]
    s = s[burn:]
    return np.sqrt(rho) * s[:, [G]] + np.sqrt(1 - rho) * s[:, :G]


def expected_lag_t(rng: np.random.Generator) -> np.ndarray:
    """Per-lag |t| of ``beta_g = PATTERN`` (s = 1, sigma = 1) on a pilot design, averaged over the groups."""
    X, _ = lagged_design(factor_ar_series(rng, N_A + LAGS_A, G_A), LAGS_A)
    Xc = X - X.mean(0)
    se = np.sqrt(np.diag(np.linalg.inv(Xc.T @ Xc))).reshape(G_A, LAGS_A).mean(0)
    return np.abs(PATTERN) / se


def simulate_a(rng: np.random.Generator, s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, set[int]]:
    X, groups = lagged_design(factor_ar_series(rng, N_A + LAGS_A, G_A), LAGS_A)
    true = rng.choice(G_A, K_A, replace=False)
    beta = np.zeros(G_A * LAGS_A)
    for g in true:
        beta[groups == g] = s * PATTERN * rng.choice([-1.0, 1.0])
    y = X @ beta + rng.standard_normal(len(X))
    return X, y, groups, set(true.tolist())


def macro_design() -> tuple[np.ndarray, np.ndarray]:
    """Stationary transforms of the 12 macrodata series, standardised, and their 4-lag blocks."""
    import statsmodels.api as sm

    data = sm.datasets.macrodata.load_pandas().data
    cols = []
    for name in MACRO_SERIES:
        x = data[name].to_numpy(dtype=float)
        cols.append(np.diff(np.log(x)) if name in MACRO_LOG_DIFF else np.diff(x))
    S = np.column_stack(cols)
    S = (S - S.mean(0)) / S.std(0)
    return lagged_design(S, 4)


def _signal_c(rng: np.random.Generator, G: int = 15, L: int = 5, n: int = 1000, k: int = 5):
    X, groups = lagged_design(factor_ar_series(rng, n + L, G, rho=0.0), L)
    true = rng.choice(G, k, replace=False)
    f = np.zeros(len(X))
    for g in true:
        w = rng.standard_normal(L)
        f += np.tanh(X[:, groups == g] @ (w / np.linalg.norm(w)))
    return X, f, groups, set(true.tolist())


def calibrate_noise_c(rng: np.random.Generator) -> float:
    """Noise s.d. of part C from a pilot draw: the true lags' linearised OLS |t| average 2 (the rule of A)."""
    X, f, groups, true = _signal_c(rng)
    Xc = X - X.mean(0)
    S = np.linalg.inv(Xc.T @ Xc)
    b = S @ Xc.T @ (f - f.mean())
    mask = np.isin(groups, list(true))
    return float(np.mean(np.abs(b[mask])) / np.mean(np.sqrt(np.diag(S))[mask]) / 2.0)


def simulate_c(rng: np.random.Generator, sigma: float):
    """Part C data: 15 AR(1) series x 5 lags, n = 1000, y = sum of tanh(w_g^T lags) over 5 series + noise."""
    X, f, groups, true = _signal_c(rng)
    return X, f + sigma * rng.standard_normal(len(X)), groups, true


# --------------------------------------------------------------------------------------------------------
# methods on one data set
# --------------------------------------------------------------------------------------------------------
def _fdp_tpp(selected: set[int], true: set[int]) -> tuple[float, float]:
    return len(selected - true) / max(1, len(selected)), len(selected & true) / len(true)


def _knockpy_groups(X, y, groups, seed) -> set[int] | None:
    try:
        import knockpy  # noqa: F401
        from knockpy.knockoff_filter import KnockoffFilter
    except ImportError:
        return None
    np.random.seed(seed)  # noqa: NPY002 -- knockpy draws from the global numpy stream
    kf = KnockoffFilter(ksampler="gaussian", fstat="lasso", knockoff_kwargs={"method": "mvr"})
    rej = kf.forward(X=X, y=y, groups=groups + 1, fdr=Q)
    return {int(g) for g in np.unique(groups[np.asarray(rej, dtype=bool)])}


def compare_methods(X, y, groups, true, seed, with_knockpy: bool) -> dict[str, tuple[float, float]]:
    """Group-level (FDP, TPP) of every method on one data set; every mirror uses the same Z draw."""
    labels = np.unique(groups)
    out: dict[str, tuple[float, float]] = {}
    for name, kw in {
        "block GM (ours, norm)": {},
        "block GM (ours, whitened)": {"statistic": "whitened"},
        "block GM (ours, norm, +1 threshold)": {"offset": 1},
    }.items():
        est = GroupedMirrorFDR(Q, random_state=seed, **kw).fit(X, y, groups)
        out[name] = _fdp_tpp(set(est.selected_groups_.tolist()), true)
    # coordinate-wise GM (b = 1 block mirror == GM) on the same Z
    M = block_mirror_statistics(X, y, np.arange(X.shape[1]), random_state=seed)
    out["coordinate GM (any lag)"] = _fdp_tpp(set(groups[M >= mirror_threshold(M, Q)].tolist()), true)
    Mg = np.array([M[groups == g][np.argmax(np.abs(M[groups == g]))] for g in labels])
    out["coordinate GM (max-|M| member)"] = _fdp_tpp(
        set(labels[Mg >= mirror_threshold(Mg, Q)].tolist()), true
    )
    rej = benjamini_hochberg(group_partial_f_pvalues(X, y, groups), Q)
    out["group BH (partial F)"] = _fdp_tpp(set(labels[rej].tolist()), true)
    if with_knockpy:
        sel = _knockpy_groups(X, y, groups, seed)
        if sel is not None:
            out["knockpy group knockoffs"] = _fdp_tpp(sel, true)
    return out


def _summarise(records: list[dict[str, tuple[float, float]]], part: str) -> list[dict]:
    rows = []
    names = list(dict.fromkeys(k for r in records for k in r))
    for name in names:
        v = np.array([r[name] for r in records if name in r])
        rows.append(
            {
                "part": part,
                "method": name,
                "FDR": v[:, 0].mean(),
                "FDR s.e.": v[:, 0].std(ddof=1) / np.sqrt(len(v)),
                "power": v[:, 1].mean(),
                "reps": len(v),
            }
        )
    return rows


def _row(rows: list[dict], method: str) -> dict:
    return next(r for r in rows if r["method"] == method)


# --------------------------------------------------------------------------------------------------------
# the experiment
# --------------------------------------------------------------------------------------------------------
def run(run: Run) -> None:
    run.expect(
        "partial",
        reason=(
            "Only the exact b = 1 reduction to the Gaussian Mirror reproduces (max |diff| ~ 1e-15). With the digest's "
            "'+1'-free GM threshold the block mirror's group FDR exceeds the gates (quick, seed 0: A 0.137 > 0.12; "
            "B 0.49 > 0.15), although the null statistics are exactly symmetric (tested) and the '+1' threshold "
            "controls FDR (A: 0.06) at a large loss of power: with few discoveries one positive null above the "
            "threshold is selected with FDP-estimate 0. In B the unwhitened norm statistic is dominated by groups "
            "whose lags are nearly collinear (large coefficient variance), so the top |M_g| are mostly nulls. The "
            "power gain over coordinate-wise GM is absent (A: -0.04 vs the +0.10 gate; t_max = 2.5 sensitivity row "
            "~0): individual lags at t ~ 2-3 already let coordinate GM find most groups, and coordinate GM's own FDR "
            "(0.19) is above q. Group BH on partial F-tests is the strongest method here (FDR 0.04, power 0.56). "
            "Full mode (100/50/20 repetitions): A FDR 0.18, power gain -0.02; B FDR 0.27; C (neural) FDR 0.14 "
            "and power 0.80 pass, but its gain over b = 1 players is -0.02. "
            "The paper's text was unavailable; its block construction and any refinements are reconstructed."
        ),
    )
    reps_a = run.pick(quick=30, full=100)
    reps_b = 50
    seeds = run.seeds(reps_a + reps_b + 40)
    try:
        import knockpy  # noqa: F401

        with_knockpy = True
    except ImportError:
        with_knockpy = False
        run.note(
            "knockpy is not installed: the group-knockoff reference row is omitted (pip install knockpy)"
        )

    # ---- A: calibrate s on a pilot design (own seed), then the gate ----------------------------------
    t_unit = expected_lag_t(np.random.default_rng(seeds[-1]))
    s_main = 2.0 / t_unit.mean()
    s_sens = 2.5 / t_unit.max()
    run.metric("A: expected lag |t| at s_main", t_unit * s_main)
    run.metric("A: s_main, s_sensitivity", [s_main, s_sens])
    run.note(
        f"A: s = {s_main:.3f} gives expected lag |t| = {np.round(t_unit * s_main, 2).tolist()} (mean 2.0); "
        f"the sensitivity row uses s = {s_sens:.3f} (strongest lag t = 2.5)"
    )
    recs, recs_sens, M_null, M_alt = [], [], [], []
    with run.timer("A"):
        for r in run.progress(range(reps_a), "A: grouped linear"):
            rng = np.random.default_rng(seeds[r])
            X, y, groups, true = simulate_a(rng, s_main)
            recs.append(compare_methods(X, y, groups, true, seeds[r], with_knockpy and r < 10))
            M = GroupedMirrorFDR(Q, random_state=seeds[r]).fit(X, y, groups).mirror_statistics_
            is_true = np.isin(np.arange(G_A), list(true))
            M_null.extend(M[~is_true]), M_alt.extend(M[is_true])
            Xs, ys, gs, ts = simulate_a(np.random.default_rng(seeds[r] + 1), s_sens)
            est = GroupedMirrorFDR(Q, random_state=seeds[r]).fit(Xs, ys, gs)
            Ms = block_mirror_statistics(Xs, ys, np.arange(Xs.shape[1]), random_state=seeds[r])
            recs_sens.append(
                {
                    "block GM (ours, norm)": _fdp_tpp(set(est.selected_groups_.tolist()), ts),
                    "coordinate GM (any lag)": _fdp_tpp(set(gs[Ms >= mirror_threshold(Ms, Q)].tolist()), ts),
                }
            )
    rows_a = _summarise(recs, "A")
    rows_sens = _summarise(recs_sens, "A (t_max = 2.5)")
    if with_knockpy:
        run.note(
            "knockpy group knockoffs ran on the first 10 repetitions of A only (its SDP/MVR solve is slow)"
        )

    # ---- A: b = 1 reproduces GM exactly for the same z draws --------------------------------------------
    rng = np.random.default_rng(seeds[0])
    X, y, groups, _ = simulate_a(rng, s_main)
    Xs = X[:, :60]  # 60 columns keep the p explicit GM fits cheap; the identity does not depend on p
    M_block = block_mirror_statistics(Xs, y, np.arange(Xs.shape[1]), random_state=seeds[0])
    M_gm = gaussian_mirror_statistics(Xs, y, random_state=seeds[0])
    max_diff = float(np.max(np.abs(M_block - M_gm)))

    # ---- B: macrodata ----------------------------------------------------------------------------------
    Xb, gb = macro_design()
    rng_b = np.random.default_rng(seeds[reps_a])
    true_b = set(rng_b.choice(12, 3, replace=False).tolist())
    t_unit_b = np.tile(np.abs(PATTERN), 12) / np.sqrt(
        np.diag(np.linalg.inv((Xb - Xb.mean(0)).T @ (Xb - Xb.mean(0))))
    )
    beta_b = np.zeros(Xb.shape[1])
    for g in sorted(true_b):
        s_g = 2.0 / t_unit_b[gb == g].mean()  # same rule as A: mean expected lag |t| = 2
        beta_b[gb == g] = s_g * PATTERN * rng_b.choice([-1.0, 1.0])
    recs_b = []
    with run.timer("B"):
        for r in run.progress(range(reps_b), "B: macrodata"):
            rng = np.random.default_rng(seeds[reps_a + r])
            yb = Xb @ beta_b + rng.standard_normal(len(Xb))
            recs_b.append(compare_methods(Xb, yb, gb, true_b, seeds[reps_a + r], False))
    rows_b = _summarise(recs_b, "B (macrodata)")
    run.note(
        f"B: n = {len(Xb)} quarters, 12 series x 4 lags; true series "
        f"{[MACRO_SERIES[g] for g in sorted(true_b)]}"
    )

    # ---- C: neural (full mode) -------------------------------------------------------------------------
    rows_c: list[dict] = []
    if run.full:
        from .neural_mirror import NeuralBlockMirrorFDR

        sigma_c = calibrate_noise_c(np.random.default_rng(seeds[-2]))
        run.note(
            f"C: noise s.d. {sigma_c:.2f} (pilot rule: the true lags' linearised |t| average 2, as in A)"
        )
        recs_c = []
        with run.timer("C"):
            for r in run.progress(range(20), "C: neural"):
                sd = seeds[reps_a + reps_b + r]
                X, y, groups, true = simulate_c(np.random.default_rng(sd), sigma_c)
                rec = {}
                for name, players in (
                    ("neural block mirror (ours)", "block"),
                    ("neural coordinate", "coordinate"),
                ):
                    est = NeuralBlockMirrorFDR(Q, players=players, random_state=sd).fit(X, y, groups)
                    rec[name] = _fdp_tpp(set(est.selected_groups_.tolist()), true)
                recs_c.append(rec)
        rows_c = _summarise(recs_c, "C (neural)")
    else:
        run.note("quick mode: part A with 30 repetitions and part B; part C (neural) runs in full mode only")

    run.table(
        rows_a + rows_sens + rows_b + rows_c, name="results", caption="Group-level FDR and power, q = 0.1"
    )

    # ---- checks (digest thresholds) ----------------------------------------------------------------------
    blk, crd = _row(rows_a, "block GM (ours, norm)"), _row(rows_a, "coordinate GM (any lag)")
    power_gain = blk["power"] - crd["power"]
    run.metric("A: block GM power - coordinate GM power", power_gain)
    run.check("A: block-GM FDR", blk["FDR"], "<=", 0.12)
    run.check("A: block-GM power - coordinate-wise GM power", power_gain, ">=", 0.10)
    run.check("A: b = 1 block mirror vs GM, max |diff|", max_diff, "<", 1e-10)
    run.check("B: block-GM FDR on macrodata", _row(rows_b, "block GM (ours, norm)")["FDR"], "<=", 0.15)
    if rows_c:
        nb, nc = _row(rows_c, "neural block mirror (ours)"), _row(rows_c, "neural coordinate")
        run.check("C: neural block mirror FDR", nb["FDR"], "<=", 0.15)
        run.check("C: neural block mirror power", nb["power"], ">=", 0.5)
        run.check("C: neural block power - coordinate power", nb["power"] - nc["power"], ">=", 0.10)

    # ---- figure -------------------------------------------------------------------------------------------
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    bins = np.linspace(*np.percentile(np.concatenate([M_null, M_alt]), [0.5, 99.5]), 50)
    axes[0].hist(M_null, bins=bins, alpha=0.6, density=True, label="null groups")
    axes[0].hist(M_alt, bins=bins, alpha=0.6, density=True, label="non-null groups")
    axes[0].set(title="A: block mirror statistics M_g (norm)", xlabel="M_g")
    axes[0].legend()
    show = rows_a + rows_b + rows_c
    ypos = np.arange(len(show))
    axes[1].barh(ypos - 0.2, [r["FDR"] for r in show], height=0.4, label="FDR")
    axes[1].barh(ypos + 0.2, [r["power"] for r in show], height=0.4, label="power")
    axes[1].axvline(Q, color="k", ls="--", lw=1)
    axes[1].set_yticks(ypos, [f"{r['part']}: {r['method']}" for r in show], fontsize=7)
    axes[1].invert_yaxis()
    axes[1].legend()
    axes[1].set(title="group-level FDR and power (q = 0.1)")
    run.figure(fig, "fdr_power", caption="Null vs non-null block mirror statistics; FDR and power per method")
