"""Forest-pruning baseline: greedy tree-subset selection plus depth truncation under a node budget.

Stands in for ForestPrune (Liu & Mazumder 2023), which has no Python package; the digest of *Minimax Rates and
Spectral Distillation for Tree Ensembles* (arXiv 2605.11841) prescribes this reconstruction [R]: for every
truncation depth ``d`` each tree of a fitted forest is cut at depth ``d`` (a cut node predicts its stored
node value, the mean of its training samples), trees are added greedily (forward selection, without
replacement) to minimise validation MSE of the subset average while the total node count stays within
``max_nodes``, and the (depth, prefix) pair with the lowest validation MSE is kept.

All trees are handled at once: their nodes are stacked into one global node array (per-tree offsets), the
ancestor of every node at every depth is one ``(nodes, depth + 1)`` table built level by level, and a greedy
step scores every candidate tree with one matrix-vector product.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from .smoother import _ensemble_kind

__all__ = ["PrunedForest", "count_nodes"]


def count_nodes(model: Any) -> int:
    """Total nodes (internal and leaves) of a fitted sklearn tree ensemble or a :class:`PrunedForest`."""
    if isinstance(model, PrunedForest):
        check_is_fitted(model, "n_nodes_")
        return int(model.n_nodes_)
    _ensemble_kind(model)
    return int(sum(t.tree_.node_count for t in np.asarray(model.estimators_).ravel()))


def _forest_tables(trees: list[Any]) -> dict[str, np.ndarray]:
    """Stacked node tables of all trees: offsets, tree id, depth, value and the ancestor-at-depth table.

    ``ancestor[g, k]`` is the global id of node ``g``'s ancestor at depth ``k`` for ``k <= depth[g]`` (the node
    itself at its own depth), so the node that a point reaching leaf ``g`` stops at when the tree is cut at
    depth ``d`` is ``ancestor[g, min(d, depth[g])]``.
    """
    counts = np.array([t.tree_.node_count for t in trees], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    left = np.concatenate(
        [t.tree_.children_left + o * (t.tree_.children_left >= 0) for t, o in zip(trees, offsets)]
    )
    right = np.concatenate(
        [t.tree_.children_right + o * (t.tree_.children_right >= 0) for t, o in zip(trees, offsets)]
    )
    value = np.concatenate([t.tree_.value[:, 0, 0] for t in trees])
    total = int(offsets[-1])
    parent = np.full(total, -1, dtype=np.int64)
    internal = np.flatnonzero(left >= 0)
    parent[left[internal]] = internal
    parent[right[internal]] = internal
    # breadth-first over depth levels: every tree's root (local id 0) is at depth 0
    levels = [offsets[:-1]]
    while True:
        frontier = levels[-1]
        frontier = frontier[left[frontier] >= 0]
        if frontier.size == 0:
            break
        levels.append(np.concatenate([left[frontier], right[frontier]]))
    depth = np.empty(total, dtype=np.int64)
    ancestor = np.zeros((total, len(levels)), dtype=np.int32 if total < 2**31 else np.int64)
    for k, nodes in enumerate(levels):
        depth[nodes] = k
        if k:
            ancestor[nodes, :k] = ancestor[parent[nodes], :k]
        ancestor[nodes, k] = nodes
    tree_id = np.repeat(np.arange(len(trees)), counts)
    return {"offsets": offsets, "depth": depth, "value": value, "ancestor": ancestor, "tree_id": tree_id}


class PrunedForest(RegressorMixin, BaseEstimator):
    """Prune a fitted random forest to at most ``max_nodes`` nodes (tree subset + depth truncation).

    Parameters
    ----------
    forest : a fitted ``RandomForestRegressor`` / ``ExtraTreesRegressor``.
    max_nodes : node budget (internal nodes and leaves of the kept, truncated trees), ``>= 1``.
    depths : candidate truncation depths (non-negative integers); ``None`` means ``0 .. max depth``.

    ``fit(X_val, y_val)`` selects on a validation set that the forest was *not* trained on.

    Attributes
    ----------
    depth_ : chosen truncation depth. trees_ : indices of the kept trees (selection order).
    n_nodes_ : total nodes kept. val_mse_ : validation MSE of the chosen pruned forest.
    """

    def __init__(self, forest: Any, max_nodes: int = 1000, depths: Any = None) -> None:
        self.forest = forest
        self.max_nodes = max_nodes
        self.depths = depths

    def fit(self, X: Any, y: Any) -> PrunedForest:
        if _ensemble_kind(self.forest) != "forest":
            raise TypeError("forest must be a RandomForestRegressor or ExtraTreesRegressor")
        mn = self.max_nodes
        if isinstance(mn, bool) or not isinstance(mn, Integral) or mn < 1:
            raise ValueError(f"max_nodes must be an integer >= 1, got {mn!r}")
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True)
        if X.shape[1] != self.forest.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, the forest expects {self.forest.n_features_in_}")
        trees = list(self.forest.estimators_)
        tab = _forest_tables(trees)
        max_depth = tab["ancestor"].shape[1] - 1
        depths = range(max_depth + 1) if self.depths is None else self.depths
        try:
            depths = [int(d) for d in depths]
        except (TypeError, ValueError):
            raise ValueError(
                f"depths must be a non-empty collection of integers >= 0, got {self.depths!r}"
            ) from None
        if not depths or any(d < 0 for d in depths):
            raise ValueError(f"depths must be a non-empty collection of integers >= 0, got {self.depths!r}")
        leaves = self.forest.apply(X) + tab["offsets"][:-1]  # (n_val, B) global leaf ids
        leaf_depth = tab["depth"][leaves]
        n_trees = len(trees)

        best = (np.inf, 0, [], 0)
        for d in depths:
            stop = tab["ancestor"][leaves, np.minimum(leaf_depth, d)]  # node where each point stops
            preds = tab["value"][stop]  # (n_val, B): each truncated tree's prediction
            sizes = np.bincount(tab["tree_id"][tab["depth"] <= d], minlength=n_trees)
            sq = np.einsum("ij,ij->j", preds, preds)
            chosen: list[int] = []
            total_nodes = 0
            resid = np.zeros_like(y)  # acc - len(chosen) y, acc = sum of the chosen trees' predictions
            available = np.ones(n_trees, dtype=bool)
            while True:
                fits = available & (total_nodes + sizes <= mn)
                if not fits.any():
                    break
                k = len(chosen) + 1
                # ||(acc + p_b) / k - y||^2 = ||resid - y + p_b||^2 / k^2 for every candidate b at once
                r = resid - y
                sse = (r @ r + 2.0 * (preds.T @ r) + sq) / k**2
                sse[~fits] = np.inf
                b = int(np.argmin(sse))
                chosen.append(b)
                available[b] = False
                total_nodes += int(sizes[b])
                resid = r + preds[:, b]
                mse = float(sse[b]) / len(y)
                if mse < best[0]:
                    best = (mse, d, list(chosen), total_nodes)
        if not np.isfinite(best[0]):
            raise ValueError(f"max_nodes={mn} is smaller than the smallest truncated tree")
        self.val_mse_, self.depth_, self.trees_, self.n_nodes_ = best
        self._offsets = tab["offsets"]
        self._value = tab["value"]
        # where a point reaching node g stops once the trees are cut at depth_
        self._stop = tab["ancestor"][np.arange(tab["depth"].size), np.minimum(tab["depth"], self.depth_)]
        return self

    def predict(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "trees_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        kept = np.asarray(self.trees_)
        leaves = self.forest.apply(X)[:, kept] + self._offsets[kept]
        return self._value[self._stop[leaves]].mean(axis=1)
