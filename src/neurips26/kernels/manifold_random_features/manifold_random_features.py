"""Manifold random features (MRFs): positive, bounded random features for heat kernels on sampled manifolds.

*Manifold Random Features*, Parashar, Long, Saha, Choromanski, arXiv 2602.03797 (2026).

Pipeline (digest stages 1-3):

1. **Discretise.** The training points ``x_1..x_N`` (samples of the manifold, ambient coordinates) become a
   symmetric kNN graph with Gaussian weights ``W_ab = exp(-||x_a - x_b||^2 / h^2)``.
2. **Graph random features.** :class:`GraphRandomFeatures` gives non-negative ``phi(i)`` with
   ``E[phi(i)^T phi(j)] = exp(-sigma2 L)_ij``, ``L = I - D^{-1/2} W D^{-1/2}``; for a fine graph this is, up to one
   time rescaling and a constant, the manifold heat kernel at time ``t`` (graph Laplacian -> Laplace-Beltrami).
   A second-order expansion of ``(L f)(x_i) = f(x_i) - sum_j W_ij f(x_j) / D_i`` gives ``L ~ -(m_i / 2d) Delta``
   with ``m_i = sum_j W_ij ||x_i - x_j||^2 / D_i`` the weighted mean squared edge length and ``d`` the manifold's
   dimension, so ``exp(-sigma2 L) ~ exp(t Delta)`` with ``t = sigma2 mean(m) / (2 d)``: ``heat_time=t`` sets
   ``sigma2`` from the graph itself (:func:`heat_time_to_sigma2`).
3. **Continuous field.** A small MLP ``F_theta`` on ambient coordinates with a bounded positive output
   (``B * sigmoid``) is fit so that ``F_theta(x_i) ~ psi(i)``, the anchor coordinates of ``phi(i)`` (below); then
   ``k_MRF(x, y) = F_theta(x)^T F_theta(y)`` for any ``x, y`` on the manifold, including points not in the graph.

Reconstructed parts [R] (the paper's field architecture and loss were not available):

- anchor coordinates: ``r`` anchors are picked by farthest-point sampling; each node joins the cell of its
  nearest anchor along the graph (multi-source Dijkstra); ``psi(i)_a = sum_{v in cell a} phi(i)_v / sqrt(|cell a|)``,
  i.e. ``psi psi^T = Phi P P^T Phi^T`` with ``P`` the cell-averaging projection (a piecewise-constant quadrature of
  ``sum_v phi_v phi_v``). Pooling uses every walk deposit rather than only the anchors' own columns;
- degree normalisation (``degree_normalization=True``): row ``i`` of ``Phi`` is divided by
  ``sqrt(D_i / mean(D))``. ``exp(-sigma2 L_sym)_ij ~ sqrt(D_i D_j) k_t(x_i, x_j)``, and ``D`` drops near a
  boundary; the correction keeps the Neumann heat kernel's shape there. Features stay non-negative;
- the field's loss is the mean squared error on ``psi`` (full batch, Adam, cosine step size), inputs
  standardised; the GRFs default to importance-weighted neighbour sampling (``neighbor_sampling="weighted"``:
  unbiased, lower variance; ``"uniform"`` is the GRF papers' estimator, see ``graph_random_features``).

The kernel is the heat kernel up to one constant factor (the sampling density); the reproduction fits that
amplitude, and checks the ``heat_time`` rescaling against a calibration of ``sigma2`` on training nodes.
"""

from __future__ import annotations

import math
import warnings
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.neighbors import NearestNeighbors
from sklearn.utils.validation import check_array, check_is_fitted

from .graph_random_features import KERNELS, SAMPLINGS, GraphRandomFeatures, _as_generator


def knn_gaussian_graph(
    X: np.ndarray, n_neighbors: int = 10, bandwidth: float | None = None
) -> tuple[sp.csr_matrix, float]:
    """Symmetric kNN graph of ``X`` with weights ``exp(-d^2 / h^2)``; returns ``(W, h)``.

    ``bandwidth=None`` uses ``h`` = the median distance to the ``n_neighbors``-th neighbour.
    """
    X = check_array(X, ensure_min_samples=2)
    if not isinstance(n_neighbors, Integral) or not 1 <= n_neighbors < X.shape[0]:
        raise ValueError(f"n_neighbors must be an integer in [1, n_samples - 1], got {n_neighbors!r}")
    nn = NearestNeighbors(n_neighbors=n_neighbors + 1).fit(X)
    dist, idx = nn.kneighbors(X)
    dist, idx = dist[:, 1:], idx[:, 1:]
    if bandwidth is None:
        bandwidth = float(np.median(dist[:, -1]))
    if not isinstance(bandwidth, Real) or not math.isfinite(bandwidth) or bandwidth <= 0:
        raise ValueError(f"bandwidth must be a finite positive number, got {bandwidth!r}")
    n = X.shape[0]
    # weights (not distances) go in, so coincident points keep their edge (weight 1, never an implicit zero)
    w = np.maximum(np.exp(-(dist.ravel() ** 2) / bandwidth**2), np.finfo(float).tiny)
    W = sp.csr_matrix((w, (np.repeat(np.arange(n), n_neighbors), idx.ravel())), shape=(n, n))
    W = W.maximum(W.T)  # symmetric: an edge when either end has the other among its kNN
    return sp.csr_matrix(W), float(bandwidth)


def intrinsic_dimension(X: np.ndarray, n_neighbors: int = 10) -> float:
    """Levina-Bickel maximum-likelihood estimate of the intrinsic dimension of the samples ``X``.

    ``1 / mean_i [(1/(k-1)) sum_{j<k} log(T_k(x_i) / T_j(x_i))]`` with ``T_j`` the distance to the ``j``-th
    neighbour (the MacKay-Ghahramani average of the inverse). It is biased upward by a few tenths for small
    ``k``; :class:`ManifoldRandomFeatures` rounds it to an integer.
    """
    X = check_array(X, ensure_min_samples=3)
    if (
        not isinstance(n_neighbors, Integral)
        or isinstance(n_neighbors, bool)
        or not 2 <= n_neighbors < X.shape[0]
    ):
        raise ValueError(f"n_neighbors must be an integer in [2, n_samples - 1], got {n_neighbors!r}")
    dist, _ = NearestNeighbors(n_neighbors=n_neighbors + 1).fit(X).kneighbors(X)
    dist = dist[:, 1:]
    ok = dist[:, 0] > 0  # coincident points carry no scale information
    if not ok.any():
        raise ValueError("X has no two distinct neighbouring points; the dimension is undefined")
    inv = np.mean(np.log(dist[ok, -1:] / dist[ok, :-1]), axis=1)
    return float(1.0 / np.mean(inv))


def heat_time_to_sigma2(W: sp.spmatrix, bandwidth: float, heat_time: float, manifold_dim: int) -> float:
    """Graph diffusion time ``sigma2`` whose ``exp(-sigma2 L)`` approximates the heat kernel at ``heat_time``.

    ``W`` is a Gaussian graph (``W_ab = exp(-d_ab^2 / bandwidth^2)``, as from :func:`knn_gaussian_graph`), so the
    squared edge lengths are ``-bandwidth^2 log W_ab``; ``sigma2 = 2 d t / mean_i m_i`` with
    ``m_i = sum_j W_ij d_ij^2 / D_i`` (see the module docstring).
    """
    for name, v in (("bandwidth", bandwidth), ("heat_time", heat_time)):
        if isinstance(v, bool) or not isinstance(v, Real) or not math.isfinite(v) or v <= 0:
            raise ValueError(f"{name} must be a finite positive number, got {v!r}")
    if isinstance(manifold_dim, bool) or not isinstance(manifold_dim, Integral) or manifold_dim < 1:
        raise ValueError(f"manifold_dim must be an integer >= 1, got {manifold_dim!r}")
    W = sp.csr_matrix(W, dtype=float)
    if W.nnz == 0:
        raise ValueError("W has no edges")
    if W.data.min() <= 0 or W.data.max() > 1:
        raise ValueError("W must hold Gaussian weights in (0, 1]")
    d2 = W.copy()
    d2.data = -(bandwidth**2) * np.log(W.data)
    deg = np.asarray(W.sum(axis=1)).ravel()
    moment = np.asarray(W.multiply(d2).sum(axis=1)).ravel()
    has = deg > 0
    mean_sq = float(np.mean(moment[has] / deg[has]))
    if mean_sq <= 0:
        raise ValueError("W's edges all have zero length; the time scale is undefined")
    return float(2.0 * manifold_dim * heat_time / mean_sq)


def farthest_point_sampling(X: np.ndarray, n_points: int, random_state=None) -> np.ndarray:
    """Indices of ``n_points`` rows of ``X`` chosen greedily to be far apart (first one at random)."""
    n = X.shape[0]
    if not isinstance(n_points, Integral) or not 1 <= n_points <= n:
        raise ValueError(f"n_points must be an integer in [1, {n}], got {n_points!r}")
    rng = _as_generator(random_state)
    chosen = np.empty(n_points, dtype=np.int64)
    chosen[0] = rng.integers(n)
    d2 = np.sum((X - X[chosen[0]]) ** 2, axis=1)
    for k in range(1, n_points):
        chosen[k] = int(np.argmax(d2))
        d2 = np.minimum(d2, np.sum((X - X[chosen[k]]) ** 2, axis=1))
    return chosen


class ManifoldRandomFeatures(TransformerMixin, BaseEstimator):
    """Positive, bounded random features ``F(x)`` with ``F(x)^T F(y) ~ exp(-sigma2 L)`` on a sampled manifold.

    Parameters
    ----------
    n_neighbors : kNN graph degree (>= 1).
    bandwidth : Gaussian edge bandwidth ``h``; ``None`` = median distance to the ``n_neighbors``-th neighbour.
    sigma2 : graph diffusion time (> 0); used when ``heat_time`` is None.
    heat_time : heat-kernel time ``t`` on the manifold (> 0, in the squared units of ``X``); when given,
        ``sigma2`` is set from the graph by :func:`heat_time_to_sigma2` and the ``sigma2`` argument is ignored.
    manifold_dim : the manifold's dimension for ``heat_time``; ``None`` estimates it
        (:func:`intrinsic_dimension`, rounded).
    kernel : ``"diffusion"`` or ``"regularized_laplacian"`` (see :class:`GraphRandomFeatures`).
    n_walks, p_halt, neighbor_sampling : GRF walks per node, halting probability and neighbour choice
        (``"weighted"``, the default: proportional to ``A[u, v]``, a lower-variance unbiased variant;
        ``"uniform"``: each neighbour alike, as in the GRF papers).
    n_anchors : feature dimension ``r``; ``None`` uses every node, and a value above the number of training
        points is clamped to it with a warning (as scikit-learn's ``Nystroem``).
    degree_normalization : divide ``phi(i)`` by ``sqrt(D_i / mean D)`` (see module docstring).
    hidden_width, n_hidden : MLP width (>= 1) and number of hidden layers (>= 1).
    n_steps, learning_rate : full-batch Adam steps and step size for the field.
    output_bound : the field outputs ``output_bound * max(psi) * sigmoid(.)``, so ``0 <= F <= bound_`` (> 1).
    random_state : seed.

    Attributes
    ----------
    grf_ : the fitted :class:`GraphRandomFeatures`.
    anchors_ : indices of the anchor nodes; ``cells_``: each node's anchor cell; ``n_anchors_``: their number.
    node_features_ : ``(N, r)`` pooled GRF coordinates ``psi`` (the field's training targets).
    bound_ : upper bound of every feature returned by :meth:`transform`.
    bandwidth_ : the graph bandwidth used. sigma2_ : the graph diffusion time used.
    manifold_dim_ : the dimension used to convert ``heat_time`` (None without ``heat_time``).
    degree_scale_ : ``sqrt(D_i / mean D)`` (ones without degree normalisation).
    loss_curve_ : training loss per step (relative to ``mean(psi^2)``).
    """

    def __init__(
        self,
        n_neighbors: int = 10,
        bandwidth: float | None = None,
        sigma2: float = 4.0,
        heat_time: float | None = None,
        manifold_dim: int | None = None,
        kernel: str = "diffusion",
        n_walks: int = 64,
        p_halt: float = 0.03,
        neighbor_sampling: str = "weighted",
        n_anchors: int | None = 256,
        degree_normalization: bool = True,
        hidden_width: int = 128,
        n_hidden: int = 2,
        n_steps: int = 300,
        learning_rate: float = 3e-3,
        output_bound: float = 2.0,
        random_state: int | None = None,
    ) -> None:
        self.n_neighbors = n_neighbors
        self.bandwidth = bandwidth
        self.sigma2 = sigma2
        self.heat_time = heat_time
        self.manifold_dim = manifold_dim
        self.kernel = kernel
        self.n_walks = n_walks
        self.p_halt = p_halt
        self.neighbor_sampling = neighbor_sampling
        self.n_anchors = n_anchors
        self.degree_normalization = degree_normalization
        self.hidden_width = hidden_width
        self.n_hidden = n_hidden
        self.n_steps = n_steps
        self.learning_rate = learning_rate
        self.output_bound = output_bound
        self.random_state = random_state

    def _validate_params(self, n: int) -> None:
        def _int(name: str, lo: int, hi: float = math.inf) -> None:
            v = getattr(self, name)
            if not isinstance(v, Integral) or isinstance(v, bool) or not lo <= v <= hi:
                raise ValueError(f"{name} must be an integer in [{lo}, {hi}], got {v!r}")

        def _pos(name: str, lo: float = 0.0) -> None:
            v = getattr(self, name)
            if not isinstance(v, Real) or not math.isfinite(v) or v <= lo:
                raise ValueError(f"{name} must be a finite number > {lo}, got {v!r}")

        _int("n_neighbors", 1, n - 1)
        _int("n_walks", 1)
        _int("hidden_width", 1)
        _int("n_hidden", 1)
        _int("n_steps", 1)
        if self.n_anchors is not None:
            _int("n_anchors", 1)
        _pos("sigma2")
        if self.heat_time is not None:
            _pos("heat_time")
        if self.manifold_dim is not None:
            _int("manifold_dim", 1)
        _pos("learning_rate")
        _pos("output_bound", 1.0)
        if not isinstance(self.p_halt, Real) or not 0.0 < self.p_halt < 1.0:
            raise ValueError(f"p_halt must be in the open interval (0, 1), got {self.p_halt!r}")
        if self.neighbor_sampling not in SAMPLINGS:
            raise ValueError(f"neighbor_sampling must be one of {SAMPLINGS}, got {self.neighbor_sampling!r}")
        if self.kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}, got {self.kernel!r}")

    # --- stage 1 + 2: graph, walks, anchor coordinates ---------------------------------------------------
    def fit(self, X, y=None) -> ManifoldRandomFeatures:
        """Build the graph on ``X`` (``(N, d)`` manifold samples), sample GRFs and fit the field."""
        import torch

        X = check_array(X, ensure_min_samples=2)
        n = X.shape[0]
        self._validate_params(n)
        rng = _as_generator(self.random_state)
        W, self.bandwidth_ = knn_gaussian_graph(X, self.n_neighbors, self.bandwidth)
        if self.heat_time is None:
            self.manifold_dim_ = None
            self.sigma2_ = float(self.sigma2)
        else:
            self.manifold_dim_ = (
                int(self.manifold_dim)
                if self.manifold_dim is not None
                else max(1, round(intrinsic_dimension(X, min(10, n - 1))))
            )
            self.sigma2_ = heat_time_to_sigma2(W, self.bandwidth_, float(self.heat_time), self.manifold_dim_)
        self.grf_ = GraphRandomFeatures(
            n_walks=self.n_walks,
            p_halt=self.p_halt,
            sigma2=self.sigma2_,
            kernel=self.kernel,
            neighbor_sampling=self.neighbor_sampling,
            random_state=rng,
        ).fit(W)
        phi = self.grf_.features_
        if self.degree_normalization:
            deg = self.grf_.degree_
            phi = sp.diags(1.0 / np.sqrt(deg / deg.mean())) @ phi
        self.degree_scale_ = (
            np.sqrt(self.grf_.degree_ / self.grf_.degree_.mean()) if self.degree_normalization else np.ones(n)
        )
        r = n if self.n_anchors is None else int(self.n_anchors)
        if r > n:  # as scikit-learn's Nystroem: a feature per training point at most
            warnings.warn(
                f"n_anchors = {r} > n_samples = {n}: using n_anchors = {n} (every training point is an anchor)",
                UserWarning,
                stacklevel=2,
            )
            r = n
        self.n_anchors_ = r
        if r == n:
            self.anchors_ = np.arange(n)
            self.cells_ = np.arange(n)
            pool = sp.identity(n, format="csr")
        else:
            self.anchors_ = farthest_point_sampling(X, r, rng)
            W_dist = W.copy()
            W_dist.data = np.sqrt(-np.log(W_dist.data)) * self.bandwidth_ + 1e-12  # edge lengths
            _, _, sources = dijkstra(
                W_dist, directed=False, indices=self.anchors_, min_only=True, return_predecessors=True
            )
            lookup = np.full(n, -1)
            lookup[self.anchors_] = np.arange(r)
            cells = lookup[sources]
            if np.any(cells < 0):  # nodes in a component without an anchor: nearest anchor in ambient space
                bad = np.flatnonzero(cells < 0)
                d = ((X[bad, None, :] - X[None, self.anchors_, :]) ** 2).sum(-1)
                cells[bad] = np.argmin(d, axis=1)
            self.cells_ = cells
            size = np.bincount(cells, minlength=r).astype(float)
            pool = sp.csr_matrix((1.0 / np.sqrt(size[cells]), (np.arange(n), cells)), shape=(n, r))
        psi = np.asarray((phi @ pool).toarray())
        self.node_features_ = psi

        # --- stage 3: the continuous field F_theta (positive, bounded output) ---------------------------
        seed = int(rng.integers(2**31 - 1))
        self.x_mean_ = X.mean(axis=0)
        self.x_scale_ = X.std(axis=0).mean() + 1e-12
        self.target_scale_ = float(psi.max()) if psi.max() > 0 else 1.0
        self.bound_ = float(self.output_bound * self.target_scale_)
        with torch.random.fork_rng(devices=[]):  # seeded initialisation without touching the global stream
            torch.manual_seed(seed)
            layers: list[torch.nn.Module] = []
            width_in = X.shape[1]
            for _ in range(self.n_hidden):
                layers += [torch.nn.Linear(width_in, self.hidden_width), torch.nn.SiLU()]
                width_in = self.hidden_width
            layers.append(torch.nn.Linear(width_in, r))
            net = torch.nn.Sequential(*layers)  # float32: the targets need no more precision
        with torch.no_grad():  # start near the mean target so the sigmoid is not saturated at step 0
            mean_t = float(np.clip(psi.mean() / self.bound_, 1e-6, 0.5))
            net[-1].bias.fill_(math.log(mean_t / (1 - mean_t)))
        xt = torch.as_tensor((X - self.x_mean_) / self.x_scale_, dtype=torch.float32)
        yt = torch.as_tensor(psi / self.target_scale_, dtype=torch.float32)
        denom = float((yt**2).mean())
        opt = torch.optim.Adam(net.parameters(), lr=self.learning_rate)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=self.n_steps)
        losses = np.empty(self.n_steps)
        for step in range(self.n_steps):
            opt.zero_grad()
            out = self.output_bound * torch.sigmoid(net(xt))
            loss = ((out - yt) ** 2).mean() / denom
            loss.backward()
            opt.step()
            sched.step()
            losses[step] = loss.item()
        self.loss_curve_ = losses
        self.field_ = net.eval()
        self.n_features_in_ = X.shape[1]
        self.n_features_out_ = r
        return self

    def transform(self, X) -> np.ndarray:
        """The features ``F_theta(x)`` of points ``X`` (``(n, r)``, each in ``[0, bound_]``)."""
        import torch

        check_is_fitted(self, "field_")
        X = check_array(X)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X must have {self.n_features_in_} columns (as in fit), got {X.shape[1]}")
        with torch.no_grad():
            z = self.field_(torch.as_tensor((X - self.x_mean_) / self.x_scale_, dtype=torch.float32))
            out = self.output_bound * torch.sigmoid(z)
        return out.numpy().astype(np.float64) * self.target_scale_

    def kernel_matrix(self, X, Y=None) -> np.ndarray:
        """``k_MRF(x, y) = F(x)^T F(y)`` between rows of ``X`` and ``Y`` (default ``Y = X``); always ``>= 0``."""
        FX = self.transform(X)
        FY = FX if Y is None else self.transform(Y)
        return FX @ FY.T

    def node_kernel(self) -> np.ndarray:
        """The pooled GRF kernel ``psi psi^T`` on the training nodes (before the field)."""
        check_is_fitted(self, "node_features_")
        return self.node_features_ @ self.node_features_.T
