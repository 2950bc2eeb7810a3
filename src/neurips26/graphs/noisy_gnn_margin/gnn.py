"""Dense message-passing GNNs in plain torch (no torch-geometric): GIN, GCN and mean aggregation.

Graphs of at most a few dozen nodes are held as dense, zero-padded adjacency tensors ``A`` (B, n, n) with
node features ``X`` (B, n, d) and a node mask (B, n). Every layer is ``H <- MLP(Agg(A) H)`` with

- ``"gin"``: ``Agg(A) = (1 + eps) I + A`` (sum aggregation, Xu et al. 2019, eq. 4.1);
- ``"gcn"``: ``Agg(A) = D~^{-1/2} (A + I) D~^{-1/2}`` (Kipf and Welling);
- ``"mean"``: ``Agg(A) = D~^{-1} (A + I)`` (mean over the closed neighbourhood).

The graph embedding concatenates the per-layer readouts (sum or mean over nodes), as in GIN, and is
optionally L2-normalised so that margins and Lipschitz constants live on one scale (digest pitfall).
"""

from __future__ import annotations

from collections.abc import Sequence

import networkx as nx
import numpy as np
import torch
from torch import nn

__all__ = [
    "DenseGNN",
    "to_dense_batch",
    "edge_index_to_dense",
    "degree_features",
    "random_edge_flips",
    "all_single_flips",
]

CONVS = ("gin", "gcn", "mean")
READOUTS = ("sum", "mean")
ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "softplus": nn.Softplus}


def _check_int(name: str, value: object, low: int, high: float = float("inf")) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value <= high:
        rng = f"[{low}, {high}]" if high != float("inf") else f">= {low}"
        raise ValueError(f"{name} must be an integer {rng}, got {value!r}")
    return int(value)


def to_dense_batch(
    graphs: Sequence[object], n_max: int | None = None, dtype: torch.dtype = torch.float64
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Stack graphs into zero-padded ``(A, X, mask)`` with constant node features ``X = 1``.

    Each graph is a networkx graph (nodes taken in ``sorted`` order) or a PyG-style object with an
    ``edge_index`` (2, E) attribute and optionally ``num_nodes`` (for example ``torch_geometric.data.Data``;
    its ``x`` is ignored here: use :func:`edge_index_to_dense` to keep node features). Unlike PyG's
    ``torch_geometric.utils.to_dense_batch`` this returns adjacency matrices, not a padded feature tensor.
    Raises ``ValueError`` on an empty list, an empty graph, a directed or multi graph, self-loops, or a graph
    larger than ``n_max``.
    """
    if len(graphs) == 0:
        raise ValueError("graphs must hold at least one graph")
    dense = []
    for g in graphs:
        if hasattr(g, "edge_index") and not isinstance(g, nx.Graph):
            n_nodes = getattr(g, "num_nodes", None)
            A1, _, _ = edge_index_to_dense(g.edge_index, num_nodes=n_nodes, dtype=torch.float64)
            dense.append(A1[0].numpy())
            continue
        if not isinstance(g, nx.Graph):
            raise TypeError(
                f"graphs must be networkx graphs or objects with edge_index, got {type(g).__name__}"
            )
        if g.is_directed() or g.is_multigraph():
            raise ValueError("graphs must be simple undirected graphs (no directed or multi graphs)")
        if g.number_of_nodes() == 0:
            raise ValueError("graphs must have at least one node")
        if nx.number_of_selfloops(g) > 0:
            raise ValueError("graphs must not have self-loops")
        dense.append(nx.to_numpy_array(g, nodelist=sorted(g.nodes()), weight=None))
    sizes = [a.shape[0] for a in dense]
    n = max(sizes) if n_max is None else _check_int("n_max", n_max, 1)
    if max(sizes) > n:
        raise ValueError(f"n_max={n} is smaller than the largest graph ({max(sizes)} nodes)")
    A = np.zeros((len(dense), n, n))
    mask = np.zeros((len(dense), n))
    for b, a in enumerate(dense):
        k = a.shape[0]
        A[b, :k, :k] = a
        mask[b, :k] = 1.0
    At = torch.as_tensor(A, dtype=dtype)
    Mt = torch.as_tensor(mask, dtype=dtype)
    return At, Mt[..., None].clone(), Mt


def edge_index_to_dense(
    edge_index: torch.Tensor | np.ndarray,
    batch: torch.Tensor | np.ndarray | None = None,
    num_nodes: int | None = None,
    x: torch.Tensor | np.ndarray | None = None,
    n_max: int | None = None,
    dtype: torch.dtype = torch.float64,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """PyG-style input to dense ``(A, X, mask)``: ``edge_index`` (2, E) of node ids, optional ``batch`` (N,)
    graph id of every node (sorted, as in a PyG ``Batch``), optional node features ``x`` (N, d).

    Edges are symmetrised (an undirected graph may list each edge once or twice); duplicate edges collapse to
    one. Without ``x`` the features are constant ones. Self-loops, node ids outside ``[0, N)`` and edges
    between different graphs raise ``ValueError``.
    """
    ei = torch.as_tensor(edge_index)
    if ei.ndim != 2 or ei.shape[0] != 2 or ei.dtype.is_floating_point or ei.dtype == torch.bool:
        raise ValueError(f"edge_index must be an integer array of shape (2, E), got {tuple(ei.shape)}")
    ei = ei.long()
    if batch is not None:
        bt = torch.as_tensor(batch)
        if bt.ndim != 1 or bt.dtype.is_floating_point or bt.numel() == 0:
            raise ValueError("batch must be a non-empty 1-D integer array (graph id per node)")
        bt = bt.long()
        if (bt < 0).any() or (bt[1:] < bt[:-1]).any():
            raise ValueError("batch must hold non-negative graph ids in sorted order (as in a PyG Batch)")
        N = bt.numel()
        if num_nodes is not None and _check_int("num_nodes", num_nodes, 1) != N:
            raise ValueError(f"num_nodes={num_nodes} disagrees with len(batch) = {N}")
    else:
        if num_nodes is None:
            if ei.numel() == 0:
                raise ValueError("num_nodes is required when edge_index is empty")
            N = int(ei.max()) + 1
        else:
            N = _check_int("num_nodes", num_nodes, 1)
        bt = torch.zeros(N, dtype=torch.long)
    if ei.numel() and (int(ei.min()) < 0 or int(ei.max()) >= N):
        raise ValueError(f"edge_index must hold node ids in [0, {N - 1}]")
    if (ei[0] == ei[1]).any():
        raise ValueError("edge_index must not contain self-loops")
    if (bt[ei[0]] != bt[ei[1]]).any():
        raise ValueError("edge_index joins nodes of different graphs (see batch)")
    B = int(bt.max()) + 1
    counts = torch.bincount(bt, minlength=B)
    if (counts == 0).any():
        raise ValueError("batch must not skip graph ids (every graph needs at least one node)")
    n = int(counts.max()) if n_max is None else _check_int("n_max", n_max, 1)
    if int(counts.max()) > n:
        raise ValueError(f"n_max={n} is smaller than the largest graph ({int(counts.max())} nodes)")
    start = torch.cumsum(counts, 0) - counts
    local = torch.arange(N) - start[bt]
    A = torch.zeros(B, n, n, dtype=dtype)
    g = bt[ei[0]]
    A[g, local[ei[0]], local[ei[1]]] = 1.0
    A[g, local[ei[1]], local[ei[0]]] = 1.0
    mask = torch.zeros(B, n, dtype=dtype)
    mask[bt, local] = 1.0
    if x is None:
        X = mask[..., None].clone()
    else:
        xt = torch.as_tensor(x, dtype=dtype)
        if xt.ndim != 2 or xt.shape[0] != N:
            raise ValueError(f"x must have shape (N, d) with N = {N}, got {tuple(xt.shape)}")
        if not torch.isfinite(xt).all():
            raise ValueError("x must be finite (no NaN or inf)")
        X = torch.zeros(B, n, xt.shape[1], dtype=dtype)
        X[bt, local] = xt
    return A, X, mask


def degree_features(
    A: torch.Tensor, mask: torch.Tensor | None = None, max_degree: int | None = None
) -> torch.Tensor:
    """One-hot node degrees (B, n, max_degree + 1), zero at padded nodes: input features that let mean
    aggregation see degrees (with constant features a mean-aggregation GNN embeds every graph by its size only)."""
    if not isinstance(A, torch.Tensor) or A.ndim != 3 or A.shape[1] != A.shape[2]:
        raise ValueError(f"A must be a (B, n, n) tensor, got {getattr(A, 'shape', type(A))}")
    B, n, _ = A.shape
    mask = torch.ones(B, n, dtype=A.dtype) if mask is None else mask
    deg = A.sum(-1).round().long()
    top = n - 1 if max_degree is None else _check_int("max_degree", max_degree, 0)
    if int(deg.max()) > top:
        raise ValueError(f"max_degree={top} is below the largest degree {int(deg.max())}")
    return torch.nn.functional.one_hot(deg, top + 1).to(A.dtype) * mask[..., None]


def random_edge_flips(
    A: torch.Tensor,
    n_flips: int,
    mask: torch.Tensor | None = None,
    *,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Flip ``n_flips`` distinct node pairs (add absent edges, remove present ones) in every graph.

    Pairs are drawn uniformly among the pairs of real (unmasked) nodes; ``A`` is (B, n, n) and is not
    modified.
    """
    if A.ndim != 3 or A.shape[1] != A.shape[2]:
        raise ValueError(f"A must have shape (B, n, n), got {tuple(A.shape)}")
    n_flips = _check_int("n_flips", n_flips, 0)
    B, n, _ = A.shape
    if mask is None:
        mask = torch.ones(B, n, dtype=A.dtype)
    iu = torch.triu_indices(n, n, offset=1)
    valid = (mask[:, iu[0]] * mask[:, iu[1]]) > 0  # (B, P)
    if n_flips > int(valid.sum(1).min()):
        raise ValueError(f"n_flips must be <= the number of node pairs of the smallest graph, got {n_flips}")
    if n_flips == 0:
        return A.clone()
    keys = torch.rand(valid.shape, generator=generator, dtype=torch.float64)
    keys[~valid] = 2.0  # never chosen
    chosen = keys.argsort(dim=1)[:, :n_flips]  # (B, k) distinct pairs
    flip = torch.zeros(B, n, n, dtype=A.dtype)
    rows = torch.arange(B)[:, None].expand_as(chosen)
    flip[rows, iu[0][chosen], iu[1][chosen]] = 1.0
    flip = flip + flip.transpose(1, 2)
    return A + flip * (1 - 2 * A)


def all_single_flips(A: torch.Tensor) -> torch.Tensor:
    """Every single-flip neighbour of one graph ``A`` (n, n): a (n(n-1)/2, n, n) tensor."""
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A must have shape (n, n), got {tuple(A.shape)}")
    n = A.shape[0]
    iu = torch.triu_indices(n, n, offset=1)
    P = iu.shape[1]
    flip = torch.zeros(P, n, n, dtype=A.dtype)
    flip[torch.arange(P), iu[0], iu[1]] = 1.0
    flip = flip + flip.transpose(1, 2)
    return A[None] + flip * (1 - 2 * A[None])


class DenseGNN(nn.Module):
    """A permutation-invariant graph embedding ``f: graphs -> R^{L * hidden}`` by dense message passing.

    Parameters
    ----------
    in_features : int >= 1, node feature dimension (1 for constant features).
    hidden : int >= 1, width of every layer.
    n_layers : int >= 1, number of message-passing layers.
    conv : {"gin", "gcn", "mean"}, the aggregation (module docstring).
    mlp_layers : int >= 1, linear layers (each followed by the activation) in every layer's MLP.
    activation : {"relu", "tanh", "softplus"}, all 1-Lipschitz. ReLU MLPs are piecewise linear, so on the
        small integer degrees of tiny graphs a random ReLU GIN is often affine and sums over neighbours lose
        the multiset; ``"tanh"`` (the default) keeps the random MLPs injective on them.
    eps : float, GIN's self-weight ``eps`` (fixed; only used by ``"gin"``).
    readout : {"sum", "mean"}, per-layer readout over nodes.
    normalize : bool, L2-normalise the graph embedding.
    random_state : int or None, seeds the weight initialisation.
    dtype : torch dtype of the parameters (float64 so that zero-noise equalities are exact up to 1e-12).
    """

    def __init__(
        self,
        in_features: int = 1,
        hidden: int = 64,
        n_layers: int = 3,
        conv: str = "gin",
        mlp_layers: int = 2,
        activation: str = "tanh",
        eps: float = 0.0,
        readout: str = "sum",
        normalize: bool = True,
        random_state: int | None = None,
        dtype: torch.dtype = torch.float64,
    ) -> None:
        super().__init__()
        in_features = _check_int("in_features", in_features, 1)
        hidden = _check_int("hidden", hidden, 1)
        n_layers = _check_int("n_layers", n_layers, 1)
        mlp_layers = _check_int("mlp_layers", mlp_layers, 1)
        if conv not in CONVS:
            raise ValueError(f"conv must be one of {CONVS}, got {conv!r}")
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        if readout not in READOUTS:
            raise ValueError(f"readout must be one of {READOUTS}, got {readout!r}")
        if not np.isfinite(eps) or eps <= -1:
            raise ValueError(f"eps must be a finite float > -1, got {eps!r}")
        self.conv, self.readout, self.normalize = conv, readout, bool(normalize)
        self.eps = float(eps)
        self.n_layers, self.hidden = n_layers, hidden
        with torch.random.fork_rng():
            if random_state is not None:
                torch.manual_seed(_check_int("random_state", random_state, 0))
            layers = []
            for layer in range(n_layers):
                mods: list[nn.Module] = []
                for j in range(mlp_layers):
                    d_in = in_features if (layer == 0 and j == 0) else hidden
                    mods += [nn.Linear(d_in, hidden, dtype=dtype), ACTIVATIONS[activation]()]
                layers.append(nn.Sequential(*mods))
            self.mlps = nn.ModuleList(layers)

    # --- the model ---------------------------------------------------------------------------------------
    def aggregation(self, A: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The matrix ``Agg(A)`` (B, n, n) of the chosen convolution (padded nodes stay isolated)."""
        eye = torch.diag_embed(mask)
        if self.conv == "gin":
            return A + (1.0 + self.eps) * eye
        At = A + eye
        deg = At.sum(-1).clamp_min(1.0)
        if self.conv == "mean":
            return At / deg[..., None]
        s = deg.rsqrt()
        return s[..., :, None] * At * s[..., None, :]

    def node_states(
        self, A: torch.Tensor, X: torch.Tensor, mask: torch.Tensor | None = None
    ) -> list[torch.Tensor]:
        """Node states ``[H^0 = X, H^1, ..., H^L]`` (each (B, n, d_l)); padded rows are zero."""
        A, X, mask = self._validate(A, X, mask)
        M = self.aggregation(A, mask)
        H = X * mask[..., None]
        states = [H]
        for mlp in self.mlps:
            H = mlp(M @ H) * mask[..., None]
            states.append(H)
        return states

    def forward(
        self, A: torch.Tensor, X: torch.Tensor | None = None, mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Graph embeddings (B, n_layers * hidden): concatenated per-layer readouts, optionally unit-norm."""
        if X is None:
            X = torch.ones(*A.shape[:2], self.mlps[0][0].in_features, dtype=A.dtype)
        states = self.node_states(A, X, mask)
        if mask is None:
            mask = torch.ones(A.shape[:2], dtype=A.dtype)
        reads = [H.sum(1) for H in states[1:]]
        if self.readout == "mean":
            reads = [r / mask.sum(1, keepdim=True) for r in reads]
        g = torch.cat(reads, dim=-1)
        if self.normalize:
            g = g / g.norm(dim=-1, keepdim=True).clamp_min(1e-300)
        return g

    def _validate(
        self, A: torch.Tensor, X: torch.Tensor, mask: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if not isinstance(A, torch.Tensor) or A.ndim != 3 or A.shape[1] != A.shape[2]:
            raise ValueError(f"A must be a (B, n, n) tensor, got {getattr(A, 'shape', type(A))}")
        B, n, _ = A.shape
        if B == 0 or n == 0:
            raise ValueError("A must hold at least one graph with at least one node")
        if not isinstance(X, torch.Tensor) or X.shape[:2] != (B, n) or X.ndim != 3:
            raise ValueError(f"X must be a (B, n, d) tensor matching A, got {getattr(X, 'shape', type(X))}")
        if X.shape[2] != self.mlps[0][0].in_features:
            raise ValueError(f"X must have {self.mlps[0][0].in_features} features, got {X.shape[2]}")
        if mask is None:
            mask = torch.ones(B, n, dtype=A.dtype)
        if mask.shape != (B, n):
            raise ValueError(f"mask must have shape (B, n) = {(B, n)}, got {tuple(mask.shape)}")
        if not torch.isfinite(A).all() or not torch.isfinite(X).all():
            raise ValueError("A and X must be finite (no NaN or inf)")
        if not torch.equal(A, A.transpose(1, 2)) or (torch.diagonal(A, dim1=1, dim2=2) != 0).any():
            raise ValueError("A must be symmetric with a zero diagonal (simple undirected graphs)")
        if ((A != 0) & (A != 1)).any():
            raise ValueError("A must be a 0/1 adjacency matrix")
        pad = 1 - mask
        if ((A * pad[:, :, None]) != 0).any():
            raise ValueError("A must not have edges at masked (padded) nodes")
        return A.to(self.mlps[0][0].weight.dtype), X.to(self.mlps[0][0].weight.dtype), mask.to(A.dtype)
