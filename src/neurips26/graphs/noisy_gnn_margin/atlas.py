"""Exact isomorphism classes and graph edit distances among all graphs on ``n <= 7`` nodes.

The noisy-alignment criterion only asks for a positive margin on *identifiable* noisy copies: a copy
``G~`` of ``G_i`` is identifiable when ``d(G~, G_i) < min_{j != i} d(G~, G_j)`` for the graph edit distance
``d`` (definition 1 of the digest). For unlabelled graphs on the same node set with unit edge insertion and
deletion costs, the edit distance is the minimum number of edge flips that turn one graph into a graph
isomorphic to the other, i.e. the shortest-path distance in the *flip graph* whose vertices are the
isomorphism classes and whose edges join classes one flip apart.

networkx's graph atlas lists every graph on at most 7 nodes, one per isomorphism class. We label every one
of the ``2^(n(n-1)/2)`` labelled graphs on ``n`` nodes with its atlas class (by enumerating the ``n!``
relabellings of each atlas graph), build the flip graph and run breadth-first search: exact edit
distances for every pair of classes in about a second, instead of ``networkx.graph_edit_distance``'s
exponential search per pair.
"""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

__all__ = ["AtlasFlipIndex"]


class AtlasFlipIndex:
    """Isomorphism classes and exact edge-edit distances among all graphs on ``n_nodes`` nodes.

    Parameters
    ----------
    n_nodes : int in [2, 7]
        Number of nodes (the graph atlas stops at 7).

    Attributes
    ----------
    graphs_ : list of networkx.Graph, the atlas graphs on ``n_nodes`` nodes (one per class).
    atlas_ids_ : ndarray (C,), their positions in ``networkx.graph_atlas_g()``.
    pairs_ : ndarray (P, 2), the node pairs ``i < j`` in the order used by edge codes.
    distances_ : ndarray (C, C), exact graph edit distance (edge flips) between classes.
    """

    def __init__(self, n_nodes: int = 7) -> None:
        if isinstance(n_nodes, bool) or not isinstance(n_nodes, (int, np.integer)) or not 2 <= n_nodes <= 7:
            raise ValueError(f"n_nodes must be an integer in [2, 7] (the graph atlas), got {n_nodes!r}")
        n = int(n_nodes)
        self.n_nodes = n
        atlas = nx.graph_atlas_g()
        self.atlas_ids_ = np.array([i for i, g in enumerate(atlas) if g.number_of_nodes() == n])
        self.graphs_ = [atlas[i] for i in self.atlas_ids_]
        self.pairs_ = np.array(list(itertools.combinations(range(n), 2)))
        n_pairs = len(self.pairs_)
        pair_index = np.full((n, n), -1)
        pair_index[self.pairs_[:, 0], self.pairs_[:, 1]] = np.arange(n_pairs)
        pair_index[self.pairs_[:, 1], self.pairs_[:, 0]] = np.arange(n_pairs)
        perms = np.array(list(itertools.permutations(range(n))))
        # perm_map[s, p]: the pair that pair p is sent to by relabelling s
        perm_map = pair_index[perms[:, self.pairs_[:, 0]], perms[:, self.pairs_[:, 1]]]
        self._powers = np.left_shift(np.int64(1), np.arange(n_pairs, dtype=np.int64))
        adjs = np.stack([nx.to_numpy_array(g, nodelist=range(n)) for g in self.graphs_]) > 0
        bits = adjs[:, self.pairs_[:, 0], self.pairs_[:, 1]].astype(np.int64)  # (C, P)
        table = np.full(2**n_pairs, -1, dtype=np.int32)
        inverse = np.argsort(perm_map, axis=1)  # bit p of the relabelled graph is bit inverse[s, p]
        for start in range(0, len(bits), 32):
            chunk = bits[start : start + 32]
            codes = chunk[:, inverse] @ self._powers  # (c, n!)
            table[codes] = np.arange(start, start + len(chunk))[:, None]
        if (table < 0).any():  # the atlas is complete up to 7 nodes, so this never happens
            raise RuntimeError("atlas classes do not cover every labelled graph")
        self._table = table
        own = bits @ self._powers
        nbr = table[own[:, None] ^ self._powers[None, :]]  # (C, P) class after each single flip
        rows = np.repeat(np.arange(len(own)), n_pairs)
        graph = csr_matrix((np.ones(rows.size), (rows, nbr.ravel())), shape=(len(own), len(own)))
        self.distances_ = shortest_path(graph, unweighted=True, directed=False).astype(np.int64)

    @property
    def n_classes(self) -> int:
        return len(self.graphs_)

    def classify(self, adjacency: np.ndarray) -> np.ndarray:
        """Atlas class (index into ``graphs_``) of each labelled graph in ``adjacency`` (..., n, n)."""
        A = np.asarray(adjacency)
        n = self.n_nodes
        if A.ndim < 2 or A.shape[-2:] != (n, n):
            raise ValueError(f"adjacency must have shape (..., {n}, {n}), got {A.shape}")
        if not np.isin(A, (0, 1)).all():
            raise ValueError("adjacency must be a 0/1 matrix")
        if not (A == np.swapaxes(A, -1, -2)).all() or (np.diagonal(A, axis1=-2, axis2=-1) != 0).any():
            raise ValueError("adjacency must be symmetric with a zero diagonal (simple undirected graphs)")
        bits = A[..., self.pairs_[:, 0], self.pairs_[:, 1]].astype(np.int64)
        return self._table[bits @ self._powers]

    def edit_distance(self, class_a: np.ndarray, class_b: np.ndarray) -> np.ndarray:
        """Exact graph edit distance (unit edge insertion/deletion) between classes, broadcast."""
        return self.distances_[np.asarray(class_a), np.asarray(class_b)]

    def identifiable(self, noisy_classes: np.ndarray, source: np.ndarray, family: np.ndarray) -> np.ndarray:
        """Whether each noisy copy is strictly closer (in edit distance) to its source than to any other
        member of ``family`` (definition 1).

        Parameters
        ----------
        noisy_classes : (N,) classes of the noisy copies.
        source : (N,) position in ``family`` of each copy's source graph.
        family : (m,) classes of the source family, pairwise distinct.
        """
        family = np.asarray(family)
        noisy_classes, source = np.asarray(noisy_classes), np.asarray(source)
        if len(np.unique(family)) != len(family) or len(family) < 2:
            raise ValueError("family must hold at least 2 pairwise non-isomorphic graphs")
        if noisy_classes.shape != source.shape:
            raise ValueError("noisy_classes and source must have the same shape")
        d = self.distances_[noisy_classes[:, None], family[None, :]]  # (N, m)
        own = d[np.arange(len(d)), source]
        d[np.arange(len(d)), source] = np.iinfo(d.dtype).max
        return own < d.min(axis=1)
