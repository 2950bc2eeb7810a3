"""Reproduction (Gaussian sanity instance of the claimed rate): an annealed, Gaussian-smoothed ratio tilt
``Pi_sigma`` of a 3D reference is within ``KL(Pi_sigma || P*) = O(N sigma^2)`` and
``TV = O(sqrt(N) sigma)`` of the multi-marginal Schrödinger-bridge lift ``P*`` when the reference's
cross-slice coupling is noise-aligned (``rho = kappa sigma``); the rate breaks without that assumption
(digest: ``tilted-2d-prior-sb``).

The family is the digest's [R]: slices ``x_i`` in ``R^d`` (``d = 1`` quick, ``d = 4`` full: a 2x2 pixel grid
with squared-exponential in-slice covariance, lengthscale 0.5), reference ``N(0, R_rho ⊗ S)``, slice targets
``N(sin(i) 1_d, 0.5 I_d)``. ``P*`` comes from Gaussian IPF to ``1e-12``; every KL is exact (closed form);
TV and the scalar-field identity are Monte Carlo with 2e5 samples. Baselines (ablations of the surrogate):
the naive ratio tilt (no smoothing), the tilts after ``j`` IPF sweeps, and a not-noise-aligned reference.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from neurips26.harness import Run, loglog_slope

from .gaussian_tilt import (
    GaussianTilt,
    ar1_slice_covariance,
    edm_sigma_schedule,
    gaussian_sb_lift,
    ipf_ladder,
    ratio_tilt,
    scalar_field_kl,
    scalar_field_kl_mc,
    squared_exponential_pixel_cov,
    tilt_kl,
    tv_mc,
)

SIGMAS = (0.1, 0.05, 0.025, 0.0125)  # gate grid (small-sigma, asymptotic regime)
NS = (8, 16, 32, 64)
KAPPA = 1.0  # noise alignment: rho = kappa * sigma
RHO_FIXED = 0.3  # counter-example: coupling not tied to the noise level
TARGET_VAR = 0.5
LADDER_RHOS = (0.1, 0.4, 0.8)
LADDER_SWEEPS = 50
N_MC = 200_000
# in-slice squared-exponential lengthscale (full mode) [R]: 0.5 keeps every eigenvalue of S (>= 0.75) above the
# target variance 0.5, so every ratio tilt of the family is normalizable; with 1.0 the smallest eigenvalue is
# 0.15 and the rho = 0.3 surrogate is not a probability law (reported as a side table in full mode)
LENGTHSCALE = 0.5
IDENTITY_SETTINGS = ((8, 0.1), (8, 0.025), (32, 0.1), (32, 0.025), (64, 0.05), (64, 0.0125))


def family(n_slices: int, rho: float, slice_cov: np.ndarray) -> tuple[GaussianTilt, np.ndarray, np.ndarray]:
    """Reference ``P_0 = N(0, R_rho ⊗ S)`` and slice targets ``mu_i = N(sin(i) 1_d, 0.5 I_d)``."""
    d = slice_cov.shape[0]
    ref = GaussianTilt.reference(0.0, ar1_slice_covariance(n_slices, rho, slice_cov), d)
    means = np.repeat(np.sin(np.arange(1, n_slices + 1))[:, None], d, axis=1)
    covs = np.broadcast_to(TARGET_VAR * np.eye(d), (n_slices, d, d)).copy()
    return ref, means, covs


def _monotone_violations(values: np.ndarray, floor: float = 1e-10) -> int:
    """Increases of the sequence before it first falls below ``floor`` (below: floating-point jitter)."""
    below = np.flatnonzero(values < floor)
    stop = below[0] + 1 if below.size else len(values)
    return int(np.sum(np.diff(values[:stop]) >= 0))


def _slope(x, y) -> float:
    return loglog_slope(x, y).slope


def _lengthscale_one_side_table(run: Run) -> None:
    """Not gated: the gate-2 grid with in-slice lengthscale 1 (S has an eigenvalue 0.15 < 0.5)."""
    S = squared_exponential_pixel_cov(2, 1.0)
    rows, cells = [], {}
    for N in NS:
        for sigma in SIGMAS:
            ref, m, T = family(N, KAPPA * sigma, S)
            kl = tilt_kl(ratio_tilt(ref, m, T, smoothing=sigma), gaussian_sb_lift(ref, m, T))
            cells[N, sigma] = kl
            rows.append({"N": N, "sigma": sigma, "KL(Pi||P*)": kl, "KL/(N sigma^2)": kl / (N * sigma**2)})
    ratio = np.array([cells[k] / (k[0] * k[1] ** 2) for k in cells])
    run.table(rows, name="lengthscale_1", caption="Side check, not gated: in-slice lengthscale 1.")
    run.metric("lengthscale 1: KL/(N sigma^2) max/min", float(ratio.max() / ratio.min()))
    run.metric("lengthscale 1: slope in sigma (N = 32)", _slope(SIGMAS, [cells[32, s] for s in SIGMAS]))
    run.metric("lengthscale 1: slope in N (sigma = 0.05)", _slope(NS, [cells[n, 0.05] for n in NS]))
    ref, m, T = family(16, RHO_FIXED, S)
    try:
        ratio_tilt(ref, m, T, smoothing=SIGMAS[-1])
        normalizable = True
    except ValueError:
        normalizable = False
    run.metric(f"lengthscale 1: rho = {RHO_FIXED} surrogate normalizable", normalizable)
    run.note(
        "Full mode uses in-slice lengthscale 0.5; with lengthscale 1 the gate-2 grid still gives the rate "
        "(side table 'lengthscale_1'), but the non-noise-aligned surrogate is not normalizable there "
        "(the ratio tilt needs the target slice variance below the reference's in every direction)."
    )


def run(run: Run) -> None:
    d = run.param("slice_dim", quick=1, full=4)
    n_mc = run.param("monte_carlo_draws", quick=N_MC)
    S = np.eye(1) if d == 1 else squared_exponential_pixel_cov(2, LENGTHSCALE)
    seeds = iter(run.seeds(64))
    run.note(
        "Gaussian sanity instance of the claimed rate: the family, the surrogate and the check are the "
        "digest's reconstruction [R]; the paper's full text (constants, exact Pi_tau) is not available."
    )
    run.note(
        f"{run.mode} mode: slice dimension d = {d} ({'scalar slices' if d == 1 else '2x2 pixel grid'}), "
        f"N in {NS}, sigma in {SIGMAS}, {n_mc} Monte Carlo samples for TV and the identity check."
    )

    # --- gates 2 and 3: the noise-aligned grid ------------------------------------------------------------
    rows, cells = [], {}
    worst_marginal = 0.0
    with run.timer("noise-aligned grid"):
        for N in run.progress(NS, "noise-aligned grid"):
            for sigma in SIGMAS:
                ref, m, T = family(N, KAPPA * sigma, S)
                star, info = gaussian_sb_lift(ref, m, T, tol=1e-12, log=True)
                worst_marginal = max(worst_marginal, info["marginal_error"])
                pi = ratio_tilt(ref, m, T, smoothing=sigma)
                naive = ratio_tilt(ref, m, T, smoothing=0.0)
                kl, kl_rev = tilt_kl(pi, star), tilt_kl(star, pi)
                tv = tv_mc(pi, star, n_mc, random_state=next(seeds))
                cells[N, sigma] = (kl, tv)
                rows.append(
                    {
                        "N": N,
                        "sigma": sigma,
                        "rho": KAPPA * sigma,
                        "IPF sweeps": info["n_sweeps"],
                        "KL(Pi||P*)": kl,
                        "KL(P*||Pi)": kl_rev,
                        "KL/(N sigma^2)": kl / (N * sigma**2),
                        "TV (MC)": tv,
                        "TV/(sqrt(N) sigma)": tv / (np.sqrt(N) * sigma),
                        "Pinsker sqrt(KL/2)": np.sqrt(kl / 2),
                        "KL(naive||P*) [coupling piece]": tilt_kl(naive, star),
                        "KL(Pi||naive) [tempering piece]": tilt_kl(pi, naive),
                    }
                )
    run.table(
        rows, name="noise_aligned", caption="Smoothed ratio tilt Pi_sigma vs the SB lift P*, rho = sigma."
    )
    run.metric("max IPF marginal error", worst_marginal)

    kl_ratio = np.array([cells[k][0] / (k[0] * k[1] ** 2) for k in cells])
    tv_ratio = np.array([cells[k][1] / (np.sqrt(k[0]) * k[1]) for k in cells])
    slope_sigma = _slope(SIGMAS, [cells[32, s][0] for s in SIGMAS])
    slope_n = _slope(NS, [cells[n, 0.05][0] for n in NS])
    pinsker = max(cells[k][1] / np.sqrt(cells[k][0] / 2) for k in cells)
    logs = np.array([[1.0, np.log(n), np.log(s)] for n, s in cells])
    coef = np.linalg.lstsq(logs, np.log([cells[k][0] for k in cells]), rcond=None)[0]
    run.metric("joint log-log fit KL ~ N^a sigma^b (a, b)", [float(coef[1]), float(coef[2])])
    run.metric("KL/(N sigma^2) range", [float(kl_ratio.min()), float(kl_ratio.max())])
    run.metric("TV/(sqrt(N) sigma) range", [float(tv_ratio.min()), float(tv_ratio.max())])

    # --- gate 1: the single-correction-field identity, by Monte Carlo -------------------------------------
    id_rows = []
    with run.timer("scalar-field identity"):
        for N, sigma in run.progress(IDENTITY_SETTINGS, "scalar-field identity"):
            ref, m, T = family(N, KAPPA * sigma, S)
            star = gaussian_sb_lift(ref, m, T)
            pi = ratio_tilt(ref, m, T, smoothing=sigma)
            exact = tilt_kl(pi, star)
            closed = scalar_field_kl(pi, star)
            mc = scalar_field_kl_mc(pi, star, n_mc, random_state=next(seeds))
            id_rows.append(
                {
                    "N": N,
                    "sigma": sigma,
                    "KL exact": exact,
                    "E_Pi[Delta] - log E_P*[e^Delta] (closed form)": closed["kl"],
                    "same, Monte Carlo": mc,
                    "relative error (MC)": abs(mc - exact) / exact,
                }
            )
    run.table(id_rows, name="scalar_field_identity", caption="KL through the single correction field Delta.")

    # --- gate 4: counter-example, coupling not noise-aligned ----------------------------------------------
    ce_rows, growth = [], []
    with run.timer("counter-example"):
        for N in NS:
            ref, m, T = family(N, RHO_FIXED, S)
            star = gaussian_sb_lift(ref, m, T)
            ratios = {}
            for sigma in SIGMAS:
                kl = tilt_kl(ratio_tilt(ref, m, T, smoothing=sigma), star)
                ratios[sigma] = kl / (N * sigma**2)
                ce_rows.append(
                    {
                        "N": N,
                        "sigma": sigma,
                        "rho": RHO_FIXED,
                        "KL(Pi||P*)": kl,
                        "KL/N": kl / N,
                        "KL/(N sigma^2)": ratios[sigma],
                    }
                )
            growth.append(ratios[SIGMAS[-1]] / ratios[SIGMAS[0]])
    run.table(ce_rows, name="counter_example", caption=f"Reference with rho fixed at {RHO_FIXED}.")

    # --- gate 5: IPF ladder ---------------------------------------------------------------------------------
    n_ladder = 32
    lad_rows, violations, last = [], 0, 0.0
    ladders = {}
    with run.timer("IPF ladder"):
        for rho in LADDER_RHOS:
            ref, m, T = family(n_ladder, rho, S)
            star = gaussian_sb_lift(ref, m, T)
            try:
                start = ratio_tilt(ref, m, T)  # rung 1: the naive ratio tilt
                rungs = [start] + ipf_ladder(start, m, T, LADDER_SWEEPS - 1)
                first = "naive ratio tilt"
            except ValueError:  # the naive tilt can be non-normalizable (d = 4, strong coupling)
                rungs = ipf_ladder(ref, m, T, LADDER_SWEEPS)
                first = "one sequential sweep from P_0 (naive tilt not normalizable)"
            fwd = np.array([tilt_kl(t, star) for t in rungs])
            rev = np.array([tilt_kl(star, t) for t in rungs])
            ladders[rho] = (fwd, rev)
            violations += _monotone_violations(fwd) + _monotone_violations(rev)
            last = max(last, fwd[-1], rev[-1])
            for j in (1, 2, 3, 5, 10, 20, 50):
                lad_rows.append(
                    {
                        "rho": rho,
                        "rung 1": first,
                        "j": j,
                        "KL(tilt_j||P*)": fwd[j - 1],
                        "KL(P*||tilt_j)": rev[j - 1],
                    }
                )
    run.table(lad_rows, name="ipf_ladder", caption=f"Tilt after j IPF sweeps vs P*, N = {n_ladder}.")

    # --- annealing path along an EDM schedule (reported, not gated: includes the pre-asymptotic levels) ----
    path_rows = []
    for sigma in edm_sigma_schedule(10, sigma_min=0.005, sigma_max=0.4):
        ref, m, T = family(32, KAPPA * sigma, S)
        kl = tilt_kl(ratio_tilt(ref, m, T, smoothing=sigma), gaussian_sb_lift(ref, m, T))
        path_rows.append(
            {"sigma (EDM level)": sigma, "KL(Pi||P*)": kl, "KL/(N sigma^2)": kl / (32 * sigma**2)}
        )
    run.table(
        path_rows, name="edm_path", caption="N = 32 along an EDM schedule (Karras et al. 2022), rho = sigma."
    )

    if run.full:
        _lengthscale_one_side_table(run)

    # --- checks: the digest's thresholds, literally -------------------------------------------------------
    rel = max(r["relative error (MC)"] for r in id_rows)
    run.metric("KL slope in sigma (N = 32)", slope_sigma)
    run.metric("KL slope in N (sigma = 0.05)", slope_n)
    run.metric("counter-example growth per N", growth)
    run.check("scalar_field_identity_mc", rel)
    run.check("kl_rate_ratio_spread", kl_ratio.max() / kl_ratio.min())
    run.check("kl_slope_sigma", slope_sigma)
    run.check("kl_slope_n", slope_n)
    run.check("tv_rate_ratio_spread", tv_ratio.max() / tv_ratio.min())
    run.check("pinsker", pinsker)
    run.check("counter_example_growth", min(growth))
    run.check("ipf_ladder_monotone", violations)
    run.check("ipf_ladder_converged", last)

    # --- figure ---------------------------------------------------------------------------------------------
    fig, ax = plt.subplots(2, 2, figsize=(11, 8.5))
    s_arr = np.array(SIGMAS)
    for N in NS:
        ax[0, 0].loglog(s_arr, [cells[N, s][0] for s in SIGMAS], "o-", label=f"N = {N}, rho = sigma")
    for N in (8, 64):
        ax[0, 0].loglog(
            s_arr,
            [r["KL(Pi||P*)"] for r in ce_rows if r["N"] == N],
            "x--",
            label=f"N = {N}, rho = {RHO_FIXED} (counter-example)",
        )
    ax[0, 0].loglog(s_arr, cells[32, SIGMAS[0]][0] * (s_arr / SIGMAS[0]) ** 2, "k:", label="slope 2")
    ax[0, 0].set(xlabel="sigma (EDM level)", ylabel="KL(Pi_sigma || P*)", title="KL against sigma")
    ax[0, 0].legend(fontsize=7)
    n_arr = np.array(NS)
    for s in SIGMAS:
        ax[0, 1].loglog(n_arr, [cells[n, s][0] for n in NS], "o-", label=f"sigma = {s}")
    ax[0, 1].loglog(n_arr, cells[8, 0.05][0] * n_arr / 8, "k:", label="slope 1")
    ax[0, 1].set(xlabel="N (slices)", ylabel="KL(Pi_sigma || P*)", title="KL against N")
    ax[0, 1].legend(fontsize=7)
    x = np.array([np.sqrt(k[0]) * k[1] for k in cells])
    ax[1, 0].loglog(x, [cells[k][1] for k in cells], "o", label="TV (Monte Carlo)")
    ax[1, 0].loglog(x, [np.sqrt(cells[k][0] / 2) for k in cells], "s", mfc="none", label="Pinsker sqrt(KL/2)")
    ax[1, 0].set(xlabel="sqrt(N) sigma", ylabel="TV(Pi_sigma, P*)", title="TV rate")
    ax[1, 0].legend(fontsize=7)
    for rho, (fwd, rev) in ladders.items():
        j = np.arange(1, len(fwd) + 1)
        ax[1, 1].semilogy(j, np.maximum(fwd, 1e-30), "-", label=f"KL(tilt_j||P*), rho = {rho}")
        ax[1, 1].semilogy(j, np.maximum(rev, 1e-30), "--", label=f"KL(P*||tilt_j), rho = {rho}")
    ax[1, 1].axhline(1e-10, color="grey", lw=0.8)
    ax[1, 1].set(xlabel="IPF sweeps j", ylabel="KL", title=f"IPF ladder (N = {n_ladder})")
    ax[1, 1].legend(fontsize=6)
    fig.suptitle(f"Gaussian sanity instance of KL = O(N sigma^2), d = {d}")
    fig.tight_layout()
    run.figure(
        fig, "kl_rates", caption="KL against sigma and N (log-log), TV against sqrt(N) sigma, IPF ladder."
    )
