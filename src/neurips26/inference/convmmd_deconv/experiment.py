"""Reproduction of convMMD (digest ``convmmd-deconv``): deconvolution, denoising and a 2-D ring.

Data follow the digest (generated here): 1-D latent ``0.6 Laplace(3, sd 0.8) + 0.4 Laplace(-2, sd 1)`` with
heteroscedastic noise ``sd_i ~ U(0.5, 1.0)`` (Laplace or Gaussian); 2-D ring of radius 2 (radial jitter sd 0.1,
our choice) with Gaussian noise ``sd_i ~ U(0.2, 0.6)``.

Gates (thresholds fixed by the digest):
1. Laplace noise, n = 4000: ISE(convMMD-GMM, K = 10) <= 0.5 x ISE(naive KDE of X) (full mode: the flow too);
2. Gaussian noise, n = 4000: EB MSE(convMMD) <= 0.75 x noisy MSE and <= 1.2 x oracle-Bayes MSE; the ratio to
   NPMLE-EB is reported (target <= 1.15);
3. 2-D ring: W1(convMMD latent samples, truth) <= 0.5 x W1(noisy X, truth);
4. full mode only: n in {500, 2000, 8000} x 3 seeds; the log-ISE vs log-n slope under Laplace noise is steeper
   than under Gaussian noise.
Baselines beside: naive KDE of X (scipy), NPMLE-EB on a 300-point grid (EM), oracle Bayes with the true prior.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import ot
from scipy.stats import gaussian_kde, wasserstein_distance

from neurips26.harness import Run

from .deconvolver import ConvMMDDeconvolver
from .grid_bayes import grid_posterior_mean, npmle_grid
from .noise import sample_noise_np

B1, B2 = 0.8 / np.sqrt(2.0), 1.0 / np.sqrt(2.0)  # Laplace scales from the stated standard deviations
GRID = np.linspace(-9.0, 10.0, 3801)


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


def _gmm(noise: str, K: int, steps: int, seed: int, **kw) -> ConvMMDDeconvolver:
    kw = {"samples_per_component": 32, **kw}
    return ConvMMDDeconvolver("gmm", n_components=K, noise=noise, n_steps=steps, random_state=seed, **kw)


def _ring_data(seed: int, n: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed + 2)
    Z = ring(n, rng)
    sd = rng.uniform(0.2, 0.6, n)
    return Z, Z + sd[:, None] * rng.standard_normal((n, 2)), sd


def _ring_ratio(seed: int, n: int, steps: int, m_w1: int) -> float:
    """Gate 3's ratio on a fresh ring data set (for the seed spread in full mode)."""
    _, X, sd = _ring_data(seed, n)
    est = _gmm("gaussian", 16, steps, seed, learning_rate=0.05).fit(X, sd)
    truth = ring(m_w1, np.random.default_rng(seed + 3))
    return w1_2d(est.sample(m_w1, seed), truth) / w1_2d(X[:m_w1], truth)


def run(run: Run) -> None:
    n = 4000  # the digest's n for gates 1 and 2 (both modes)
    steps = run.pick(quick=400, full=800)
    seed = run.seed
    rows: list[dict] = []

    # --- gate 1: deconvolution under Laplace (ordinary-smooth) noise ------------------------------------
    rng = np.random.default_rng(seed)
    Z1, X1, sd1 = noisy_1d(n, "laplace", rng)
    with run.timer("convmmd_gmm_laplace"):
        gmm1 = _gmm("laplace", 10, steps, seed).fit(X1, sd1)
    f_gmm = gmm1.density(GRID)
    f_kde = gaussian_kde(X1)(GRID)
    p_np = npmle_grid(X1, sd1, "laplace", np.linspace(X1.min(), X1.max(), 300))
    ise_gmm, ise_kde = ise(f_gmm), ise(f_kde)
    grid_np = np.linspace(X1.min(), X1.max(), 300)
    w1 = lambda S: wasserstein_distance(S, Z1)  # noqa: E731
    rows += [
        {
            "task": "1D Laplace noise",
            "method": "convMMD-GMM (K=10)",
            "ISE": ise_gmm,
            "W1 latent": w1(gmm1.sample(n, seed)[:, 0]),
        },
        {"task": "1D Laplace noise", "method": "naive KDE of X", "ISE": ise_kde, "W1 latent": w1(X1)},
        {
            "task": "1D Laplace noise",
            "method": "NPMLE (grid EM)",
            "ISE": None,
            "W1 latent": wasserstein_distance(grid_np, Z1, u_weights=p_np),
        },
    ]
    run.check("gate 1: ISE(convMMD-GMM) / ISE(naive KDE), Laplace noise", ise_gmm / ise_kde, "<=", 0.5)
    f_flow = None
    if run.full:
        run.expect(
            "partial",
            reason="our hand-written spline-flow sieve (reconstructed; no nflows) misses the flow variant of gate 1 "
            "in development runs on seed 0: ISE ratio to naive KDE 0.54 after 400 steps and 0.64 after 800 "
            "steps at lr 5e-3 (0.79 at lr 2e-2), against the threshold 0.5; the GMM sieve meets gate 1 at 0.12. "
            "The authors train 500 epochs (about 4000 steps); we did not reach that budget on 2 cores.",
        )
        with run.timer("convmmd_flow_laplace"):
            flow = ConvMMDDeconvolver(
                "flow", noise="laplace", n_steps=steps, learning_rate=5e-3, random_state=seed
            ).fit(X1, sd1)
        f_flow = flow.density(GRID)
        rows.append(
            {
                "task": "1D Laplace noise",
                "method": "convMMD-flow",
                "ISE": ise(f_flow),
                "W1 latent": w1(flow.sample(n, seed)[:, 0]),
            }
        )
        run.check(
            "gate 1 (flow): ISE(convMMD-flow) / ISE(naive KDE), Laplace noise",
            ise(f_flow) / ise_kde,
            "<=",
            0.5,
        )

    # --- gate 2: empirical-Bayes denoising under Gaussian (super-smooth) noise ---------------------------
    rng = np.random.default_rng(seed + 1)
    Z2, X2, sd2 = noisy_1d(n, "gaussian", rng)
    with run.timer("convmmd_gmm_gaussian"):
        gmm2 = _gmm("gaussian", 10, steps, seed).fit(X2, sd2)
    mse = lambda est: float(np.mean((np.ravel(est) - Z2) ** 2))  # noqa: E731
    mse_conv = mse(gmm2.denoise(X2, sd2))
    fine = np.linspace(-12.0, 13.0, 5001)
    mse_oracle = mse(grid_posterior_mean(X2, sd2, "gaussian", fine, latent_pdf(fine)))
    g2 = np.linspace(X2.min(), X2.max(), 300)
    mse_npmle = mse(grid_posterior_mean(X2, sd2, "gaussian", g2, npmle_grid(X2, sd2, "gaussian", g2)))
    mse_noisy = mse(X2)
    for name, v in [
        ("convMMD-GMM EB (closed form)", mse_conv),
        ("noisy observation", mse_noisy),
        ("NPMLE-EB", mse_npmle),
        ("oracle Bayes", mse_oracle),
    ]:
        rows.append({"task": "1D Gaussian noise denoising", "method": name, "MSE": v})
    run.check("gate 2a: MSE(convMMD) / noisy MSE", mse_conv / mse_noisy, "<=", 0.75)
    run.check("gate 2b: MSE(convMMD) / oracle-Bayes MSE", mse_conv / mse_oracle, "<=", 1.2)
    run.metric("MSE(convMMD) / MSE(NPMLE-EB) (target <= 1.15)", mse_conv / mse_npmle)

    # --- gate 3: 2-D ring ---------------------------------------------------------------------------------
    n_ring = 3000
    Zr, Xr, sdr = _ring_data(seed, n_ring)
    with run.timer("convmmd_gmm_ring"):
        # the ring's thin radial profile needs a longer schedule: twice the steps at a higher peak rate
        gmm3 = _gmm("gaussian", 16, 2 * steps, seed, learning_rate=0.05).fit(Xr, sdr)
    m_w1 = 2500
    truth = ring(m_w1, np.random.default_rng(seed + 3))  # a fresh truth sample: no shared draws
    w1_conv = w1_2d(gmm3.sample(m_w1, seed), truth)
    w1_noisy = w1_2d(Xr[:m_w1], truth)
    w1_floor = w1_2d(Zr[:m_w1], truth)
    rows += [
        {"task": "2D ring", "method": f"convMMD-GMM (K=16, {2 * steps} steps)", "W1 latent": w1_conv},
        {"task": "2D ring", "method": "noisy X", "W1 latent": w1_noisy},
        {"task": "2D ring", "method": "true latent sample (finite-sample floor)", "W1 latent": w1_floor},
    ]
    gate3 = "gate 3: W1(convMMD latent, truth) / W1(noisy X, truth), 2D ring"
    run.check(gate3, w1_conv / w1_noisy, "<=", 0.5)
    if run.full:  # the ring gate sits close to its threshold: show its spread over fresh data seeds
        spread = [_ring_ratio(s, n_ring, 2 * steps, m_w1) for s in run.progress(run.seeds(3), "ring seeds")]
        run.metric("gate 3 ratio over 3 further data seeds", spread)
        run.note(
            f"ring W1 ratio over 3 further seeds: {', '.join(f'{v:.3f}' for v in spread)} (threshold 0.5)"
        )
    else:
        run.note("the ring gate has little margin; full mode reports its spread over 3 further data seeds")

    # --- gate 4 (full): rates, ordinary-smooth vs super-smooth noise --------------------------------------
    slopes: dict[str, float] = {}
    if run.full:
        ns, seeds = [500, 2000, 8000], run.seeds(3)
        rate_rows = []
        for noise in ("laplace", "gaussian"):
            logs = []
            for m in run.progress(ns, f"rates ({noise} noise)"):
                vals = []
                for s in seeds:
                    _, Xs, sds = noisy_1d(m, noise, np.random.default_rng(s))
                    vals.append(ise(_gmm(noise, 10, steps, s).fit(Xs, sds).density(GRID)))
                logs.append(np.log(np.mean(vals)))
                rate_rows.append({"noise": noise, "n": m, "mean ISE": float(np.mean(vals))})
            slopes[noise] = float(np.polyfit(np.log(ns), logs, 1)[0])
        run.table(rate_rows, name="rates", caption="Mean ISE of convMMD-GMM over 3 seeds per n")
        run.metric("log-ISE slope, Laplace noise", slopes["laplace"])
        run.metric("log-ISE slope, Gaussian noise", slopes["gaussian"])
        run.check(
            "gate 4: slope(Laplace) - slope(Gaussian) (steeper under ordinary-smooth noise)",
            slopes["laplace"] - slopes["gaussian"],
            "<",
            0.0,
        )

    run.table(
        rows, name="results", caption="convMMD against naive KDE, NPMLE-EB and oracle Bayes (same data)"
    )
    if run.quick:
        run.note(
            "quick mode: GMM sieve only, 400 steps, one seed; the flow gate and the rate grid run in full mode"
        )
    run.note("NPMLE is a discrete prior, so its ISE is undefined; its latent W1 is reported instead")

    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    ax[0].plot(GRID, latent_pdf(GRID), "k", lw=2, label="true latent density")
    ax[0].plot(GRID, f_gmm, "C0", label=f"convMMD-GMM (ISE {ise_gmm:.4f})")
    if f_flow is not None:
        ax[0].plot(GRID, f_flow, "C2", label=f"convMMD-flow (ISE {ise(f_flow):.4f})")
    ax[0].plot(GRID, f_kde, "C1--", label=f"naive KDE of X (ISE {ise_kde:.4f})")
    ax[0].set(
        xlim=(-7, 8), xlabel="z", ylabel="density", title="1-D, heteroscedastic Laplace noise, n = 4000"
    )
    ax[0].legend(fontsize=8)
    S = gmm3.sample(m_w1, seed)
    ax[1].scatter(*Xr[:m_w1].T, s=2, c="C1", alpha=0.3, label="noisy X")
    ax[1].scatter(*S.T, s=2, c="C0", alpha=0.5, label="convMMD latent samples")
    t = np.linspace(0, 2 * np.pi, 200)
    ax[1].plot(2 * np.cos(t), 2 * np.sin(t), "k", lw=1, label="true ring")
    ax[1].set(aspect="equal", title=f"2-D ring: W1 {w1_conv:.3f} vs noisy {w1_noisy:.3f}")
    ax[1].legend(fontsize=8, markerscale=4)
    run.figure(fig, "latent_density", caption="True against estimated latent density (left) and ring (right)")
