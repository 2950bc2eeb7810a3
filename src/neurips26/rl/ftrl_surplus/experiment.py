"""Reproduction of *No Coin Left Behind: Maximizing Strategic Surplus Against No-Regret Dynamics*.

Slug ``ftrl-surplus``. Data (digest): (a) planted games with known ``x*``, ``k`` optimal and ``N`` suboptimal
learner actions, equal and unequal gaps; (b) ``N = 0`` games (rock-paper-scissors, random circulants, a
planted game without suboptimal actions); (c) random Gaussian games with ``n, m in {3, 5, 8}``. Checks
(digest thresholds, literally):

1. fixed optimizer, ``eta in {0.1, 0.03, 0.01}``, ``T >= 50/(eta D_min)``: ``eta S_T`` varies <= 10% over eta;
2. ``N = 0``: ``|S_T| <= 1e-3 / eta``;
3. ``eta S_T`` strictly increasing in ``N``; within 5% of the closed forms on equal gaps (at the smallest eta,
   where the O(eta) discrete-time correction is smallest);
4. Euclidean eliminates at ``t <= 1.2/(eta D k) + 1``; entropy never does, and its remaining surplus decays
   exponentially (log-linear fit R^2 >= 0.95);
5. best-response optimizer, ``eta = 0.05``, ``T in {1e3..1e4}``: ``S_T`` linear in ``T`` (R^2 >= 0.95) and
   ``S_T >= 0.005 eta T`` in >= 90% of games; ``S_T`` never exceeds the learner's regret bound.

Checks 1-4 use the entropic (Hedge) and Euclidean learners, the paper's steep / non-steep pair; Tsallis-1/2
and log-barrier learners are reported in the susceptibility table. The abstract claims ``Omega(N/eta)``; the
digest's closed forms are ``Theta(1/eta)`` and increasing but sub-linear in ``N``, which is what is checked.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from neurips26.harness import Run  # noqa: E402

from .ftrl import REGULARIZERS, ftrl_regret_bound  # noqa: E402
from .games import circulant_game, maxmin_strategy, planted_game, rock_paper_scissors  # noqa: E402
from .surplus import (  # noqa: E402
    best_response_dynamics,
    elimination_round,
    euclidean_elimination_time,
    euclidean_sweeping_surplus,
    fixed_optimizer_dynamics,
    hedge_sweeping_surplus,
)

ETAS = (0.1, 0.03, 0.01)
PAIR = ("entropy", "euclidean")
N_VALUES = (1, 2, 4, 8)


def _horizon(eta: float, d_min: float, T0: int) -> int:
    return max(T0, int(np.ceil(50.0 / (eta * d_min))))


def _r2(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """R^2 and slope of the least-squares line through (x, y)."""
    slope, icpt = np.polyfit(x, y, 1)
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    ss_res = float(np.sum((y - (slope * x + icpt)) ** 2))
    return (1.0 - ss_res / ss_tot if ss_tot > 0 else 0.0), float(slope)


def _fixed_optimizer_study(run: Run, T0: int, ks: tuple[int, ...]) -> dict:
    rng = np.random.default_rng(run.seeds(1)[0])
    rows, spread, series, cf_err, elim_ratio, entropy_elim, decay_r2 = [], [], [], [], [], [], []
    spread_rows: list[dict] = []
    for k in ks:
        for kind in ("equal", "unequal"):
            eta_s = {reg: [] for reg in REGULARIZERS}
            for N in N_VALUES:
                gaps = np.full(N, 0.3) if kind == "equal" else rng.uniform(0.3, 0.6, size=N)
                g = planted_game(k, gaps, n_extra_rows=1, random_state=rng)
                x_lp, v_lp = maxmin_strategy(g.A)
                for reg in REGULARIZERS:
                    vals = []
                    for eta in ETAS:
                        T = _horizon(eta, float(gaps.min()), T0)
                        tr = fixed_optimizer_dynamics(g.A, eta, T, reg, x=x_lp, value=v_lp, atol=1e-7)
                        eS = eta * tr.surplus
                        vals.append(eS)
                        row = {
                            "k": k,
                            "gaps": kind,
                            "N": N,
                            "regularizer": reg,
                            "eta": eta,
                            "T": T,
                            "eta*S_T": eS,
                            "elimination round": elimination_round(tr),
                        }
                        if reg == "entropy":
                            row["closed form"] = hedge_sweeping_surplus(N, k, 1.0)
                            entropy_elim.append(elimination_round(tr) is not None)
                            rem = tr.remaining_surplus
                            keep = rem > 1e-9 * tr.surplus
                            r2, slope = _r2(np.arange(keep.sum(), dtype=float), np.log(rem[keep]))
                            decay_r2.append(r2 if slope < 0 else 0.0)
                        elif reg == "euclidean" and kind == "equal":
                            row["closed form"] = euclidean_sweeping_surplus(N, k, 1.0)
                            t_star = euclidean_elimination_time(0.3, k, eta)
                            er = elimination_round(tr)
                            elim_ratio.append(np.inf if er is None else (er - 1) / t_star)
                        if "closed form" in row:
                            row["rel. error"] = abs(eS - row["closed form"]) / row["closed form"]
                            if eta == min(ETAS) and (reg == "entropy" or kind == "equal"):
                                cf_err.append(row["rel. error"])
                        rows.append(row)
                    eta_s[reg].append(vals)
                    if reg in PAIR:
                        spread.append((max(vals) - min(vals)) / min(vals))
                        small = vals[1:]  # eta in {0.03, 0.01}: the O(eta) discrete-time correction is small
                        spread_rows.append(
                            {
                                "regularizer": reg,
                                "k": k,
                                "gaps": kind,
                                "N": N,
                                "max eta*D*k": max(ETAS) * float(gaps.max()) * k,
                                "spread over eta": spread[-1],
                                "spread over eta in {0.03, 0.01}": (max(small) - min(small)) / min(small),
                            }
                        )
            for reg in REGULARIZERS:
                arr = np.array(eta_s[reg])  # (len(N_VALUES), len(ETAS))
                series.append((reg, k, kind, bool(np.all(np.diff(arr, axis=0) > 0))))
    return dict(
        rows=rows,
        spread=spread,
        spread_rows=spread_rows,
        series=series,
        cf_err=cf_err,
        elim_ratio=elim_ratio,
        entropy_elim=entropy_elim,
        decay_r2=decay_r2,
    )


def _zero_n_study(T: int) -> float:
    games = [rock_paper_scissors()] + [circulant_game(n, random_state=n) for n in (3, 4, 5, 7)]
    games.append(planted_game(3, [], n_extra_rows=2, random_state=11).A)
    worst = 0.0
    for A in games:
        for reg in REGULARIZERS:
            for eta in ETAS:
                tr = fixed_optimizer_dynamics(A, eta, T, reg)  # x*, v from the LP
                worst = max(worst, eta * abs(tr.surplus))
    return worst


def _best_response_study(run: Run, n_games: int, regs: tuple[str, ...], eta: float, T: int) -> dict:
    rng = np.random.default_rng(run.seeds(2)[1])
    sizes = (3, 5, 8)
    shapes = [(n, m) for n in sizes for m in sizes]
    counts = np.full(len(shapes), n_games // len(shapes))
    counts[: n_games % len(shapes)] += 1
    grid = np.linspace(T // 10, T, 10).astype(int)
    games = [rng.normal(size=(c, n, m)) for (n, m), c in zip(shapes, counts)]
    saddle = np.concatenate(
        [
            np.any((G == G.max(axis=1, keepdims=True)) & (G == G.min(axis=2, keepdims=True)), axis=(1, 2))
            for G in games
        ]
    )
    out: dict = {"grid": grid, "saddle": saddle}
    for reg in regs:
        S, bound_ratio, regret_ok = [], [], []
        for G in run.progress(games, f"best response vs {reg}"):
            br = best_response_dynamics(G, eta, T, reg)
            S.append(br.cumulative_surplus[:, grid - 1])
            for b in range(G.shape[0]):
                bounds = np.array([ftrl_regret_bound(G[b], eta, int(t), reg) for t in grid])
                bound_ratio.append(float(np.max(br.cumulative_surplus[b, grid - 1] / bounds)))
            # S_T <= regret holds exactly; the slack absorbs the LP's round-off in v, multiplied by T
            regret_ok.append(br.cumulative_surplus[:, -1] <= br.regret + 1e-8 * T)
        S = np.concatenate(S)
        r2 = np.array([_r2(grid.astype(float), s)[0] for s in S])
        out[reg] = dict(
            S=S,
            r2=r2,
            bound_ratio=np.array(bound_ratio),
            regret_ok=np.concatenate(regret_ok),
            above=np.all(S >= 0.005 * eta * grid, axis=1),
        )
    return out


def _uncertainty_study(run: Run, sigmas: tuple[float, ...], n_games: int, T: int, eta: float) -> list[dict]:
    """Bilateral payoff uncertainty [R]: the optimizer plans x* from A + sigma Z; surplus is paid under A."""
    rng = np.random.default_rng(run.seeds(3)[2])
    rows = []
    planted = [planted_game(2, np.full(4, 0.3), random_state=rng) for _ in range(n_games)]
    for sigma in sigmas:
        for reg in PAIR:
            vals = []
            for g in planted:
                x_hat, _ = maxmin_strategy(g.A + sigma * rng.normal(size=g.A.shape))
                tr = fixed_optimizer_dynamics(g.A, eta, T, reg, x=x_hat, value=g.value, atol=0.0)
                vals.append(eta * tr.surplus)
            rows.append(
                {
                    "sigma": sigma,
                    "regularizer": reg,
                    "median eta*S_T": float(np.median(vals)),
                    "min eta*S_T": float(np.min(vals)),
                    "closed form (sigma=0)": hedge_sweeping_surplus(4, 2, 1.0)
                    if reg == "entropy"
                    else euclidean_sweeping_surplus(4, 2, 1.0),
                }
            )
    return rows


def _figure(run: Run, br: dict, eta_br: float, T0: int):
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    g = planted_game(2, np.full(4, 0.3), random_state=run.seeds(4)[3])
    eta = 0.03
    T = _horizon(eta, 0.3, T0)
    t = np.arange(1, T + 1)
    colors = {"entropy": "C0", "euclidean": "C1", "tsallis": "C2", "log_barrier": "C3"}
    remaining = {}
    for reg in REGULARIZERS:
        tr = fixed_optimizer_dynamics(g.A, eta, T, reg, x=g.x_star, value=g.value)
        axes[0].plot(t, eta * tr.cumulative_surplus, color=colors[reg], label=reg)
        remaining[reg] = tr.remaining_surplus
    axes[0].axhline(hedge_sweeping_surplus(4, 2, 1.0), color="C0", ls="--", lw=0.8, label="ln(1+N/k)")
    axes[0].axhline(euclidean_sweeping_surplus(4, 2, 1.0), color="C1", ls="--", lw=0.8, label="N/(2nk)")
    axes[0].set(
        xscale="log",
        yscale="log",
        ylim=(1e-2, None),
        xlabel="round t",
        ylabel="eta * S_t",
        title=f"fixed max-min optimizer (k=2, N=4, D=0.3, eta={eta})",
    )
    axes[0].legend(fontsize=7)
    for reg in PAIR:
        r = remaining[reg]
        axes[1].plot(t[r > 0], r[r > 0], color=colors[reg], label=reg)
    axes[1].axvline(1.0 / (eta * 0.3 * 2) + 1, color="C1", ls=":", label="1/(eta D k) + 1")
    axes[1].set(
        xscale="log",
        yscale="log",
        xlim=(1, 60 / (eta * 0.3)),
        xlabel="round t",
        ylabel="S_T - S_t",
        title="remaining surplus: finite elimination vs exponential tail",
    )
    axes[1].legend(fontsize=7)
    grid = br["grid"]
    for reg in PAIR:
        S = br[reg]["S"]
        med, lo, hi = (np.quantile(S, q, axis=0) for q in (0.5, 0.25, 0.75))
        axes[2].plot(grid, med, "o-", color=colors[reg], label=f"{reg} (median, IQR)")
        axes[2].fill_between(grid, lo, hi, color=colors[reg], alpha=0.2)
    axes[2].plot(grid, 0.005 * eta_br * grid, "k--", lw=0.8, label="0.005 eta T")
    axes[2].set(xlabel="T", ylabel="S_T", title=f"best-response optimizer, random games (eta={eta_br})")
    axes[2].legend(fontsize=7)
    fig.tight_layout()
    return fig


def run(run: Run) -> None:
    T0 = 20000
    ks = (1, 2, 3)
    n_games = run.pick(quick=200, full=1000)
    br_regs = run.pick(quick=PAIR, full=REGULARIZERS)
    eta_br, T_br = 0.05, 10000
    run.note(
        f"planted games with k in {ks}, N in {N_VALUES}, equal gaps 0.3 and unequal gaps U(0.3, 0.6), "
        f"T = max(2e4, 50/(eta D_min)); {n_games} random games for the best-response optimizer (quick: 200 "
        "games and the Hedge/Euclidean pair; full: 1000 games and all four learners)."
    )
    run.note(
        "The alternating optimizer is instantiated as the clairvoyant myopic best response [R]; "
        "the planted-game construction and the closed forms are reconstructions (see the module "
        "docstrings)."
    )

    run.expect(
        "partial",
        reason="Check 1 (eta*S_T varies <= 10% across eta in {0.1, 0.03, 0.01}) fails on one family only: the "
        "non-steep Euclidean learner with k = 3 optimal actions at the largest step eta = 0.1, where the "
        "suboptimal actions are eliminated after only 1/(eta D k) = 5.5-11 rounds and the discrete-time sum "
        "exceeds the continuous-time surplus N/(2nk eta) by 8-14% (measured max spread 0.136; Hedge <= 0.02; "
        "every family is within 10% at k <= 2 and within 3.1% over eta in {0.03, 0.01}). This is the O(eta D k) "
        "discrete-time correction the digest warns about, not a failure of the Theta(1/eta) law; all other "
        "checks pass (the best-response linearity check 5a only narrowly: the ~9% of random games with a "
        "pure saddle point saturate instead of growing linearly).",
    )
    with run.timer("fixed optimizer"):
        fx = _fixed_optimizer_study(run, T0, ks)
        worst_zero = _zero_n_study(T0)
    with run.timer("best response"):
        br = _best_response_study(run, n_games, br_regs, eta_br, T_br)
    with run.timer("uncertainty"):
        unc = _uncertainty_study(
            run,
            run.pick(quick=(0.0, 0.01, 0.05, 0.2), full=(0.0, 0.003, 0.01, 0.03, 0.1, 0.3)),
            run.pick(quick=5, full=30),
            T0,
            0.03,
        )

    run.table(
        fx["spread_rows"],
        name="theta_one_over_eta",
        caption="Relative spread of eta*S_T across eta (check 1), Hedge and Euclidean learners",
    )
    run.table(
        fx["rows"],
        name="fixed_optimizer",
        caption="Fixed max-min optimizer vs FTRL on planted games: eta*S_T, closed form, elimination round",
    )
    # susceptibility: kappa_h = eta * S_T at the smallest eta on the reference game (k=2, N=4, D=0.3)
    sus = []
    for reg in REGULARIZERS:
        ref = [
            r
            for r in fx["rows"]
            if r["k"] == 2
            and r["gaps"] == "equal"
            and r["N"] == 4
            and r["regularizer"] == reg
            and r["eta"] == min(ETAS)
        ]
        row = {"regularizer": reg, "kappa_h = eta*S_T (k=2, N=4, eta=0.01)": ref[0]["eta*S_T"]}
        if reg in br:
            row["BR median S_T/(eta T)"] = float(np.median(br[reg]["S"][:, -1] / (eta_br * T_br)))
            row["BR frac S_T >= 0.005 eta T"] = float(np.mean(br[reg]["above"]))
        sus.append(row)
    run.table(sus, name="susceptibility", caption="Susceptibility proxy per regulariser [R]")
    br_rows = []
    for reg in br_regs:
        d = br[reg]
        br_rows.append(
            {
                "regularizer": reg,
                "games": len(d["r2"]),
                "frac R^2 >= 0.95": float(np.mean(d["r2"] >= 0.95)),
                "frac S_T >= 0.005 eta T": float(np.mean(d["above"])),
                "median S_T/(eta T)": float(np.median(d["S"][:, -1] / (eta_br * T_br))),
                "max S_T / regret bound": float(np.max(d["bound_ratio"])),
                "S_T <= realised regret": float(np.mean(d["regret_ok"])),
                "frac R^2 >= 0.95 (no pure saddle)": float(np.mean(d["r2"][~br["saddle"]] >= 0.95)),
            }
        )
    run.table(br_rows, name="best_response", caption=f"Best-response optimizer on random games, eta={eta_br}")
    run.table(
        unc,
        name="uncertainty",
        caption="Optimizer plans with A + sigma Z, is paid under A (eta=0.03, T=2e4) [R]",
    )
    for reg in br_regs:
        med = np.median(br[reg]["S"], axis=0)
        run.metric(
            f"{reg}: R^2 of the median best-response S_T against T", _r2(br["grid"].astype(float), med)[0]
        )
    run.metric("pure saddle fraction of random games", float(np.mean(br["saddle"])))
    lb = [
        r["eta*S_T"]
        for r in fx["rows"]
        if r["regularizer"] == "log_barrier" and r["k"] == 2 and r["gaps"] == "equal" and r["N"] == 4
    ]
    run.metric("log-barrier eta*S_T across eta (k=2, N=4)", lb)
    run.note(
        "Log-barrier FTRL keeps y_sub ~ 1/(eta D t), so its fixed-optimizer surplus grows like "
        "(N/eta) ln T and is not Theta(1/eta) at finite T; checks 1-4 concern the Hedge / Euclidean "
        "pair."
    )

    # --- checks (digest thresholds) -----------------------------------------------------------------
    run.check(
        "1. max relative spread of eta*S_T across eta in {0.1,0.03,0.01}", max(fx["spread"]), "<=", 0.10
    )
    run.check("2. N=0 games: max eta*|S_T|", worst_zero, "<=", 1e-3)
    pair_series = [s for s in fx["series"] if s[0] in PAIR]
    run.check(
        "3a. fraction of planted series with eta*S_T strictly increasing in N",
        float(np.mean([s[3] for s in pair_series])),
        ">=",
        1.0,
    )
    run.check("3b. max relative error vs closed forms (equal gaps, eta=0.01)", max(fx["cf_err"]), "<=", 0.05)
    run.check("4a. Euclidean: max (elimination round - 1) * eta D k", max(fx["elim_ratio"]), "<=", 1.2)
    run.check(
        "4b. entropy: runs with exactly zero suboptimal mass", float(np.sum(fx["entropy_elim"])), "<=", 0
    )
    run.check("4c. entropy: min log-linear R^2 of remaining surplus", min(fx["decay_r2"]), ">=", 0.95)
    for reg in PAIR:
        d = br[reg]
        run.check(
            f"5a. {reg}: fraction of games with S_T linear in T (R^2 >= 0.95)",
            float(np.mean(d["r2"] >= 0.95)),
            ">=",
            0.90,
        )
        run.check(
            f"5b. {reg}: fraction of games with S_T >= 0.005 eta T for all T",
            float(np.mean(d["above"])),
            ">=",
            0.90,
        )
        run.check(f"5c. {reg}: max S_T / regret bound", float(np.max(d["bound_ratio"])), "<=", 1.0)
    run.figure(
        _figure(run, br, eta_br, T0),
        "surplus_vs_T",
        caption="Surplus against T per regulariser: fixed optimizer (eta*S_t, closed forms dashed), "
        "remaining surplus (Euclidean hits zero, entropy decays exponentially), best response",
    )
