"""Reproduction check for the non-asymptotic analysis of Navigate-and-Stop (MDP-NaS).

Instance (a): a designed 4-state / 2-action chain, gamma = 0.5. Action 1 ("forward") advances with probability
0.55 (otherwise back to state 0), action 0 returns to state 0; at the last state, forward stays with
probability 0.65. The informative pair (3, forward) is stochastic and sits at the end of the chain, so
uniform navigation rarely visits it; all gaps are >= 0.4. Family (b) M_p: the same chain with the only
transition into state 3 of probability p.

Each NaS trajectory records the first crossing of the stopping threshold for every delta (the sampling rule
does not depend on delta), so the deltas share common random numbers. Uniform navigation is capped at ``cap``
steps; a capped run contributes ``cap`` (a lower bound on its stopping time), which can only understate NaS's
advantage.
"""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from neurips26.harness import Run  # noqa: E402

from ..mdp import TabularMDP  # noqa: E402
from .characteristic_time import bound_terms, characteristic_time, oracle_allocation  # noqa: E402
from .navigate_and_stop import NavigateAndStop  # noqa: E402

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


def _runs(
    run: Run, mdp: TabularMDP, deltas: list[float], seeds: list[int], desc: str, **kw
) -> list[NavigateAndStop]:
    out = []
    for seed in run.progress(seeds, desc):
        out.append(
            NavigateAndStop(min(deltas), monitor_deltas=tuple(deltas), random_state=seed, **kw).fit(mdp)
        )
    return out


def run(run: Run) -> None:
    deltas = run.pick(quick=[0.1, 0.01], full=[0.1, 0.01, 1e-3, 1e-4])
    n_seeds = run.pick(quick=5, full=30)
    ps = run.pick(quick=[0.5, 0.25, 0.1], full=[0.5, 0.25, 0.1, 0.05])
    n_seeds_p = run.pick(quick=3, full=10)
    cap = run.pick(quick=60_000, full=200_000)
    K, T = 200, 10
    run.note(
        f"deltas {deltas}, {n_seeds} seeds, recompute every {K} steps, stopping test every {T} steps, "
        f"theoretical threshold; connectivity family with p in {ps} and {n_seeds_p} seeds"
        + ("; quick mode uses 3 of the 4 p values (3 seeds each) and 2 of the 4 deltas" if run.quick else "")
    )

    mdp = designed_mdp()
    terms = bound_terms(mdp)
    w_star, U_star = oracle_allocation(mdp)
    U_unif = characteristic_time(mdp, _uniform_stationary(mdp), terms=terms)
    run.metric("U*(M) instance (a)", U_star)
    run.metric("U(M, uniform stationary allocation)", U_unif)
    run.metric("minimum gap", terms.gap_min)
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
            max_steps=cap,
        )
    taus = {
        d: np.array([e.crossing_times_.get(d, e.stopping_time_) for e in nas], dtype=float) for d in deltas
    }
    for d in deltas:
        R = len(nas)
        errors = sum(
            int(d not in e.crossing_policies_ or np.any(e.crossing_policies_[d] != pi_star)) for e in nas
        )
        rows.append(
            {
                "method": "NaS",
                "threshold": "theoretical",
                "delta": d,
                "runs": R,
                "errors": errors,
                "mean_tau": taus[d].mean(),
                "sd_tau": taus[d].std(ddof=1),
                "R(delta)": taus[d].mean() / (U_star * math.log(1 / d)),
            }
        )
        run.check(
            f"delta-correctness at delta={d}: errors <= delta R + 3 sqrt(delta R)",
            errors,
            "<=",
            d * R + 3 * math.sqrt(d * R),
        )
    x = np.log(1.0 / np.array(deltas))
    slope = float(np.polyfit(x, np.array([taus[d].mean() for d in deltas]), 1)[0])
    run.metric("slope of E[tau] vs log(1/delta)", slope)
    run.check("slope of E[tau] vs log(1/delta) / U*(M)", slope / U_star, "in", (0.8, 3.0))

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
            max_steps=cap,
        )
    for d in deltas:
        t_ = np.array([e.crossing_times_[d] for e in prac], dtype=float)
        err = sum(int(np.any(e.crossing_policies_[d] != pi_star)) for e in prac)
        rows.append(
            {
                "method": "NaS",
                "threshold": "practical log((1+log t)/delta) (heuristic)",
                "delta": d,
                "runs": len(prac),
                "errors": err,
                "mean_tau": t_.mean(),
                "sd_tau": t_.std(ddof=1),
                "R(delta)": t_.mean() / (U_star * math.log(1 / d)),
            }
        )

    prac_means = [np.mean([e.crossing_times_[d] for e in prac]) for d in deltas]
    run.metric(
        "practical threshold (heuristic): slope / U*(M)", float(np.polyfit(x, prac_means, 1)[0]) / U_star
    )

    d_cmp = 0.01
    n_base = run.pick(quick=n_seeds, full=10)  # capped baselines are the slow part of full mode
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
        n_or = run.pick(quick=3, full=n_seeds)
        orac = _runs(
            run,
            mdp,
            [d_cmp],
            seeds[:n_or],
            "oracle tracking",
            exploration="oracle",
            stop_every=T,
            max_steps=cap,
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
                        max_steps=cap,
                    ),
                )
            )
    for name, ests in base:
        t_ = np.array([e.stopping_time_ for e in ests], dtype=float)
        rows.append(
            {
                "method": name,
                "threshold": "theoretical",
                "delta": d_cmp,
                "runs": len(ests),
                "errors": sum(int(np.any(e.policy_ != pi_star)) for e in ests),
                "mean_tau": t_.mean(),
                "sd_tau": t_.std(ddof=1),
                "R(delta)": t_.mean() / (U_star * math.log(1 / d_cmp)),
                "censored_at_cap": sum(not e.stopped_ for e in ests),
            }
        )
    unif_lb = float(np.mean([e.stopping_time_ for e in unif]))
    run.metric("uniform runs censored at the cap", sum(not e.stopped_ for e in unif))
    run.check(
        "navigation matters: E[tau_uniform] / E[tau_NaS] at delta=0.01 (uniform capped: lower bound)",
        unif_lb / taus[d_cmp].mean(),
        ">=",
        1.5,
    )

    # connectivity family (b): R(0.01) = E[tau] / (U*(M_p) log 100) as p shrinks
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
                max_steps=cap * 4,
            )
            r = np.array([e.stopping_time_ for e in ests], dtype=float) / (U_p * math.log(1 / d_cmp))
            Rm.append(r.mean())
            Rci.append(1.96 * r.std(ddof=1) / math.sqrt(len(r)))
            conn_rows.append(
                {
                    "p": p,
                    "U*(M_p)": U_p,
                    "mean_tau": r.mean() * U_p * math.log(1 / d_cmp),
                    "R(0.01)": r.mean(),
                    "ci95": Rci[-1],
                    "errors": sum(int(np.any(e.policy_ != bound_terms(mp).policy)) for e in ests),
                }
            )
    inv = [(i, Rm[i] - Rm[i + 1]) for i in range(len(ps) - 1) if Rm[i + 1] < Rm[i]]
    outside = sum(1 for i, diff in inv if diff > Rci[i] + Rci[i + 1])
    run.check("connectivity: inversions of R(0.01) as p shrinks", len(inv), "<=", 1)
    run.check("connectivity: inversions outside the 95% CI", outside, "<=", 0)

    run.table(rows, name="results", caption=f"Instance (a): U*(M) = {U_star:.1f}; stopping times and errors")
    run.table(conn_rows, name="connectivity", caption="Family (b): overhead R(0.01) against connectivity p")

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
    # the delta-dependent part: tau(delta) - tau(delta_max) on common random numbers
    dx = x - x[0]
    ax2.plot(dx, means - means[0], marker="o", label="NaS, theoretical threshold")
    ax2.plot(dx, prac - prac[0], marker="s", label="NaS, practical threshold (heuristic)")
    ax2.plot(dx, U_star * dx, "k--", label="slope U*(M)")
    ax2.plot(dx, 3 * U_star * dx, "k:", label="slope 3 U*(M)")
    ax2.set_xlabel(f"log(1/delta) - log(1/{deltas[0]})")
    ax2.set_ylabel("tau(delta) - tau(delta_max)")
    ax2.legend(fontsize=7)
    run.figure(fig, "tau_vs_log_inv_delta", caption="Stopping time against log(1/delta) on instance (a)")
