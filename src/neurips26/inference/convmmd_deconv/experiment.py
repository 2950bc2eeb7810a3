"""Reproduction of convMMD (digest ``convmmd-deconv``): deconvolution, denoising and a 2-D ring.

Data follow the digest (generated here): 1-D latent ``0.6 Laplace(3, sd 0.8) + 0.4 Laplace(-2, sd 1)`` with
heteroscedastic noise ``sd_i ~ U(0.5, 1.0)`` (Laplace or Gaussian); 2-D ring of radius 2 (radial jitter sd 0.1,
our choice) with Gaussian noise ``sd_i ~ U(0.2, 0.6)``.

One documented configuration serves every GMM gate (``GMM_CONFIG``: K = 10 components, 32 draws per component,
batch 512, peak rate 0.02, 400 steps in quick mode and 800 in full mode, multiscale Laplace kernel).

Gates (thresholds fixed by the digest):
1. Laplace noise, n = 4000: ISE(convMMD-GMM, K = 10) <= 0.5 x ISE(naive KDE of X); full mode: the flow sieve
   too (zuko's neural spline flow, the authors' architecture and schedule, started from the fitted GMM),
   over 3 data seeds;
2. Gaussian noise, n = 4000: EB MSE(convMMD) <= 0.75 x noisy MSE and <= 1.2 x oracle-Bayes MSE; the ratio to
   NPMLE-EB is reported (target <= 1.15);
3. 2-D ring: W1(convMMD latent samples, truth) <= 0.5 x W1(noisy X, truth), exact W1 between point sets;
   quick: 2 data seeds x 3 independent W1 evaluations of 2500 points, full: 5 data seeds x one of 5000 points
   (the W1 of 2500-point samples carries a finite-sample floor, reported, that moves the ratio by about +-0.05);
   the outcome is decided on the interval over all values;
4. full mode only: n in {500, 2000, 8000} x 3 seeds; the log-ISE vs log-n slope under Laplace noise is steeper
   than under Gaussian noise.
Baselines beside: naive KDE of X (scipy), the deconvoluting-kernel KDE (Fourier inversion, Delaigle-Meister
heteroscedastic form, Stefanski-Carroll CV bandwidth; gate 1), NPMLE-EB on a 300-point grid (EM), extreme deconvolution (Bovy et al.
XD-EM, K = 10; ours, checked against astroML's XDGMM, which full mode also runs), oracle Bayes with the true
prior. The importance-sampled posterior means of the ring report the digest's two-half agreement diagnostic.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import ot
from scipy.stats import gaussian_kde, wasserstein_distance

from neurips26.harness import Run, loglog_slope

from .deconvolution_kde import DeconvolutionKDE
from .deconvolver import ConvMMDDeconvolver
from .extreme_deconvolution import ExtremeDeconvolution
from .grid_bayes import grid_posterior_mean, npmle_grid
from .noise import sample_noise_np

B1, B2 = 0.8 / np.sqrt(2.0), 1.0 / np.sqrt(2.0)  # Laplace scales from the stated standard deviations
GRID = np.linspace(-9.0, 10.0, 3801)
N_GATES = 4000  # the digest's n for gates 1 and 2
N_RING = 3000
# the one configuration of every GMM gate (n_steps is set by the mode)
GMM_CONFIG = {"n_components": 10, "samples_per_component": 32, "batch_size": 512, "learning_rate": 0.02}
# the flow sieve: zuko's NSF with the authors' architecture (4 transforms, 16 bins, 32 hidden) and schedule
# (~4000 AdamW steps at 1e-3: 500 epochs of n / 512 batches), started from the fitted GMM sieve
FLOW_CONFIG = {"flow": "zuko", "n_steps": 4000, "learning_rate": 1e-3, "init_steps": 500}


def latent_1d(n: int, rng: np.random.Generator) -> np.ndarray:
    first = rng.random(n) < 0.6
    return np.where(first, rng.laplace(3.0, B1, n), rng.laplace(-2.0, B2, n))


def latent_pdf(z: np.ndarray) -> np.ndarray:
    return 0.6 * np.exp(-np.abs(z - 3.0) / B1) / (2 * B1) + 0.4 * np.exp(-np.abs(z + 2.0) / B2) / (2 * B2)


def noisy_1d(n: int, noise: str, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    Z = latent_1d(n, rng)
    sd = rng.uniform(0.5, 1.0, n)
    return Z, Z + sample_noise_np(sd, noise, rng), sd


def ring(n: int, rng: np.random.Generator) -> np.ndarray:
    theta = rng.uniform(0, 2 * np.pi, n)
    r = 2.0 + 0.1 * rng.standard_normal(n)
    return np.c_[r * np.cos(theta), r * np.sin(theta)]


def ise(f_hat: np.ndarray) -> float:
    return float(np.trapezoid((f_hat - latent_pdf(GRID)) ** 2, GRID))


def w1_2d(A: np.ndarray, B: np.ndarray) -> float:
    M = ot.dist(A, B, metric="euclidean")
    return float(ot.emd2(np.full(len(A), 1 / len(A)), np.full(len(B), 1 / len(B)), M, numItermax=2_000_000))


def gmm_sieve(noise: str, steps: int, seed: int) -> ConvMMDDeconvolver:
    return ConvMMDDeconvolver("gmm", noise=noise, n_steps=steps, random_state=seed, **GMM_CONFIG)


def _ring_data(seed: int, n: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed + 2)
    Z = ring(n, rng)
    sd = rng.uniform(0.2, 0.6, n)
    return Z, Z + sd[:, None] * rng.standard_normal((n, 2)), sd


def _ring_seed(seed: int, steps: int, m: int, draws: int) -> dict:
    """Gate 3 on one ring data set: convMMD-GMM and XD against the noisy data, ``draws`` independent W1
    evaluations of ``m`` points each (fresh model draws, fresh truth sample, a fresh subset of the data)."""
    Z, X, sd = _ring_data(seed, N_RING)
    est = gmm_sieve("gaussian", steps, seed).fit(X, noise_sd=sd)
    xd = ExtremeDeconvolution(GMM_CONFIG["n_components"], random_state=seed).fit(X, noise_sd=sd)
    rng = np.random.default_rng(seed + 3)
    out = {"seed": seed, "est": est, "data": (Z, X, sd), "ratio": [], "ratio_xd": [], "ratio_floor": []}
    for k in range(draws):
        truth = ring(m, rng)  # a fresh truth sample: no draws shared with the data or the model
        rows = rng.choice(N_RING, m, replace=m > N_RING)
        w1_noisy = w1_2d(X[rows], truth)
        s = int(rng.integers(2**31 - 1))
        out["ratio"].append(w1_2d(est.sample(m, s), truth) / w1_noisy)
        if k == 0:  # the references (reported, not gated) once per data seed: each exact W1 costs
            out["ratio_xd"].append(w1_2d(xd.sample(m, s), truth) / w1_noisy)
            out["ratio_floor"].append(w1_2d(ring(m, rng), truth) / w1_noisy)
    return out


def run(run: Run) -> None:
    steps = run.param("gmm_steps", quick=400, full=800)
    n_ring_seeds = run.param("ring_seeds", quick=2, full=5)
    w1_points = run.param("w1_points", quick=2500, full=5000)
    w1_draws = run.param("w1_draws_per_seed", quick=3, full=1)
    n_flow_seeds = run.param("flow_seeds", quick=0, full=3)
    run.param("gmm_config", quick=GMM_CONFIG)
    seed = run.seed
    rows: list[dict] = []

    # --- gate 1: deconvolution under Laplace (ordinary-smooth) noise ------------------------------------
    rng = np.random.default_rng(seed)
    Z1, X1, sd1 = noisy_1d(N_GATES, "laplace", rng)
    with run.timer("convmmd_gmm_laplace"):
        gmm1 = gmm_sieve("laplace", steps, seed).fit(X1, noise_sd=sd1)
    f_gmm = gmm1.density(GRID)
    f_kde = gaussian_kde(X1)(GRID)
    grid_np = np.linspace(X1.min(), X1.max(), 300)
    p_np = npmle_grid(X1, sd1, "laplace", grid_np)
    xd1 = ExtremeDeconvolution(GMM_CONFIG["n_components"], random_state=seed).fit(X1, noise_sd=sd1)
    with run.timer("deconvoluting_kde_laplace"):
        dkde1 = DeconvolutionKDE("laplace").fit(X1, noise_sd=sd1)
        f_dkde = dkde1.density(GRID)
    ise_gmm, ise_kde = ise(f_gmm), ise(f_kde)
    w1 = lambda S: wasserstein_distance(S, Z1)  # noqa: E731
    task1 = "1D Laplace noise"
    rows += [
        {
            "task": task1,
            "method": "convMMD-GMM (K=10)",
            "ISE": ise_gmm,
            "W1 latent": w1(gmm1.sample(4000, seed)[:, 0]),
        },
        {"task": task1, "method": "naive KDE of X", "ISE": ise_kde, "W1 latent": w1(X1)},
        {
            "task": task1,
            "method": "deconvoluting-kernel KDE (Fourier, heteroscedastic, CV bandwidth)",
            "ISE": ise(f_dkde),
            "W1 latent": None,
        },
        {
            "task": task1,
            "method": "NPMLE (grid EM)",
            "ISE": None,
            "W1 latent": wasserstein_distance(grid_np, Z1, u_weights=p_np),
        },
        {
            "task": task1,
            "method": "extreme deconvolution (assumes Gaussian noise)",
            "ISE": ise(np.exp(xd1.log_density(GRID))),
            "W1 latent": w1(xd1.sample(4000, seed)[:, 0]),
        },
    ]
    run.metric("ise_ratio_xd_laplace", ise(np.exp(xd1.log_density(GRID))) / ise_kde)
    run.metric("ise_ratio_deconvoluting_kde_laplace", ise(f_dkde) / ise_kde)
    run.metric("ise_ratio_gmm_vs_deconvoluting_kde_laplace", ise_gmm / ise(f_dkde))
    run.metric("deconvoluting_kde_bandwidth", dkde1.bandwidth_)
    run.check("gate1_ise_ratio_gmm", ise_gmm / ise_kde)
    f_flow = None
    if n_flow_seeds:
        flow_rows, ratios = [], []
        variants = {
            "zuko NSF, GMM start, 4000 steps at 1e-3 (gated)": FLOW_CONFIG,
            "zuko NSF, standard start, 4000 steps at 1e-3": {**FLOW_CONFIG, "init": "standard"},
            "own spline flow, GMM start, 4000 steps at 1e-3": {**FLOW_CONFIG, "flow": "spline"},
            "own spline flow, standard start, 800 steps at 5e-3 (previous run)": {
                "flow": "spline",
                "n_steps": 800,
                "learning_rate": 5e-3,
                "init": "standard",
            },
        }
        flow_seeds = run.seeds(n_flow_seeds)
        for i, fs in enumerate(run.progress(flow_seeds, "flow sieve (gate 1), per data seed")):
            # the first data set is gate 1's (with its fitted GMM); the ablations run on it only
            if i == 0:
                Xf, sdf, kde_f, gmm_f = X1, sd1, ise_kde, gmm1
            else:
                _, Xf, sdf = noisy_1d(N_GATES, "laplace", np.random.default_rng(fs))
                kde_f = ise(gaussian_kde(Xf)(GRID))
                gmm_f = gmm_sieve("laplace", steps, fs).fit(Xf, noise_sd=sdf)
            for name, cfg in variants.items():
                gated = "gated" in name
                if i > 0 and not gated:
                    continue
                cfg = {"init": gmm_f, **cfg}
                with run.timer("convmmd_flow_laplace") as t:
                    flow = ConvMMDDeconvolver("flow", noise="laplace", random_state=fs, **cfg).fit(
                        Xf, noise_sd=sdf
                    )
                f = flow.density(GRID)
                if gated:
                    ratios.append(ise(f) / kde_f)
                    f_flow = f if f_flow is None else f_flow
                flow_rows.append(
                    {
                        "data seed": fs if i else seed,
                        "flow sieve": name,
                        "ISE / ISE(naive KDE)": ise(f) / kde_f,
                        "seconds": t.seconds,
                    }
                )
        run.table(
            flow_rows, name="flow_sieve", caption="convMMD flow sieve on the gate-1 data (Laplace noise)"
        )
        rows.append({"task": task1, "method": "convMMD-flow (zuko NSF, GMM start)", "ISE": ise(f_flow)})
        run.check("gate1_ise_ratio_flow", ratios)

    # --- gate 2: empirical-Bayes denoising under Gaussian (super-smooth) noise ---------------------------
    rng = np.random.default_rng(seed + 1)
    Z2, X2, sd2 = noisy_1d(N_GATES, "gaussian", rng)
    with run.timer("convmmd_gmm_gaussian"):
        gmm2 = gmm_sieve("gaussian", steps, seed).fit(X2, noise_sd=sd2)
    mse = lambda est: float(np.mean((np.ravel(est) - Z2) ** 2))  # noqa: E731
    mse_conv = mse(gmm2.denoise(X2, sd2))
    fine = np.linspace(-12.0, 13.0, 5001)
    mse_oracle = mse(grid_posterior_mean(X2, sd2, "gaussian", fine, latent_pdf(fine)))
    g2 = np.linspace(X2.min(), X2.max(), 300)
    mse_npmle = mse(grid_posterior_mean(X2, sd2, "gaussian", g2, npmle_grid(X2, sd2, "gaussian", g2)))
    with run.timer("extreme deconvolution (1-D)"):
        xd2 = ExtremeDeconvolution(GMM_CONFIG["n_components"], random_state=seed).fit(X2, noise_sd=sd2)
    mse_xd = mse(xd2.denoise(X2, sd2))
    mse_noisy = mse(X2)
    methods = [
        ("convMMD-GMM EB (closed form)", mse_conv),
        ("extreme deconvolution EB (XD-EM, K=10)", mse_xd),
        ("NPMLE-EB", mse_npmle),
        ("noisy observation", mse_noisy),
        ("oracle Bayes", mse_oracle),
    ]
    try:
        from astroML.density_estimation import XDGMM
    except ImportError:
        XDGMM = None
        run.note("astroML is not installed: the astroML XDGMM row is omitted (pip install astroML)")
    if (
        run.full and XDGMM is not None
    ):  # astroML's XDGMM (it loops over the n K inverses): the peer of our XD-EM
        from .deconvolver import gmm_gaussian_posterior_mean

        with run.timer("astroML XDGMM (1-D)"):
            ax = XDGMM(GMM_CONFIG["n_components"], random_state=seed).fit(
                X2[:, None], (sd2**2)[:, None, None]
            )
        mse_ax = mse(gmm_gaussian_posterior_mean(ax.alpha, ax.mu, ax.V, X2[:, None], sd2[:, None]))
        methods.insert(2, ("extreme deconvolution EB (astroML XDGMM)", mse_ax))
        run.metric("mse_ratio_astroml_xd_vs_ours", mse_ax / mse_xd)
    for name, v in methods:
        rows.append({"task": "1D Gaussian noise denoising", "method": name, "MSE": v})
    run.metric("mse_ratio_npmle", mse_conv / mse_npmle)
    run.metric("mse_ratio_xd", mse_conv / mse_xd)
    run.check("gate2a_mse_vs_noisy", mse_conv / mse_noisy)
    run.check("gate2b_mse_vs_oracle", mse_conv / mse_oracle)

    # --- gate 3: 2-D ring, over data seeds ------------------------------------------------------------------
    ring_seeds = [seed] + run.seeds(n_ring_seeds)[1:]
    with run.timer("convmmd_gmm_ring"):
        rings = [
            _ring_seed(s, steps, w1_points, w1_draws) for s in run.progress(ring_seeds, "ring, per data seed")
        ]
    for r in rings:
        task = f"2D ring (seed {r['seed']})"
        for method, key in (
            ("convMMD-GMM (K=10)", "ratio"),
            ("extreme deconvolution (K=10)", "ratio_xd"),
            ("true latent sample (finite-sample floor)", "ratio_floor"),
        ):
            rows.append({"task": task, "method": method, "W1 ratio to noisy X": float(np.mean(r[key]))})
    ratios = [v for r in rings for v in r["ratio"]]
    floors = [v for r in rings for v in r["ratio_floor"]]
    run.metric("ring_ratio_values", ratios)
    run.metric("ring_ratio_min", float(np.min(ratios)))
    run.metric("ring_ratio_max", float(np.max(ratios)))
    run.metric("ring_ratio_xd_mean", float(np.mean([v for r in rings for v in r["ratio_xd"]])))
    run.metric("ring_floor_mean", float(np.mean(floors)))
    run.check("gate3_ring_w1_ratio", ratios)

    # the importance-sampled posterior means (the flow's route; here on the GMM, where the closed form is the
    # reference) with the digest's two-half agreement diagnostic
    first = rings[0]
    Zr, Xr, sdr = first["data"]
    n_is = run.param("is_rows", quick=300, full=3000)
    # 4096 draws gave a 95th-percentile half gap just above the 0.1 tolerance, and that gap is what Monte Carlo
    # noise predicts at its ESS (is_half_gap_z_q95: the gap in units of its own standard error stays at or below
    # the 95th percentile of the larger of two |N(0, 1)|), so the estimator is sound and the budget was short:
    # the gap falls as 1 / sqrt(draws) (the digest allows 128 to 32768)
    n_draws = run.param("is_draws", quick=8192, full=16384)
    closed = first["est"].denoise(Xr[:n_is], sdr[:n_is])
    with run.timer("importance-sampled posterior means"):
        imp, info = first["est"].denoise(
            Xr[:n_is],
            sdr[:n_is],
            n_draws=n_draws,
            random_state=seed,
            method="importance",
            return_diagnostics=True,
        )
    mse_r = lambda P: float(np.mean(np.sum((P - Zr[:n_is]) ** 2, axis=1)))  # noqa: E731
    run.metric("is_half_gap_q95", info["half_gap_q95"])
    # the same gap in units of its Monte Carlo standard error sqrt(1/ESS_1 + 1/ESS_2) (per posterior sd): at most
    # about 2.24 (the 95th percentile of the larger of two |N(0, 1)|; the ESS-based error is conservative) when
    # the halves differ by sampling noise only
    z_gap = info["half_gap"] / np.sqrt((1.0 / info["ess"]).sum(1))
    run.metric("is_half_gap_z_q95", float(np.quantile(z_gap, 0.95)))
    run.metric("is_vs_closed_form_max_abs", float(np.max(np.abs(imp - closed))))
    run.metric("is_min_ess_per_half", float(info["ess"].min()))
    run.table(
        [
            {"posterior mean": "closed form (GMM, Gaussian noise)", "MSE vs true Z": mse_r(closed)},
            {
                "posterior mean": f"importance sampling, {n_draws} draws (two halves)",
                "MSE vs true Z": mse_r(imp),
                "two-half gap, 95th pct (posterior sds)": info["half_gap_q95"],
            },
            {"posterior mean": "noisy observation", "MSE vs true Z": mse_r(Xr[:n_is])},
        ],
        name="ring_denoising",
        caption="Ring denoising: the importance sampler against the closed form, with the two-half diagnostic",
    )

    # --- gate 4 (full): rates, ordinary-smooth vs super-smooth noise --------------------------------------
    if run.full:
        ns, seeds = [500, 2000, 8000], run.seeds(3)
        rate_rows, slopes = [], {}
        for noise in ("laplace", "gaussian"):
            means = []
            for m in run.progress(ns, f"rates ({noise} noise)"):
                vals = []
                for s in seeds:
                    _, Xs, sds = noisy_1d(m, noise, np.random.default_rng(s))
                    vals.append(ise(gmm_sieve(noise, steps, s).fit(Xs, noise_sd=sds).density(GRID)))
                means.append(float(np.mean(vals)))
                rate_rows.append({"noise": noise, "n": m, "mean ISE": means[-1], "ISE per seed": vals})
            fit = loglog_slope(ns, means)
            slopes[noise] = fit.slope
            run.metric(f"log_ise_slope_{noise}", fit.slope)
        run.table(rate_rows, name="rates", caption="Mean ISE of convMMD-GMM over 3 seeds per n")
        run.check("gate4_slope_difference", slopes["laplace"] - slopes["gaussian"])

    run.table(
        rows, name="results", caption="convMMD against naive KDE, NPMLE-EB, XD and oracle Bayes (same data)"
    )
    run.note("NPMLE is a discrete prior, so its ISE is undefined; its latent W1 is reported instead")

    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    ax[0].plot(GRID, latent_pdf(GRID), "k", lw=2, label="true latent density")
    ax[0].plot(GRID, f_gmm, "C0", label=f"convMMD-GMM (ISE {ise_gmm:.4f})")
    if f_flow is not None:
        ax[0].plot(GRID, f_flow, "C2", label=f"convMMD-flow (ISE {ise(f_flow):.4f})")
    ax[0].plot(GRID, f_kde, "C1--", label=f"naive KDE of X (ISE {ise_kde:.4f})")
    ax[0].plot(GRID, f_dkde, "C4:", label=f"deconvoluting-kernel KDE (ISE {ise(f_dkde):.4f})")
    ax[0].set(
        xlim=(-7, 8), xlabel="z", ylabel="density", title="1-D, heteroscedastic Laplace noise, n = 4000"
    )
    ax[0].legend(fontsize=8)
    S = first["est"].sample(w1_points, seed)
    ax[1].scatter(*Xr[:w1_points].T, s=2, c="C1", alpha=0.3, label="noisy X")
    ax[1].scatter(*S.T, s=2, c="C0", alpha=0.5, label="convMMD latent samples")
    t = np.linspace(0, 2 * np.pi, 200)
    ax[1].plot(2 * np.cos(t), 2 * np.sin(t), "k", lw=1, label="true ring")
    ax[1].set(
        aspect="equal", title=f"2-D ring: W1 ratio {np.mean(first['ratio']):.3f} (seed {first['seed']})"
    )
    ax[1].legend(fontsize=8, markerscale=4)
    run.figure(fig, "latent_density", caption="True against estimated latent density (left) and ring (right)")
