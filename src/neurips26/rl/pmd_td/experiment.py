"""Reproduction of the PMD-with-TD-critics claims (arXiv 2602.10838) on random Dirichlet MDPs.

Instance (a) of the digest: S = 10, A = 4, gamma = 0.9, tau = 0.1, mu uniform, costs U[0, 1] (rewards -c),
expected TD updates with a uniform state-action sampling distribution and the critic step
``beta = 1 / lambda_max(Phi^T D_rho Phi)``. Two realisable feature maps:

- one-hot (the digest's): with uniform rho and this beta one TD step is exactly one Bellman backup, so the
  multi-step runs are exact PMD with a lagging critic;
- "conditioned": ``Phi = sqrt(SA) U diag(sigma) V^T`` with random orthogonal ``U, V`` and singular values
  ``sigma`` geometric from 1 to ``1/kappa``: the same function class, but the feature covariance has condition
  number ``kappa^2``, so a TD step is a partial, preconditioned step and the critic is genuinely approximate.

Gap G_n = <rho0, V_tau^{pi_n} - V_tau^*> (uniform rho0), V_tau^* by soft value iteration. Gaps below 1e-10 are at
the numerical floor of the evaluation and are left out of rate fits. Instance (b), the continuous-action stand-in
(51-point action grid, Gaussian RBF features), non-realisable random features and sampled TD are reported in
tables without a pass condition.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from neurips26.harness import Run, line_fit

from ..mdp import TabularMDP, random_mdp, soft_value_iteration
from .baselines import natural_policy_gradient, soft_policy_iteration, softmax_policy_gradient
from .pmd import policy_mirror_descent

FLOOR = 1e-10
TAU = 0.1
LONG_HORIZON = 10  # the single loop runs LONG_HORIZON * N policy steps before a lambda is called failing
EQUAL_BUDGET_M = 4  # m of the equal-TD-budget comparison reported at the smallest lambda


def continuous_action_mdp(
    n_states: int = 10, n_grid: int = 51, gamma: float = 0.9, *, rng: np.random.Generator
) -> tuple[TabularMDP, np.ndarray]:
    """Instance (b): actions on a 51-point grid of [-1, 1], cost ``(a - a*_s)^2 + b_s``, transitions mixing
    two random kernels with weight ``(a + 1)/2``; returns the MDP and the actions."""
    a = np.linspace(-1.0, 1.0, n_grid)
    P0 = rng.dirichlet(np.ones(n_states), size=n_states)
    P1 = rng.dirichlet(np.ones(n_states), size=n_states)
    sig = (a + 1.0) / 2.0
    P = (1 - sig)[None, :, None] * P0[:, None, :] + sig[None, :, None] * P1[:, None, :]
    a_star = rng.uniform(-0.8, 0.8, size=n_states)
    cost = (a[None, :] - a_star[:, None]) ** 2 + rng.uniform(0.0, 0.5, size=n_states)[:, None]
    return TabularMDP(P, -cost, gamma), a


def rbf_features(n_states: int, actions: np.ndarray, n_centers: int = 7, width: float = 0.3) -> np.ndarray:
    """Gaussian RBF features in the action, one block per state.

    ``Phi[(s, a), (s, k)] = exp(-(a - c_k)^2 / (2 w^2))`` with ``n_centers`` equispaced centres ``c_k``.
    """
    centers = np.linspace(actions.min(), actions.max(), n_centers)
    rbf = np.exp(-((actions[:, None] - centers[None, :]) ** 2) / (2 * width**2))
    return np.einsum("st,ak->satk", np.eye(n_states), rbf).reshape(
        n_states * len(actions), n_states * n_centers
    )


def conditioned_features(n_rows: int, kappa: float, rng: np.random.Generator) -> np.ndarray:
    """A realisable random feature map (``d = n_rows``, full rank) with singular values geometric from 1 to
    ``1/kappa``, scaled by ``sqrt(n_rows)``: under uniform rho the feature covariance has eigenvalues
    ``sigma^2`` (condition number ``kappa^2``); ``kappa = 1`` gives an orthogonal map (exact TD backups)."""
    U, _ = np.linalg.qr(rng.normal(size=(n_rows, n_rows)))
    V, _ = np.linalg.qr(rng.normal(size=(n_rows, n_rows)))
    sigma = np.geomspace(1.0, 1.0 / kappa, n_rows)
    return math.sqrt(n_rows) * (U * sigma) @ V.T


def _fit(gaps: np.ndarray, n_max: int | None = None) -> tuple[float, float]:
    """Slope and R^2 of log G_n against n over the iterations with G_n above the floor."""
    n = np.arange(len(gaps))
    keep = gaps > FLOOR
    if n_max is not None:
        keep &= n <= n_max
    if keep.sum() < 3:
        return float("nan"), float("nan")
    fit = line_fit(n[keep], np.log(gaps[keep]))
    return fit.slope, fit.r2


def _converged(gaps: np.ndarray, kl: np.ndarray) -> bool:
    """The digest's failure criteria: G not below 1e-2, or oscillation (gap rising over the last quarter)."""
    tail = gaps[-len(gaps) // 4 :]
    return bool(gaps[-1] < 1e-2 and np.all(np.isfinite(kl)) and tail[-1] <= tail[0] + 1e-9)


def _instance(S: int, A: int, rng: np.random.Generator) -> TabularMDP:
    base = random_mdp(S, A, gamma=0.9, random_state=rng)
    return TabularMDP(base.P, -rng.uniform(0.0, 1.0, size=(S, A)), 0.9)  # costs c ~ U[0, 1]


def _td(mdp, lam, n_iter, schedule, features=None, **kw):
    return policy_mirror_descent(
        mdp,
        tau=TAU,
        step_size=lam,
        n_iter=n_iter,
        critic="td",
        td_steps=schedule,
        features=features,
        log=True,
        **kw,
    )[1]


def _row(rows, name, features, lam, L, **extra):
    g = L["gap"]
    slope, r2 = _fit(g)
    rows.append(
        {
            "variant": name,
            "features": features,
            "lambda": lam,
            "G_final": float(g[-1]),
            "slope_logG": slope,
            "R2": r2,
            "max_KL": float(L["kl_max"].max()),
            "TD_steps_total": int(L["td_steps"].sum()) if len(L.get("td_steps", [])) else 0,
            **extra,
        }
    )


def _feature_study(run, mdp, Phi, label, N, lambdas, ms, rows, curves) -> dict:
    """Linear and log schedules and the single-loop sweep for one feature map (None = one-hot)."""
    out = {}
    L = _td(mdp, 0.5, 200, "linear", Phi)
    _row(rows, "TD, m_n = n + 1", label, 0.5, L)
    out["linear_gap_200"], out["linear_r2"] = float(L["gap"][200]), _fit(L["gap"], 200)[1]
    curves[f"m_n = n + 1 ({label})"] = L["gap"]
    L = _td(mdp, 0.1, 1000, "log", Phi)
    _row(rows, "TD, m_n = ceil(log(n + 2))", label, 0.1, L)
    g = L["gap"]
    out["log_ratio"] = float(1000 * g[1000] / (200 * g[200]))
    curves[f"m_n = ceil(log(n + 2)) ({label})"] = g
    # single loop: run 10 N policy steps (= 10 N TD steps) so that a failure that is only slowness at N (the
    # conditioned critic needs ~kappa^2 more TD steps) is not read as instability; the digest's N-step values
    # are read off the same curve
    n_long = LONG_HORIZON * N
    fails = []
    for lam in lambdas:
        L = _td(mdp, lam, n_long, 1, Phi)
        ok = _converged(L["gap"], L["kl_max"])
        _row(rows, "single loop (m = 1)", label, lam, L, G_N=float(L["gap"][N]), converged_at_10N=ok)
        if lam == lambdas[0]:
            out["single_gap"], out["single_kl"] = float(L["gap"][N]), float(L["kl_max"][: N + 1].max())
            out["single_gap_long"], out["single_kl_long"] = float(L["gap"][-1]), float(L["kl_max"].max())
            out["single_gap_at_budget"] = {m: float(L["gap"][m * N]) for m in ms if m * N <= n_long}
            curves[f"single loop, lambda = {lam:g} ({label})"] = L["gap"]
        out.setdefault("single_gap_long_by_lambda", []).append(float(L["gap"][-1]))
        if not ok:
            fails.append(lam)
    # equal TD budget at the first lambda: m TD steps per policy step for N policy steps against the single
    # loop's gap after m N policy steps (the same m N TD steps)
    L = _td(mdp, lambdas[0], N, EQUAL_BUDGET_M, Phi)
    _row(rows, f"constant m = {EQUAL_BUDGET_M} (equal-budget comparison)", label, lambdas[0], L)
    out["multistep_gap_equal_budget"] = float(L["gap"][-1])
    out["fails"], out["m_emp"] = fails, None
    if fails:  # the digest's rescue, at the single loop's own TD budget: 10 N TD steps, 10 N / m policy steps
        for m in ms:
            L = _td(mdp, fails[0], n_long // m, m, Phi)
            ok = _converged(L["gap"], L["kl_max"])
            _row(rows, f"constant m = {m}, {n_long} TD steps", label, fails[0], L, converged=ok)
            if ok:
                out["m_emp"] = m
                break
    return out


def run(run: Run) -> None:
    S = run.param("n_states", quick=10, full=30)
    A = run.param("n_actions", quick=4, full=6)
    N = run.param("n_iter", quick=300, full=600)
    n_mdps = run.param("n_mdps", quick=1, full=5)
    kappa = run.param("feature_condition_number", quick=10.0)
    lambdas = run.param("single_loop_lambdas", quick=[0.1, 1.0, 10.0, 100.0])
    ms = run.param("multistep_m", quick=[2, 4, 8, 16, 32])
    rng = run.rng

    rows, curves = [], {}
    per: dict[str, list] = {}
    for r in run.progress(range(n_mdps), "MDP replicates"):
        mdp = _instance(S, A, rng)
        Phi_c = conditioned_features(S * A, kappa, rng)
        _, _, pi_star = soft_value_iteration(mdp, TAU)
        kl_star = float(np.max(np.sum(pi_star * np.log(pi_star * A), axis=1)))
        keep = rows if r == 0 else []
        cur = curves if r == 0 else {}
        with run.timer("exact"):
            _, L = policy_mirror_descent(mdp, tau=TAU, step_size=1.0, n_iter=N, log=True)
        _row(keep, "exact PMD", "exact critic", 1.0, L)
        cur["exact PMD (lambda = 1)"] = L["gap"]
        per.setdefault("exact_pmd_rate", []).append(_fit(L["gap"])[0] / math.log1p(1.0 * TAU))
        with run.timer("one-hot"):
            oh = _feature_study(run, mdp, None, "one-hot", N, lambdas, ms, keep, cur)
        with run.timer("conditioned"):
            co = _feature_study(run, mdp, Phi_c, f"conditioned, kappa = {kappa:g}", N, lambdas, ms, keep, cur)
        for key, res in (("one_hot", oh), ("conditioned", co)):
            per.setdefault(f"linear_gap_200_{key}", []).append(res["linear_gap_200"])
            per.setdefault(f"linear_r2_{key}", []).append(res["linear_r2"])
            per.setdefault(f"log_ratio_{key}", []).append(res["log_ratio"])
            per.setdefault(f"single_loop_failing_lambdas_{key}", []).append(res["fails"])
            per.setdefault(f"m_emp_{key}", []).append(res["m_emp"])
        per.setdefault("single_loop_gap_long_conditioned", []).append(co["single_gap_long"])
        per.setdefault("single_loop_kl_long_conditioned", []).append(co["single_kl_long"] / kl_star)
        per.setdefault("single_loop_long_gap_max_conditioned", []).append(
            max(co["single_gap_long_by_lambda"])
        )
        per.setdefault("equal_budget_gap_single_loop_conditioned", []).append(
            co["single_gap_at_budget"][EQUAL_BUDGET_M]
        )
        per.setdefault("equal_budget_gap_multistep_conditioned", []).append(co["multistep_gap_equal_budget"])
        per.setdefault("single_loop_gap_one_hot", []).append(oh["single_gap"])
        per.setdefault("single_loop_kl_one_hot", []).append(oh["single_kl"] / kl_star)
        per.setdefault("multistep_rescues_conditioned", []).append(
            math.nan if not co["fails"] else float(co["m_emp"] is not None)
        )
        per.setdefault("single_loop_gap_conditioned", []).append(co["single_gap"])
        if r == 0:
            with run.timer("baselines"):
                _baselines(run, mdp, N, rows, curves)
            _critic_exactness(run, mdp, Phi_c)
            with run.timer("extensions"):
                _extensions(run, mdp, N, rows, rng)

    for cid in (
        "exact_pmd_rate",
        "linear_gap_200_one_hot",
        "linear_r2_one_hot",
        "log_ratio_one_hot",
        "single_loop_gap_one_hot",
        "single_loop_kl_one_hot",
        "linear_gap_200_conditioned",
        "linear_r2_conditioned",
        "log_ratio_conditioned",
        "single_loop_gap_long_conditioned",
        "single_loop_kl_long_conditioned",
        "multistep_rescues_conditioned",
    ):
        run.check(cid, per[cid])
    run.param("single_loop_horizon", LONG_HORIZON * N)
    run.param("equal_budget_m", EQUAL_BUDGET_M)
    for name in (
        "single_loop_failing_lambdas_one_hot",
        "single_loop_failing_lambdas_conditioned",
        "m_emp_conditioned",
        "single_loop_gap_conditioned",
    ):
        run.metric(name, per[name])
    # scalars for the reasons: the worst MDP for the long-horizon gap, the median for the equal-budget pair
    run.metric(
        "single_loop_long_gap_max_conditioned", float(np.max(per["single_loop_long_gap_max_conditioned"]))
    )
    run.metric("single_loop_gap_at_n_conditioned", float(np.median(per["single_loop_gap_conditioned"])))
    for name in ("equal_budget_gap_single_loop_conditioned", "equal_budget_gap_multistep_conditioned"):
        run.metric(name, float(np.median(per[name])))
    if not any(per["single_loop_failing_lambdas_conditioned"]):
        run.note(
            "conditioned features: the single loop converged for every lambda in the sweep within "
            f"{LONG_HORIZON * N} policy steps (instability not reproduced; at N = {N} it is only slower)"
        )
    if not any(per["single_loop_failing_lambdas_one_hot"]):
        run.note(
            "one-hot features: the single loop converged for every lambda in the sweep (instability not "
            "reproduced with one-hot features, whose TD steps are exact Bellman backups)"
        )
    run.table(
        rows,
        name="results",
        caption="PMD variants on instance (a) (first MDP): final gap, fitted log-gap slope, max KL",
    )
    _figure(run, curves)


def _baselines(run: Run, mdp: TabularMDP, N: int, rows: list, curves: dict) -> None:
    """The digest's named baselines with exact critics, same MDP."""
    for name, fn, kw in (
        ("soft policy iteration (lambda = inf)", soft_policy_iteration, {}),
        ("entropy-regularised NPG (Cen et al.), eta = (1-gamma)/(2 tau)", natural_policy_gradient, {}),
        ("softmax PG (Mei et al. step)", softmax_policy_gradient, {}),
        ("softmax PG, eta = 1", softmax_policy_gradient, {"learning_rate": 1.0}),
    ):
        _, L = fn(mdp, tau=TAU, n_iter=N, log=True, **kw)
        _row(
            rows, name, "exact critic", math.inf if "soft policy" in name else math.nan, {**L, "td_steps": []}
        )
        curves[name] = L["gap"]
        key = name.split(" (")[0].split(",")[0].replace(" ", "_").replace("-", "_").lower()
        run.metric(f"{key}_final_gap", float(L["gap"][-1]))
    _, L = soft_policy_iteration(mdp, tau=TAU, n_iter=N, log=True)
    run.metric(
        "soft_pi_steps_to_floor", int(np.argmax(L["gap"] <= FLOOR)) if np.any(L["gap"] <= FLOOR) else None
    )


def _critic_exactness(run: Run, mdp: TabularMDP, Phi_c: np.ndarray) -> None:
    """One expected TD step from theta = 0 at pi_0 = mu, against the Bellman backup T^mu(0) = c (the TD target
    at theta = 0, where log dpi/dmu = 0): exact for one-hot features, partial for the conditioned ones."""
    c = -mdp.R.reshape(-1)
    for key, Phi in (("one_hot", np.eye(len(c))), ("conditioned", Phi_c)):
        L = policy_mirror_descent(
            mdp, tau=TAU, step_size=1e-12, n_iter=1, critic="td", td_steps=1, features=Phi, log=True
        )[1]
        run.metric(
            f"one_step_backup_error_{key}", float(np.max(np.abs(Phi @ L["theta"] - c)) / np.max(np.abs(c)))
        )


def _extensions(run: Run, mdp: TabularMDP, N: int, rows: list, rng: np.random.Generator) -> None:
    S, A = mdp.n_states, mdp.n_actions
    # instance (b): continuous-action stand-in with the digest's Gaussian RBF features (not Q-realisable)
    mdp_b, acts = continuous_action_mdp(rng=rng)
    Phi_b = rbf_features(mdp_b.n_states, acts)
    rows_b = []
    for lam, m in run.progress([(0.1, 1), (1.0, 1), (10.0, 1), (100.0, 1), (100.0, 8)], "instance (b)"):
        L = _td(mdp_b, lam, N, m, Phi_b)
        kl = L["kl_max"]
        rows_b.append(
            {
                "lambda": lam,
                "TD steps m": m,
                "G_0": float(L["gap"][0]),
                "G_N (projected floor)": float(L["gap"][-1]),
                "max_n KL": float(kl.max()),
                "final KL": float(kl[-1]),
                "KL overshoot": float(kl.max() / kl[-1]),
                "converged (digest criterion)": _converged(L["gap"], kl),
            }
        )
    run.table(
        rows_b, name="continuous_action", caption="Instance (b): 51-point action grid, Gaussian RBF features"
    )
    run.metric("instance_b_gap_floor_lambda_0.1", rows_b[0]["G_N (projected floor)"])
    run.metric("instance_b_kl_overshoot", [r["KL overshoot"] for r in rows_b])
    # non-realisable random features (d = SA/2): the limit is a projected fixed point, not V*
    Phi = rng.normal(size=(S * A, S * A // 2))
    for sched, name in ((1, "single loop"), ("linear", "m_n = n + 1")):
        L = _td(mdp, 1.0 if sched == 1 else 0.5, N if sched == 1 else 200, sched, Phi)
        _row(
            rows,
            f"{name}, random features d = SA/2 (not realisable)",
            "random, d = SA/2",
            1.0 if sched == 1 else 0.5,
            L,
        )
        run.metric(f"random_feature_gap_floor_{'single' if sched == 1 else 'linear'}", float(L["gap"][-1]))
    # sampled (minibatch) TD instead of the expected update the paper analyses
    L = _td(
        mdp,
        0.5,
        N,
        10,
        None,
        td_mode="sampled",
        td_batch_size=256,
        td_step_size=S * A / 4.0,
        random_state=run.seed,
    )
    _row(rows, "sampled TD, m = 10, batch 256 (extension)", "one-hot", 0.5, L)
    run.metric("sampled_td_gap_floor", float(L["gap"][-1]))


def _figure(run: Run, curves: dict) -> None:
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name, gaps in curves.items():
        n = np.arange(len(gaps))
        keep = gaps > FLOOR
        style = {"color": "k", "ls": "--", "zorder": 5} if name.startswith("exact PMD") else {}
        ax.semilogy(n[keep], gaps[keep], label=name, **style)
    ax.set_xlabel("policy step n")
    ax.set_ylabel("optimality gap G_n")
    ax.set_xlim(0, 1000)
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    run.figure(fig, "gap_vs_iteration", caption="Optimality gap against policy step (log scale), first MDP")
