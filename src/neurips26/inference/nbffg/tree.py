"""Rooted trees as parent-index arrays: validation, depth levels, leaf paths and Horvitz-Thompson weights.

A tree on ``n`` nodes is an integer array ``parent`` with ``parent[root] = -1`` and ``parent[c]`` the parent of
every other node. :func:`as_tree` checks that the array describes one rooted tree (one root, indices in range,
no self-loops, no cycles, every node reachable from the root) and precomputes what the backward filter and the
path estimator of NBFFG need: nodes grouped by depth (the filter runs level by level, leaves to root), the
leaf count under every node (the inclusion probability ``pi_e`` of edge ``e`` on a uniformly drawn root-to-leaf
path is ``leaf_count[child] / n_leaves``), and every root-to-leaf path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Tree:
    """A validated rooted tree (see :func:`as_tree`).

    Attributes
    ----------
    parent : (n,) int array, ``-1`` at the root.
    root : index of the root.
    depth : (n,) depth of each node (root 0).
    levels : ``levels[k]`` the nodes at depth ``k`` (ascending index).
    is_leaf : (n,) bool, nodes without children.
    leaves : indices of the leaves (ascending).
    leaf_count : (n,) number of leaves in the subtree of each node.
    paths : (n_leaves, max_depth + 1) root-to-leaf node indices, padded with ``-1`` after the leaf.
    position : (n,) position of each node inside ``levels[depth[node]]``.
    """

    parent: np.ndarray
    root: int
    depth: np.ndarray
    levels: tuple[np.ndarray, ...]
    is_leaf: np.ndarray
    leaves: np.ndarray
    leaf_count: np.ndarray
    paths: np.ndarray
    position: np.ndarray

    @property
    def n_nodes(self) -> int:
        return int(self.parent.shape[0])

    @property
    def n_leaves(self) -> int:
        return int(self.leaves.shape[0])

    @property
    def max_depth(self) -> int:
        return len(self.levels) - 1

    def inclusion_probability(self) -> np.ndarray:
        """``pi[c]``: probability that node ``c`` (equivalently the edge into ``c``) lies on a root-to-leaf
        path whose leaf is drawn uniformly; 1 at the root."""
        return self.leaf_count / self.n_leaves


def as_tree(parent: np.ndarray | list[int] | Tree) -> Tree:
    """Validate a parent-index array and return a :class:`Tree`.

    Raises
    ------
    ValueError
        If ``parent`` is not a 1-D integer array of length >= 2, has no root or several roots (entries
        ``-1``), has entries outside ``[-1, n)``, a self-loop, or a cycle (some node cannot reach the root).
    """
    if isinstance(parent, Tree):
        return parent
    arr = np.asarray(parent)
    if arr.ndim != 1 or arr.shape[0] < 2:
        raise ValueError(f"parent must be a 1-D array with at least 2 nodes, got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        if (
            np.issubdtype(arr.dtype, np.floating)
            and np.all(np.isfinite(arr))
            and np.all(arr == np.round(arr))
        ):
            arr = arr.astype(np.int64)
        else:
            raise ValueError("parent must hold integer node indices (-1 for the root)")
    arr = arr.astype(np.int64)
    n = arr.shape[0]
    if np.any((arr < -1) | (arr >= n)):
        raise ValueError(f"parent entries must lie in [-1, {n - 1}]")
    roots = np.flatnonzero(arr == -1)
    if roots.size != 1:
        raise ValueError(f"parent must have exactly one root (entry -1), found {roots.size}")
    if np.any(arr == np.arange(n)):
        raise ValueError("parent has a self-loop (parent[i] == i): a tree has no cycles")
    root = int(roots[0])
    # breadth-first from the root; a node never reached lies on (or hangs below) a cycle
    order = np.argsort(arr, kind="stable")
    counts = np.bincount(arr[arr >= 0], minlength=n)
    starts = np.concatenate([[0], np.cumsum(counts)])
    kids = order[1:]  # arr sorted ascending: the single -1 comes first
    depth = np.full(n, -1, dtype=np.int64)
    depth[root] = 0
    levels = [np.array([root], dtype=np.int64)]
    frontier = levels[0]
    while True:
        nxt = (
            np.concatenate([kids[starts[v] : starts[v + 1]] for v in frontier]) if frontier.size else frontier
        )
        if nxt.size == 0:
            break
        nxt = np.sort(nxt)
        depth[nxt] = len(levels)
        levels.append(nxt)
        frontier = nxt
    if np.any(depth < 0):
        raise ValueError(
            f"parent has a cycle: {int(np.sum(depth < 0))} node(s) cannot reach the root, a tree has no cycles"
        )
    is_leaf = counts == 0
    leaves = np.flatnonzero(is_leaf)
    leaf_count = is_leaf.astype(np.int64)
    for lev in reversed(levels[1:]):
        np.add.at(leaf_count, arr[lev], leaf_count[lev])
    position = np.empty(n, dtype=np.int64)
    for lev in levels:
        position[lev] = np.arange(lev.size)
    max_depth = len(levels) - 1
    paths = np.full((leaves.size, max_depth + 1), -1, dtype=np.int64)
    node = leaves.copy()
    for k in range(max_depth, -1, -1):
        at_k = depth[node] == k
        paths[at_k, k] = node[at_k]
        node = np.where(at_k, arr[np.maximum(node, 0)], node)
    for arr_ in (arr, depth, is_leaf, leaves, leaf_count, paths, position):
        arr_.setflags(write=False)
    return Tree(arr, root, depth, tuple(levels), is_leaf, leaves, leaf_count, paths, position)


def balanced_binary_tree(depth: int) -> np.ndarray:
    """Parent array of the balanced binary tree with ``2**depth`` leaves (heap order: children of ``i`` are
    ``2i+1`` and ``2i+2``)."""
    if not isinstance(depth, (int, np.integer)) or depth < 1:
        raise ValueError(f"depth must be an integer >= 1, got {depth!r}")
    n = 2 ** (depth + 1) - 1
    parent = (np.arange(n) - 1) // 2
    parent[0] = -1
    return parent


def subdivide_edges(parent: np.ndarray | list[int] | Tree, n_steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Replace every edge by a chain of ``n_steps`` edges (Euler steps of a diffusion edge).

    Returns ``(parent_expanded, node_map)``: ``node_map[i]`` is the index of original node ``i`` in the
    expanded tree (the end of its incoming chain). Intermediate chain nodes are unobserved internal nodes.
    """
    tree = as_tree(parent)
    if isinstance(n_steps, bool) or not isinstance(n_steps, (int, np.integer)) or n_steps < 1:
        raise ValueError(f"n_steps must be an integer >= 1, got {n_steps!r}")
    n = tree.n_nodes
    node_map = np.empty(n, dtype=np.int64)
    node_map[tree.root] = 0
    new_parent = [-1]
    for lev in tree.levels[1:]:
        for c in lev:
            prev = node_map[tree.parent[c]]
            for _ in range(n_steps):
                new_parent.append(prev)
                prev = len(new_parent) - 1
            node_map[c] = prev
    return np.asarray(new_parent, dtype=np.int64), node_map


def diffusion_grid(
    parent: np.ndarray | list[int] | Tree,
    n_steps: int,
    branch_length: float = 1.0,
    *,
    time_change: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Euler grid of diffusion edges: every edge of length ``T = branch_length`` becomes ``n_steps`` steps.

    With ``time_change=True`` the step ends are ``t_k = T u_k (2 - u_k)``, ``u_k = k / n_steps``: the time change
    of guided proposals (van der Meulen and Schauer 2017), whose steps shrink linearly towards the child end,
    where the guiding term ``~ 1 / (T - t)`` is stiff; ``False`` gives the uniform grid. Returns
    ``(parent_expanded, node_map, dt)``: ``node_map`` as in :func:`subdivide_edges` and ``dt[c]`` the length of
    the step into node ``c`` (0 at the root), for an Euler transition ``x + b(x) dt[c]``, ``sigma^2 dt[c]``.
    """
    tree = as_tree(parent)
    if isinstance(n_steps, bool) or not isinstance(n_steps, (int, np.integer)) or n_steps < 1:
        raise ValueError(f"n_steps must be an integer >= 1, got {n_steps!r}")
    if not (
        isinstance(branch_length, (int, float, np.floating))
        and np.isfinite(branch_length)
        and branch_length > 0
    ):
        raise ValueError(f"branch_length must be a finite number > 0, got {branch_length!r}")
    new_parent, node_map = subdivide_edges(tree, int(n_steps))
    u = np.arange(n_steps + 1) / n_steps
    t = branch_length * (u * (2.0 - u) if time_change else u)
    steps = np.diff(t)
    dt = np.zeros(new_parent.shape[0])
    # subdivide_edges appends each chain parent-to-child: the k-th new node of a chain is its k-th step
    position = np.zeros(new_parent.shape[0], dtype=np.int64)
    for node in range(1, new_parent.shape[0]):
        p = new_parent[node]
        position[node] = 0 if p in node_map or p == 0 else position[p] + 1
    in_chain = np.arange(new_parent.shape[0]) != 0
    dt[in_chain] = steps[position[in_chain]]
    return new_parent, node_map, dt
