"""Test manifolds with closed-form heat kernels (the reproduction's ground truth).

- Swiss roll: the rectangle ``[0, L] x [0, H]`` in intrinsic (arc length, height) coordinates, rolled isometrically
  onto the spiral ``r(theta) = theta`` in R^3. Heat kernel with Neumann boundary: product of 1-D reflected
  Gaussians, ``k_t(x, y) = sum_n G(x - y + 2nL) + G(x + y + 2nL)``, ``G(z) = exp(-z^2/4t)/sqrt(4 pi t)``.
- Flat torus ``[0, 2pi)^2`` embedded in R^4 as ``(cos a, sin a, cos b, sin b)``: product of wrapped Gaussians.
- Unit sphere S^2: ``k_t = sum_l (2l+1)/(4 pi) exp(-l(l+1) t) P_l(cos angle)``.
- Periodic square lattice ``h Z^2 / (side Z^2)`` for the Gaussian-rediscovery check.

All heat kernels are with respect to the Riemannian volume (``d/dt k = Laplace-Beltrami k``).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.special import eval_legendre
from scipy.stats import qmc

THETA0, THETA1 = 1.5 * np.pi, 4.5 * np.pi  # the spiral's angle range (as sklearn's make_swiss_roll)


def _arc_length(theta: np.ndarray) -> np.ndarray:
    # arc length of r = theta from 0: (theta sqrt(1+theta^2) + asinh(theta)) / 2
    return 0.5 * (theta * np.sqrt(1.0 + theta**2) + np.arcsinh(theta))


def swiss_roll_length() -> float:
    """Intrinsic length ``L`` of the rolled side (arc length of the spiral over ``[THETA0, THETA1]``)."""
    return float(_arc_length(np.array(THETA1)) - _arc_length(np.array(THETA0)))


def swiss_roll_embed(uv: np.ndarray) -> np.ndarray:
    """Map intrinsic ``(s, h)`` (arc length, height) to R^3, isometrically."""
    grid = np.linspace(THETA0, THETA1, 20001)
    s_grid = _arc_length(grid) - _arc_length(np.array(THETA0))
    theta = np.interp(uv[:, 0], s_grid, grid)
    return np.column_stack([theta * np.cos(theta), uv[:, 1], theta * np.sin(theta)])


def sample_rectangle(n: int, height: float, rng: np.random.Generator, quasi: bool) -> np.ndarray:
    """``n`` points in ``[0, L] x [0, height]``: scrambled Halton (quasi-uniform) or i.i.d. uniform."""
    length = swiss_roll_length()
    if quasi:
        u = qmc.Halton(d=2, scramble=True, seed=rng).random(n)
    else:
        u = rng.random((n, 2))
    return u * np.array([length, height])


def _neumann_1d(x: np.ndarray, y: np.ndarray, length: float, t: float, n_images: int = 3) -> np.ndarray:
    d = x[:, None] - y[None, :]
    s = x[:, None] + y[None, :]
    out = np.zeros_like(d)
    for n in range(-n_images, n_images + 1):
        out += np.exp(-((d + 2 * n * length) ** 2) / (4 * t)) + np.exp(-((s + 2 * n * length) ** 2) / (4 * t))
    return out / np.sqrt(4 * np.pi * t)


def swiss_roll_heat_kernel(uv_a: np.ndarray, uv_b: np.ndarray, t: float, height: float) -> np.ndarray:
    """Neumann heat kernel on the rectangle ``[0, L] x [0, height]`` between intrinsic coordinates."""
    return _neumann_1d(uv_a[:, 0], uv_b[:, 0], swiss_roll_length(), t) * _neumann_1d(
        uv_a[:, 1], uv_b[:, 1], height, t
    )


def _wrapped_1d(a: np.ndarray, b: np.ndarray, period: float, t: float, n_images: int = 3) -> np.ndarray:
    d = a[:, None] - b[None, :]
    out = np.zeros_like(d)
    for n in range(-n_images, n_images + 1):
        out += np.exp(-((d + n * period) ** 2) / (4 * t))
    return out / np.sqrt(4 * np.pi * t)


def torus_embed(ab: np.ndarray) -> np.ndarray:
    """Flat torus angles ``(a, b)`` to R^4."""
    return np.column_stack([np.cos(ab[:, 0]), np.sin(ab[:, 0]), np.cos(ab[:, 1]), np.sin(ab[:, 1])])


def torus_heat_kernel(ab_a: np.ndarray, ab_b: np.ndarray, t: float) -> np.ndarray:
    """Heat kernel of the flat torus ``[0, 2pi)^2``: a product of wrapped Gaussians."""
    two_pi = 2 * np.pi
    return _wrapped_1d(ab_a[:, 0], ab_b[:, 0], two_pi, t) * _wrapped_1d(ab_a[:, 1], ab_b[:, 1], two_pi, t)


def sample_torus(n: int, rng: np.random.Generator, quasi: bool) -> np.ndarray:
    u = qmc.Halton(d=2, scramble=True, seed=rng).random(n) if quasi else rng.random((n, 2))
    return 2 * np.pi * u


def fibonacci_sphere(n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` quasi-uniform points on S^2 (Fibonacci lattice with a random rotation about the z axis)."""
    i = np.arange(n) + 0.5
    z = 1 - 2 * i / n
    phi = np.pi * (1 + 5**0.5) * i + rng.uniform(0, 2 * np.pi)
    r = np.sqrt(1 - z**2)
    return np.column_stack([r * np.cos(phi), r * np.sin(phi), z])


def sample_sphere(n: int, rng: np.random.Generator) -> np.ndarray:
    x = rng.standard_normal((n, 3))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def sphere_heat_kernel(xa: np.ndarray, xb: np.ndarray, t: float, tol: float = 1e-14) -> np.ndarray:
    """Heat kernel on the unit sphere S^2 by its Legendre series (truncated where ``e^{-l(l+1)t} < tol``)."""
    c = np.clip(xa @ xb.T, -1.0, 1.0)
    l_max = int(np.ceil(np.sqrt(-np.log(tol) / t))) + 2
    out = np.zeros_like(c)
    for ell in range(l_max + 1):
        out += (2 * ell + 1) / (4 * np.pi) * np.exp(-ell * (ell + 1) * t) * eval_legendre(ell, c)
    return out


def periodic_lattice(side: float, spacing: float) -> tuple[np.ndarray, sp.csr_matrix]:
    """Points and unit-weight 4-neighbour adjacency of the periodic lattice ``spacing Z^2`` on a torus ``side^2``."""
    k = int(round(side / spacing))
    if abs(k * spacing - side) > 1e-9 * side:
        raise ValueError("side must be a multiple of spacing")
    ii, jj = np.meshgrid(np.arange(k), np.arange(k), indexing="ij")
    idx = (ii * k + jj).ravel()
    right = (ii * k + (jj + 1) % k).ravel()
    down = (((ii + 1) % k) * k + jj).ravel()
    rows = np.concatenate([idx, right, idx, down])
    cols = np.concatenate([right, idx, down, idx])
    adj = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(k * k, k * k))
    points = np.column_stack([ii.ravel(), jj.ravel()]).astype(float) * spacing
    return points, adj
