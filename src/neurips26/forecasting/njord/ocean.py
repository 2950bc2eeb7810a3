"""A synthetic stochastic ocean on an irregular sea mask, with known dynamics.

Two fields on the sea cells of an ``n x n`` grid: a tracer ``T`` ("SST") and a height ``eta``. Each "day" is
``substeps`` semi-Lagrangian steps: ``T`` is advected by ``u = grad-perp(psi_known + psi_hidden)`` (the stream
function tapered to zero on land, so the flow follows the coast), diffused with zero flux at land, and relaxed
to a latitude profile; ``eta`` relaxes towards the total stream function. ``psi_known`` (a few slowly drifting
large-scale modes) is the forcing a model is given; ``psi_hidden`` is an unobserved Ornstein-Uhlenbeck eddy
field, so forecasts carry genuine uncertainty that grows with lead time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

__all__ = ["make_sea_mask", "OceanRun", "simulate_ocean"]


def make_sea_mask(
    n: int, rng: np.random.Generator, sea_fraction: float = 0.65, n_islands: int = 3
) -> np.ndarray:
    """Boolean (n, n) sea mask: thresholded smooth noise + a coastline ramp + small islands, walls on the
    border, and only the largest connected sea basin kept (no lakes)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 12:
        raise ValueError(f"n must be an integer >= 12, got {n!r}")
    if not 0.2 <= sea_fraction <= 0.9:
        raise ValueError(f"sea_fraction must be in [0.2, 0.9], got {sea_fraction!r}")
    field = ndimage.gaussian_filter(rng.normal(size=(n, n)), sigma=n / 8, mode="reflect")
    field = field / field.std() + np.linspace(-1.2, 1.2, n)[None, :]  # land mostly on one side (a coast)
    # the border walls, islands and dropped lakes take ~15% of the cells: threshold a little above the target
    sea = field < np.quantile(field, min(sea_fraction + 0.15, 0.95))
    yy, xx = np.mgrid[:n, :n]
    for _ in range(n_islands):
        cells = np.argwhere(sea)
        cy, cx = cells[rng.integers(len(cells))]
        r = rng.uniform(1.2, 0.08 * n)
        sea &= (yy - cy) ** 2 + (xx - cx) ** 2 > r**2
    sea[0, :] = sea[-1, :] = sea[:, 0] = sea[:, -1] = False
    labels, k = ndimage.label(sea)
    if k == 0:
        raise ValueError("the generated mask has no sea")
    sizes = ndimage.sum(sea, labels, index=np.arange(1, k + 1))
    return labels == 1 + int(np.argmax(sizes))


@dataclass(frozen=True)
class OceanRun:
    """Daily states ``(days, 2, n, n)`` (T, eta; land = 0), forcing ``(days, n, n)`` and the sea mask."""

    mask: np.ndarray
    states: np.ndarray
    forcing: np.ndarray
    hidden: np.ndarray

    @property
    def n_days(self) -> int:
        return len(self.states)


def _smooth_noise(rng, n, sigma):
    f = ndimage.gaussian_filter(rng.normal(size=(n, n)), sigma=sigma, mode="wrap")
    return f / f.std()


def simulate_ocean(
    mask: np.ndarray,
    n_days: int,
    rng: np.random.Generator,
    *,
    substeps: int = 6,
    hidden_amplitude: float = 1.0,
    hidden_tau: float = 4.0,
    spinup: int = 20,
    flow_speed: float = 1.0,
) -> OceanRun:
    """Simulate ``n_days`` daily states on ``mask`` (after ``spinup`` days); ``flow_speed`` scales the advecting
    velocity (1: one to two cells per day), so larger values make information travel further per day."""
    mask = np.asarray(mask)
    if mask.ndim != 2 or mask.dtype != bool or mask.shape[0] != mask.shape[1]:
        raise ValueError("mask must be a square boolean array")
    if not mask.any():
        raise ValueError("mask must contain sea cells")
    if isinstance(n_days, bool) or not isinstance(n_days, (int, np.integer)) or n_days < 1:
        raise ValueError(f"n_days must be a positive integer, got {n_days!r}")
    if not (hidden_amplitude >= 0 and hidden_tau > 0):
        raise ValueError("hidden_amplitude must be >= 0 and hidden_tau > 0")
    if not (np.isfinite(flow_speed) and 0 < flow_speed <= 4):
        raise ValueError(f"flow_speed must be in (0, 4], got {flow_speed!r}")
    n = mask.shape[0]
    yy, xx = np.mgrid[:n, :n].astype(float)
    taper = np.clip(ndimage.gaussian_filter(mask.astype(float), 1.0) * 2 - 0.6, 0, 1) * mask
    # nearest sea cell of every cell: land values are filled from it (zero-flux advection near coasts)
    _, (iy, ix) = ndimage.distance_transform_edt(~mask, return_indices=True)
    t_lat = 1.0 - 2.0 * yy / (n - 1)  # warm "south" (row 0) to cold "north"
    amp_known = 0.4 * n  # stream-function scale: velocities of one to two cells per day
    modes = [
        (rng.uniform(0.5, 1.5), rng.uniform(0.5, 1.5), rng.uniform(0, 2 * np.pi), rng.uniform(30, 70))
        for _ in range(3)
    ]

    def psi_known(day: float) -> np.ndarray:
        out = np.zeros((n, n))
        for kx, ky, ph, period in modes:
            out += np.sin(np.pi * kx * xx / n + ph + 2 * np.pi * day / period) * np.sin(np.pi * ky * yy / n)
        return amp_known * out / len(modes) * 1.5

    dt = 1.0 / substeps
    rho = np.exp(-dt / hidden_tau)
    # OU innovations from a fixed pool of smooth fields (a random combination each sub-step is again a smooth
    # Gaussian field; far cheaper than filtering fresh noise 10 times a day)
    pool = np.stack([_smooth_noise(rng, n, n / 10).ravel() for _ in range(48)])
    hidden = hidden_amplitude * amp_known * 0.5 * _smooth_noise(rng, n, n / 10)
    T = np.where(mask, t_lat + 0.3 * _smooth_noise(rng, n, n / 10), 0.0)
    eta = np.zeros((n, n))
    states, forcing, hid = [], [], []
    neighbours = [(1, 0), (-1, 0), (0, 1), (0, -1)]
    nb_masks = [np.roll(mask, d, axis=(0, 1)).astype(float) for d in neighbours]
    for day in range(spinup + n_days):
        for s in range(substeps):
            now = day + s * dt
            innov = (rng.normal(size=len(pool)) @ pool).reshape(n, n) / np.sqrt(len(pool))
            hidden = rho * hidden + np.sqrt(1 - rho**2) * hidden_amplitude * amp_known * 0.5 * innov
            psi = (psi_known(now) + hidden) * taper
            u = -flow_speed * np.gradient(psi, axis=0)  # x velocity = -d psi / dy
            v = flow_speed * np.gradient(psi, axis=1)  # y velocity = d psi / dx
            filled = T[iy, ix]
            T = ndimage.map_coordinates(filled, [yy - v * dt, xx - u * dt], order=1, mode="nearest")
            # zero-flux diffusion: only sea-sea differences
            lap = np.zeros((n, n))
            for (dy, dx), nb_mask in zip(neighbours, nb_masks):
                lap += nb_mask * (np.roll(T, (dy, dx), axis=(0, 1)) - T)
            T = T + dt * (0.15 * lap + 0.05 * (t_lat - T))
            T = np.where(mask, T, 0.0)
            eta = eta + dt * 0.5 * (psi / amp_known - eta)
        if day >= spinup:
            states.append(np.stack([T, np.where(mask, eta, 0.0)]))
            forcing.append(np.where(mask, psi_known(day + 1.0) / amp_known, 0.0))
            hid.append(hidden * taper / amp_known)
    return OceanRun(mask, np.asarray(states), np.asarray(forcing), np.asarray(hid))
