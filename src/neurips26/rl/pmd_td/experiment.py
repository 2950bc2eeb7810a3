"""Reproduction of the PMD-with-TD-critics claims (arXiv 2602.10838) on a random Dirichlet MDP.

Instance (a) of the digest: S = 10, A = 4, gamma = 0.9, tau = 0.1, mu uniform, costs U[0, 1] (rewards -c),
one-hot features (Q-realisable), expected TD updates with a uniform state-action sampling distribution and the
critic step ``beta = 1 / lambda_max(Phi^T D_rho Phi)``. Gap G_n = <rho0, V_tau^{pi_n} - V_tau^*> (uniform
rho0), V_tau^* by soft value iteration. Gaps below 1e-10 are at the numerical floor of the evaluation and are
left out of rate fits. Instance (b), the continuous-action stand-in (51-point action grid, Gaussian RBF
features), is reported in its own table, without a pass condition: its features are not Q-realisable.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from neurips26.harness import Run  # noqa: E402

from ..mdp import TabularMDP, random_mdp, soft_value_iteration  # noqa: E402
from .pmd import policy_mirror_descent  # noqa: E402

FLOOR = 1e-10
TAU = 0.1


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


def _fit(gaps: np.ndarray, n_max: int | None = None) -> tuple[float, float]:
    """Least-squares slope and R^2 of log G_n against n over the iterations with G_n above the floor."""
    n = np.arange(len(gaps))
    keep = gaps > FLOOR
    if n_max is not None:
        keep &= n <= n_max
    x, y = n[keep], np.log(gaps[keep])
    if len(x) < 3:
        return float("nan"), float("nan")
    slope, icpt = np.polyfit(x, y, 1)
    resid = y - (slope * x + icpt)
    r2 = 1.0 - resid.var() / y.var()
    return float(slope), float(r2)


def _converged(gaps: np.ndarray, kl: np.ndarray) -> bool:
    """The digest's failure criteria: G not below 1e-2, or oscillation (gap rising over the last quarter)."""
    tail = gaps[-len(gaps) // 4 :]
    return bool(gaps[-1] < 1e-2 and np.all(np.isfinite(kl)) and tail[-1] <= tail[0] + 1e-9)


def run(run: Run) -> None:
    S, A = run.pick(quick=(10, 4), full=(30, 6))
    N = run.pick(quick=300, full=600)
    rng = run.rng
    base = random_mdp(S, A, gamma=0.9, random_state=rng)
    mdp = TabularMDP(base.P, -rng.uniform(0.0, 1.0, size=(S, A)), 0.9)  # costs c ~ U[0, 1]
    _, _, pi_star = soft_value_iteration(mdp, TAU)
    kl_star = float(np.max(np.sum(pi_star * np.log(pi_star * A), axis=1)))
    run.note(
        f"instance (a): S={S}, A={A}, gamma=0.9, tau={TAU}, N={N} policy steps, one MDP seed "
        "(full mode: S=30, A=6, N=600; no multi-seed sweep in either mode)"
    )

    rows, curves = [], {}

    def record(name: str, lam: float, L: dict, **extra) -> None:
        g = L["gap"]
        slope, r2 = _fit(g)
        rows.append(
            {
                "variant": name,
                "lambda": lam,
                "G_final": float(g[-1]),
                "slope_logG": slope,
                "R2": r2,
                "max_KL": float(L["kl_max"].max()),
                "TD_steps_total": int(L["td_steps"].sum()) if len(L["td_steps"]) else 0,
                **extra,
            }
        )
        curves[name if name != "single loop (m = 1)" else f"single loop (m = 1), lambda={lam:g}"] = g

    with run.timer("exact"):
        lam_exact = 1.0
        _, L = policy_mirror_descent(mdp, tau=TAU, step_size=lam_exact, n_iter=N, log=True)
    record("exact PMD", lam_exact, L)
    slope_exact, _ = _fit(L["gap"])
    run.check(
        "exact PMD: slope of log G_n <= -0.5 log(1 + lambda tau)",
        slope_exact,
        "<=",
        -0.5 * np.log1p(lam_exact * TAU),
    )

    with run.timer("linear"):
        lam_lin = 0.5
        _, L = policy_mirror_descent(
            mdp, tau=TAU, step_size=lam_lin, n_iter=N, critic="td", td_steps="linear", td_scale=1.0, log=True
        )
    record("TD, m_n = n+1", lam_lin, L)
    run.check("m_n ~ n: G_200 <= 1e-6", float(L["gap"][200]), "<=", 1e-6)
    run.check("m_n ~ n: R^2 of log G_n vs n (n <= 200)", _fit(L["gap"], 200)[1], ">=", 0.9)

    with run.timer("log"):
        lam_log = 0.1
        _, L = policy_mirror_descent(
            mdp, tau=TAU, step_size=lam_log, n_iter=1000, critic="td", td_steps="log", td_scale=1.0, log=True
        )
    record("TD, m_n = ceil(log(n+2))", lam_log, L)
    g = L["gap"]
    run.metric("log schedule: 200 G_200", 200 * g[200])
    run.check(
        "m_n ~ log n: 1000 G_1000 / (200 G_200) <= 3", 1000 * max(g[1000], 0.0) / (200 * g[200]), "<=", 3.0
    )

    with run.timer("single loop sweep"):
        fails = []
        for lam in run.progress([0.1, 1.0, 10.0, 100.0], "single-loop lambda sweep"):
            _, L = policy_mirror_descent(
                mdp, tau=TAU, step_size=lam, n_iter=N, critic="td", td_steps=1, log=True
            )
            ok = _converged(L["gap"], L["kl_max"])
            record("single loop (m = 1)", lam, L, converged=ok)
            if lam == 0.1:
                single_small = L
            if not ok:
                fails.append(lam)
    run.check("single loop, lambda = 0.1: G_N <= 1e-3", float(single_small["gap"][-1]), "<=", 1e-3)
    run.check(
        "single loop, lambda = 0.1: max_n max_s KL(pi_n|mu) <= 1.5 KL(pi*_tau|mu)",
        float(single_small["kl_max"].max()),
        "<=",
        1.5 * kl_star,
        note="'bounded KL' made concrete (our choice): never above 1.5x the regularised optimum's KL",
    )

    if fails:
        lam_fail = min(fails)
        m_emp = None
        for m in (2, 4, 8, 16, 32):
            _, L = policy_mirror_descent(
                mdp, tau=TAU, step_size=lam_fail, n_iter=N, critic="td", td_steps=m, log=True
            )
            if _converged(L["gap"], L["kl_max"]):
                m_emp = m
                record(f"constant m = {m}", lam_fail, L, converged=True)
                break
        run.metric("smallest failing lambda", lam_fail)
        run.check(
            "multi-step (m >= m_emp) converges where the single loop fails",
            float(m_emp is not None),
            "==",
            1.0,
        )
    else:
        run.metric("smallest failing lambda", None)
        run.note(
            "instability not reproduced: with one-hot features and the critic step 1/lambda_max, "
            "the single loop converged for every lambda in {0.1, 1, 10, 100} (not a failure of the library)"
        )

    # Instance (b): continuous-action stand-in with the digest's Gaussian RBF features (not Q-realisable).
    with run.timer("continuous-action stand-in"):
        mdp_b, acts = continuous_action_mdp(rng=rng)
        Phi_b = rbf_features(mdp_b.n_states, acts)
        rows_b = []
        for lam, m in run.progress([(0.1, 1), (1.0, 1), (10.0, 1), (100.0, 1), (100.0, 8)], "instance (b)"):
            _, L = policy_mirror_descent(
                mdp_b, tau=TAU, step_size=lam, n_iter=N, critic="td", td_steps=m, features=Phi_b, log=True
            )
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
    run.note(
        "instance (b) (RBF features, not realisable): the gap stalls at a projected fixed point "
        f"(G_N = {rows_b[0]['G_N (projected floor)']:.3g} at lambda = 0.1); "
        "the KL overshoot max_n KL / final KL "
        f"grows from {rows_b[0]['KL overshoot']:.2f} (lambda = 0.1) to {rows_b[3]['KL overshoot']:.2f} "
        f"(lambda = 100), and {rows_b[4]['KL overshoot']:.2f} with 8 TD steps per policy step at lambda = 100"
    )

    # Extension: non-realisable random features (d = SA/2); the limit is a projected fixed point, not V*.
    Phi = rng.normal(size=(S * A, S * A // 2))
    _, L = policy_mirror_descent(
        mdp, tau=TAU, step_size=1.0, n_iter=N, critic="td", td_steps=1, features=Phi, log=True
    )
    record("single loop, random features d = SA/2 (extension)", 1.0, L)
    run.metric("random-feature gap floor", float(L["gap"][-1]))
    run.note(
        "extension, random non-realisable features (d = SA/2, uniform off-policy rho, single loop, "
        "lambda = 1): "
        f"final gap {L['gap'][-1]:.3g} from {L['gap'][0]:.3g} at the start, max KL {L['kl_max'].max():.3g} "
        f"(log|A| = {np.log(A):.3g}); the theory's realisability assumption matters"
    )

    # Extension: sampled (minibatch) TD instead of the expected update the paper analyses.
    with run.timer("sampled TD"):
        _, L = policy_mirror_descent(
            mdp,
            tau=TAU,
            step_size=0.5,
            n_iter=N,
            critic="td",
            td_steps=10,
            td_mode="sampled",
            td_batch_size=256,
            td_step_size=S * A / 4.0,  # a quarter of the expected-update step 1/lambda_max = S A (one-hot)
            random_state=run.seed,
            log=True,
        )
    record("sampled TD, m = 10, batch 256 (extension)", 0.5, L)
    run.metric("sampled-TD gap floor", float(L["gap"][-1]))

    run.table(
        rows, name="results", caption="PMD variants on instance (a): final gap, fitted log-gap slope, max KL"
    )
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for name, gaps in curves.items():
        n = np.arange(len(gaps))
        keep = gaps > FLOOR
        style = {"color": "k", "ls": "--", "zorder": 5} if name == "exact PMD" else {}
        ax.semilogy(n[keep], gaps[keep], label=name, **style)
    ax.set_xlabel("policy step n")
    ax.set_ylabel("optimality gap G_n")
    ax.set_xlim(0, 1000)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    run.figure(fig, "gap_vs_iteration", caption="Optimality gap against policy step (log scale)")
