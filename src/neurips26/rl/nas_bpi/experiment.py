"""Reproduction check for the non-asymptotic analysis of Navigate-and-Stop (MDP-NaS).

Instance (a): a designed 4-state / 2-action chain, gamma = 0.5. Action 1 ("forward") advances with probability
0.55 (otherwise back to state 0), action 0 returns to state 0; at the last state, forward stays with
probability 0.65. The informative pair (3, forward) is stochastic and sits at the end of the chain, so
uniform navigation rarely visits it; all gaps are >= 0.4. Family (b) M_p: the same chain with the only
transition into state 3 of probability p. Data set (c): random Dirichlet MDPs (full mode).

Each NaS trajectory records the first crossing of the stopping threshold for every delta (the sampling rule
does not depend on delta), so the deltas share common random numbers. Uniform navigation is capped at ``cap``
steps; a capped run contributes ``cap`` (a lower bound on its stopping time), which can only understate NaS's
advantage. ``U*`` uses the one-step span over all states (the digest's); the support-restricted variant of the
first version is recomputed here only to report how much of the old verdict rested on it.
"""

from __future__ import annotations

import math
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.exceptions import ConvergenceWarning

from neurips26.harness import Run, line_fit

from ..mdp import TabularMDP, random_mdp, value_iteration
from .characteristic_time import _policy_gaps, _u_terms, bound_terms, characteristic_time, oracle_allocation
from .navigate_and_stop import NavigateAndStop, TabularEnv

REWARDS = np.array([[0.0, 0.7], [0.1, 0.9], [0.1, 0.5], [0.7, 1.0]])


def designed_mdp(
    p: float | None = None, *, q: float = 0.55, stay: float = 0.65, gamma: float = 0.5
) -> TabularMDP:
    """Instance (a) (``p=None``) or the connectivity family (b): the transition into state 3 has
    probability ``p``."""
    P = np.zeros((4, 2, 4))
    for s in range(3):
        prob = p if (s == 2 and p is not None) else q
        P[s, 0, 0] = 1.0
        P[s, 1, s + 1] = prob
        P[s, 1, 0] += 1.0 - prob
    P[3, 0, 0] = 1.0
    P[3, 1, 3] = stay
    P[3, 1, 0] = 1.0 - stay
    return TabularMDP(P, REWARDS, gamma)


def _uniform_stationary(mdp: TabularMDP) -> np.ndarray:
    P_u = mdp.P.mean(axis=1)
    vals, vecs = np.linalg.eig(P_u.T)
    v = np.real(vecs[:, np.argmin(np.abs(vals - 1.0))])
    v = v / v.sum()
    return np.repeat(v[:, None] / mdp.n_actions, mdp.n_actions, axis=1)


def _u_star_support_span(mdp: TabularMDP) -> float:
    """U* with the one-step span restricted to the support of p(.|s,a) (the first version's formula, kept only
    to measure what the old verdict rested on): pairs with H = 0 then need no samples."""
    import cvxpy as cp

    V, Q, _ = value_iteration(mdp, tol=1e-12)
    S, A = Q.shape
    _, opt, gaps, gap_min = _policy_gaps(V, Q)
    H, H_star = _u_terms(mdp.P, V, opt, gaps, gap_min, mdp.gamma, False, support_span=True)
    need = (~opt & (H > 0)).reshape(-1)
    flow = np.kron(np.eye(S), np.ones((1, A))) - mdp.P.reshape(S * A, S).T
    if not need.any():  # U = H_star / min_s w(s, pi*(s)): an LP for the largest minimum optimal-pair weight
        from scipy.optimize import linprog

        n = S * A
        c = np.zeros(n + 1)
        c[-1] = -1.0  # variables (w, v): maximise v
        rows = np.zeros((S, n + 1))
        rows[np.arange(S), np.flatnonzero(opt.reshape(-1))] = -1.0
        rows[:, -1] = 1.0  # v - w(s, pi*(s)) <= 0
        eq = np.vstack([np.append(np.ones(n), 0.0), np.hstack([flow, np.zeros((S, 1))])])
        res = linprog(
            c,
            A_ub=rows,
            b_ub=np.zeros(S),
            A_eq=eq,
            b_eq=np.append(1.0, np.zeros(S)),
            bounds=[(0, None)] * (n + 1),
            method="highs",
        )
        return float(H_star / res.x[-1])
    w = cp.Variable(S * A, nonneg=True)
    inv = cp.inv_pos(w)
    obj = H_star * cp.max(inv[opt.reshape(-1)]) + cp.max(cp.multiply(H.reshape(-1)[need], inv[need]))
    prob = cp.Problem(cp.Minimize(obj), [cp.sum(w) == 1, flow @ w == 0])
    prob.solve(solver="CLARABEL")
    return float(prob.value)


def _runs(run: Run, env, deltas: list[float], seeds: list[int], desc: str, **kw) -> list[NavigateAndStop]:
    # a run censored at its cap is recorded as such (censored_at_cap, uniform lower bounds), not warned about
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return [
            NavigateAndStop(min(deltas), monitor_deltas=tuple(deltas), random_state=seed, **kw).fit(env)
            for seed in run.progress(seeds, desc)
        ]


def _row(name: str, threshold: str, d: float, taus: np.ndarray, errors: int, U: float, **extra) -> dict:
    return {
        "method": name,
        "threshold": threshold,
        "delta": d,
        "runs": len(taus),
        "errors": errors,
        "mean_tau": float(taus.mean()),
        "sd_tau": float(taus.std(ddof=1)) if len(taus) > 1 else 0.0,
        "R(delta)": float(taus.mean() / (U * math.log(1 / d))),
        **extra,
    }


def run(run: Run) -> None:
    deltas = run.param("deltas", quick=[0.1, 0.01], full=[0.1, 0.01, 1e-3, 1e-4])
    n_seeds = run.param("n_seeds", quick=5, full=30)
    n_base = run.param("n_baseline_seeds", quick=3, full=10)
    cap = run.param("uniform_cap", quick=200_000, full=600_000)
    K = run.param("recompute_every", quick=1000, full=200)
    T = run.param("stop_every", quick=10)
    d_cmp = 0.01

    mdp = designed_mdp()
    terms = bound_terms(mdp)
    w_star, U_star = oracle_allocation(mdp)
    U_unif = characteristic_time(mdp, _uniform_stationary(mdp), terms=terms)
    U_support = _u_star_support_span(mdp)
    run.metric("u_star", U_star)
    run.metric("u_star_support_span", U_support)
    run.metric("u_uniform_stationary", U_unif)
    run.metric("minimum_gap", terms.gap_min)
    run.metric("h_star", terms.H_star)
    run.metric("h_suboptimal_min", float(terms.H[~terms.optimal_mask].min()))
    pi_star = terms.policy
    seeds = run.seeds(n_seeds)

    rows = []
    with run.timer("NaS"):
        nas = _runs(
            run,
            mdp,
            deltas,
            seeds,
            "NaS (theoretical threshold)",
            recompute_every=K,
            stop_every=T,
            max_steps=10**7,
        )
    taus = {
        d: np.array([e.crossing_times_.get(d, e.stopping_time_) for e in nas], dtype=float) for d in deltas
    }
    excess = []
    for d in deltas:
        R = len(nas)
        errors = sum(
            int(d not in e.crossing_policies_ or np.any(e.crossing_policies_[d] != pi_star)) for e in nas
        )
        allowance = d * R + 3 * math.sqrt(d * R)
        excess.append(errors - allowance)
        rows.append(_row("NaS", "theoretical", d, taus[d], errors, U_star, allowance=allowance))
        run.metric(f"errors_delta_{d:g}", errors)
    run.check("delta_correctness", max(excess))
    x = np.log(1.0 / np.array(deltas))
    means = np.array([taus[d].mean() for d in deltas])
    slope = line_fit(x, means).slope
    run.metric("slope", slope)
    run.metric("slope_over_u_star_support_span", slope / U_support)
    run.metric("mean_tau_nas_delta_0.01", float(taus[d_cmp].mean()))
    run.check("slope_over_u_star", slope / U_star)
    # the delta-independent part of the theoretical threshold at the stop (review: it dominates tau)
    share = []
    for e in nas:
        N = e.counts_.sum(axis=2)
        k = N.shape[0] - 1
        base = k * float(np.sum(1 + np.log1p(N / k)))
        share.append(base / (math.log(1 / min(deltas)) + base))
    run.metric("threshold_delta_independent_share", float(np.median(share)))
    run.metric("overhead_R_delta_min", float(taus[min(deltas)].mean() / (U_star * math.log(1 / min(deltas)))))

    with run.timer("practical threshold"):
        prac = _runs(
            run,
            mdp,
            deltas,
            seeds,
            "NaS (practical threshold)",
            threshold="practical",
            recompute_every=K,
            stop_every=T,
            max_steps=10**7,
        )
    prac_means = []
    for d in deltas:
        t_ = np.array([e.crossing_times_[d] for e in prac], dtype=float)
        prac_means.append(t_.mean())
        err = sum(int(np.any(e.crossing_policies_[d] != pi_star)) for e in prac)
        rows.append(_row("NaS", "practical log((1+log t)/delta) (heuristic)", d, t_, err, U_star))
    run.metric("practical_slope_over_u_star", line_fit(x, prac_means).slope / U_star)

    with run.timer("baselines"):
        unif = _runs(
            run,
            mdp,
            [d_cmp],
            seeds[:n_base],
            "uniform navigation",
            exploration="uniform",
            stop_every=T,
            max_steps=cap,
        )
        orac = _runs(
            run,
            mdp,
            [d_cmp],
            seeds[:n_base],
            "oracle tracking",
            exploration="oracle",
            stop_every=T,
            max_steps=10**7,
        )
        base = [("uniform navigation", unif), ("oracle w* tracking (idealised)", orac)]
        if run.full:
            base.append(
                (
                    "NaS without forced exploration",
                    _runs(
                        run,
                        mdp,
                        [d_cmp],
                        seeds[:n_base],
                        "no forced exploration",
                        exploration="no_forced",
                        recompute_every=K,
                        stop_every=T,
                        max_steps=10**7,
                    ),
                )
            )
            # the environment interface: transitions (and the support's path length) unknown, m = S - 1
            base.append(
                (
                    "NaS on TabularEnv (gymnasium-style, unknown support)",
                    _runs(
                        run,
                        TabularEnv(mdp),
                        [d_cmp],
                        seeds[:n_base],
                        "NaS via the environment interface",
                        gamma=mdp.gamma,
                        recompute_every=K,
                        stop_every=T,
                        max_steps=10**7,
                    ),
                )
            )
    for name, ests in base:
        t_ = np.array([e.stopping_time_ for e in ests], dtype=float)
        err = sum(int(np.any(e.policy_ != pi_star)) for e in ests)
        rows.append(
            _row(
                name, "theoretical", d_cmp, t_, err, U_star, censored_at_cap=sum(not e.stopped_ for e in ests)
            )
        )
    unif_lb = float(np.mean([e.stopping_time_ for e in unif]))
    run.metric("uniform_censored_at_cap", sum(not e.stopped_ for e in unif))
    run.metric("mean_tau_uniform_lower_bound", unif_lb)
    run.metric("mean_tau_oracle", float(np.mean([e.stopping_time_ for e in orac])))
    run.check("navigation_matters", unif_lb / taus[d_cmp].mean())
    run.table(
        rows,
        name="results",
        caption="Instance (a): stopping times and errors (R(delta) = E[tau] / (U* log 1/delta))",
    )

    if run.full:
        _connectivity(run, K, T)
        _random_mdps(run, K, T)
    _figure(run, x, taus, deltas, prac_means, U_star, unif_lb, d_cmp)


def _connectivity(run: Run, K: int, T: int) -> None:
    """Family (b): R(0.01) = E[tau] / (U*(M_p) log 100) as p shrinks."""
    ps = run.param("connectivity_p", quick=[0.5, 0.25, 0.1, 0.05])
    n_seeds_p = run.param("connectivity_seeds", quick=10)
    d_cmp = 0.01
    conn_rows, Rm, Rci = [], [], []
    with run.timer("connectivity"):
        for p in ps:
            mp = designed_mdp(p)
            _, U_p = oracle_allocation(mp)
            ests = _runs(
                run,
                mp,
                [d_cmp],
                run.seeds(n_seeds_p + 1)[1:],
                f"connectivity p={p}",
                recompute_every=K,
                stop_every=T,
                max_steps=10**7,
            )
            r = np.array([e.stopping_time_ for e in ests], dtype=float) / (U_p * math.log(1 / d_cmp))
            Rm.append(float(r.mean()))
            Rci.append(float(1.96 * r.std(ddof=1) / math.sqrt(len(r))))
            conn_rows.append(
                {
                    "p": p,
                    "U*(M_p)": U_p,
                    "mean_tau": float(r.mean() * U_p * math.log(1 / d_cmp)),
                    "R(0.01)": Rm[-1],
                    "ci95": Rci[-1],
                    "errors": sum(int(np.any(e.policy_ != bound_terms(mp).policy)) for e in ests),
                }
            )
    inv = [(i, Rm[i] - Rm[i + 1]) for i in range(len(ps) - 1) if Rm[i + 1] < Rm[i]]
    run.metric("connectivity_R", Rm)
    run.check("connectivity_inversions", len(inv))
    run.check("connectivity_inversions_outside_ci", sum(1 for i, diff in inv if diff > Rci[i] + Rci[i + 1]))
    run.table(conn_rows, name="connectivity", caption="Family (b): overhead R(0.01) against connectivity p")


def _random_mdps(run: Run, K: int, T: int) -> None:
    """Data set (c): random Dirichlet MDPs (ties rejected), practical threshold (heuristic), one run each."""
    n_mdps = run.param("random_mdps", quick=20)
    cap_c = run.param("random_mdp_cap", quick=300_000)  # near-ties make U* (and tau) huge: cap and report
    gen = np.random.default_rng(run.seeds(3)[2])
    rows = []
    with run.timer("random MDPs"):
        while len(rows) < n_mdps:
            m = random_mdp(4, 2, gamma=0.5, random_state=gen)
            try:
                _, U = oracle_allocation(m)
            except (ValueError, RuntimeError):  # tie in Q* (D_min < 1e-3) or no full-support allocation
                continue
            pi = bound_terms(m).policy
            with warnings.catch_warnings():  # a censored run is recorded (censored_at_cap)
                warnings.simplefilter("ignore", ConvergenceWarning)
                e = NavigateAndStop(
                    0.1,
                    threshold="practical",
                    recompute_every=K,
                    stop_every=T,
                    max_steps=cap_c,
                    random_state=int(gen.integers(2**31 - 1)),
                ).fit(m)
            rows.append(
                {
                    "mdp": len(rows),
                    "U*": U,
                    "tau": e.stopping_time_,
                    "R(0.1)": e.stopping_time_ / (U * math.log(10)),
                    "error": int(np.any(e.policy_ != pi)),
                    "censored_at_cap": not e.stopped_,
                }
            )
    run.metric("random_mdps_errors_practical", sum(r["error"] for r in rows if not r["censored_at_cap"]))
    run.metric("random_mdps_censored", sum(r["censored_at_cap"] for r in rows))
    run.table(
        rows,
        name="random_mdps",
        caption="Data set (c): random Dirichlet MDPs, practical threshold (heuristic), delta = 0.1",
    )


def _figure(run, x, taus, deltas, prac_means, U_star, unif_lb, d_cmp) -> None:
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    means = np.array([taus[d].mean() for d in deltas])
    sds = np.array([taus[d].std(ddof=1) for d in deltas])
    prac = np.array(prac_means)
    ax.errorbar(x, means, yerr=sds, marker="o", label="NaS, theoretical threshold")
    ax.plot(x, prac, marker="s", label="NaS, practical threshold (heuristic)")
    ax.plot(x, U_star * x, "k--", label="U*(M) log(1/delta)")
    ax.axhline(unif_lb, color="tab:red", ls=":", label=f"uniform navigation, delta={d_cmp} (lower bound)")
    ax.set_xlabel("log(1/delta)")
    ax.set_ylabel("stopping time tau")
    ax.set_yscale("log")
    ax.legend(fontsize=7)
    dx = x - x[0]  # the delta-dependent part: tau(delta) - tau(delta_max) on common random numbers
    ax2.plot(dx, means - means[0], marker="o", label="NaS, theoretical threshold")
    ax2.plot(dx, prac - prac[0], marker="s", label="NaS, practical threshold (heuristic)")
    ax2.plot(dx, U_star * dx, "k--", label="slope U*(M)")
    ax2.plot(dx, 3 * U_star * dx, "k:", label="slope 3 U*(M)")
    ax2.set_xlabel(f"log(1/delta) - log(1/{deltas[0]})")
    ax2.set_ylabel("tau(delta) - tau(delta_max)")
    ax2.legend(fontsize=7)
    run.figure(fig, "tau_vs_log_inv_delta", caption="Stopping time against log(1/delta) on instance (a)")
