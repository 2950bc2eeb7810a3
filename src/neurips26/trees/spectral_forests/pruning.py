"""Forest-pruning baseline: greedy tree-subset selection plus depth truncation under a node budget.

Stands in for ForestPrune (Liu & Mazumder 2023), which has no Python package; the digest of *Minimax Rates and
Spectral Distillation for Tree Ensembles* (arXiv 2605.11841) prescribes this reconstruction [R]: for every
truncation depth ``d`` each tree of a fitted forest is cut at depth ``d`` (a cut node predicts its stored
node value, the mean of its training samples), trees are added greedily (forward selection, without
replacement) to minimise validation MSE of the subset average while the total node count stays within
``max_nodes``, and the (depth, prefix) pair with the lowest validation MSE is kept.
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


def _tree_tables(tree: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Parent and depth of every node of a fitted sklearn tree, and its node values."""
    t = tree.tree_
    parent = np.full(t.node_count, -1, dtype=np.int64)
    left, right = t.children_left, t.children_right
    internal = np.flatnonzero(left >= 0)
    parent[left[internal]] = internal
    parent[right[internal]] = internal
    depth = np.zeros(t.node_count, dtype=np.int64)
    for node in range(1, t.node_count):  # preorder: a parent always precedes its children
        depth[node] = depth[parent[node]] + 1
    return parent, depth, t.value[:, 0, 0].copy()


def _ancestor_at_depth(parent: np.ndarray, depth: np.ndarray, d: int) -> np.ndarray:
    """For every node, its ancestor at depth ``min(d, depth(node))``."""
    anc = np.arange(parent.size)
    while True:
        deep = depth[anc] > d
        if not deep.any():
            return anc
        anc = np.where(deep, parent[anc], anc)


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
        trees = self.forest.estimators_
        tables = [_tree_tables(t) for t in trees]
        max_depth = max(int(d.max()) for _, d, _ in tables)
        depths = range(max_depth + 1) if self.depths is None else self.depths
        depths = [int(d) for d in depths]
        if not depths or any(d < 0 for d in depths):
            raise ValueError(f"depths must be a non-empty collection of integers >= 0, got {self.depths!r}")
        leaves = self.forest.apply(X)  # (n_val, B)

        best = (np.inf, 0, [], 0)
        for d in depths:
            ancs = [_ancestor_at_depth(p, dep, d) for p, dep, _ in tables]
            sizes = np.array([int((dep <= d).sum()) for _, dep, _ in tables])
            preds = np.column_stack([tables[b][2][ancs[b][leaves[:, b]]] for b in range(len(trees))])
            chosen, total_nodes, acc = [], 0, np.zeros(len(y))
            available = np.ones(len(trees), dtype=bool)
            while True:
                fits = available & (total_nodes + sizes <= mn)
                if not fits.any():
                    break
                k = len(chosen) + 1
                cand = (acc[:, None] + preds) / k  # average with each candidate added
                mse = np.mean((cand - y[:, None]) ** 2, axis=0)
                mse[~fits] = np.inf
                b = int(np.argmin(mse))
                chosen.append(b)
                available[b] = False
                total_nodes += int(sizes[b])
                acc += preds[:, b]
                if mse[b] < best[0]:
                    best = (float(mse[b]), d, list(chosen), total_nodes)
        if not np.isfinite(best[0]):
            raise ValueError(f"max_nodes={mn} is smaller than the smallest truncated tree")
        self.val_mse_, self.depth_, self.trees_, self.n_nodes_ = best
        self._tables = [
            (_ancestor_at_depth(tables[b][0], tables[b][1], self.depth_), tables[b][2]) for b in self.trees_
        ]
        return self

    def predict(self, X: Any) -> np.ndarray:
        check_is_fitted(self, "trees_")
        X = validate_data(self, X, dtype=np.float64, reset=False)
        out = np.zeros(X.shape[0])
        for (anc, value), b in zip(self._tables, self.trees_):
            out += value[anc[self.forest.estimators_[b].apply(X)]]
        return out / len(self.trees_)
