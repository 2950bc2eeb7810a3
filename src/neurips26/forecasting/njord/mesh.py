"""Meshes over an irregular sea mask: K-means cluster meshes (Njord) and land-masked regular meshes (SeaCast).

Level-1 nodes of :func:`kmeans_mesh` are K-means centroids of the sea-cell coordinates snapped to the nearest
sea cell (a medoid), so no node sits on land and node density follows the sea geometry. Intra-level edges are
the Delaunay triangulation of the nodes, bidirectional, minus every edge whose straight line crosses a land
cell. Level 2 clusters the level-1 nodes again (K-means); each level-1 node has an up edge to its cluster's
node and a down edge back. Grid -> mesh edges join each sea cell to the level-1 nodes within ``g2m_radius``
mesh spacings (at least its nearest); mesh -> grid edges join the ``m2g_k`` nearest nodes to each cell.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial import Delaunay, cKDTree
from sklearn.cluster import KMeans

__all__ = [
    "SeaMesh",
    "kmeans_nodes",
    "regular_nodes",
    "build_mesh",
    "kmeans_mesh",
    "regular_mesh",
    "coverage_distance",
]


def _check_mask(mask) -> np.ndarray:
    m = np.asarray(mask)
    if m.ndim != 2 or m.dtype != bool:
        raise ValueError(f"mask must be a 2-D boolean array, got shape {m.shape} dtype {m.dtype}")
    if not m.any():
        raise ValueError("mask must contain at least one sea cell (it is all land)")
    return m


def _count(value, name: str, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return int(value)


def sea_cells(mask) -> np.ndarray:
    """(N, 2) float coordinates ``(row, col)`` of the sea cells, row-major."""
    return np.argwhere(_check_mask(mask)).astype(float)


def kmeans_nodes(mask, n_nodes: int, seed: int = 0) -> np.ndarray:
    """``n_nodes`` K-means centroids of the sea cells, each snapped to its nearest sea cell (unique)."""
    cells = sea_cells(mask)
    n_nodes = _count(n_nodes, "n_nodes")
    if n_nodes > len(cells):
        raise ValueError(f"n_nodes must be <= the number of sea cells ({len(cells)}), got {n_nodes}")
    km = KMeans(n_clusters=n_nodes, n_init=3, random_state=seed).fit(cells)
    return _snap_unique(km.cluster_centers_, cells)


def _snap_unique(points: np.ndarray, cells: np.ndarray) -> np.ndarray:
    """Snap each point to the nearest free cell (greedy, so two centroids never share a cell)."""
    tree = cKDTree(cells)
    taken: set[int] = set()
    out = []
    _, cand = tree.query(points, k=min(8, len(cells)))
    cand = np.atleast_2d(cand)
    for row, p in zip(cand, points):
        choice = next((int(c) for c in row if int(c) not in taken), None)
        if choice is None:  # all 8 nearest taken: search the rest
            order = np.argsort(np.linalg.norm(cells - p, axis=1))
            choice = next(int(c) for c in order if int(c) not in taken)
        taken.add(choice)
        out.append(cells[choice])
    return np.asarray(out)


def regular_nodes(mask, n_nodes: int) -> np.ndarray:
    """A land-masked regular lattice: lattice points whose cell is sea, spacing chosen so the count is as
    close to ``n_nodes`` as the lattice allows (SeaCast-style)."""
    m = _check_mask(mask)
    n_nodes = _count(n_nodes, "n_nodes")
    best = None
    for spacing in np.linspace(1.0, max(m.shape), 400):
        r = np.arange(spacing / 2 - 0.5, m.shape[0] - 0.5, spacing)
        c = np.arange(spacing / 2 - 0.5, m.shape[1] - 0.5, spacing)
        pts = np.array([(a, b) for a in r for b in c])
        # a lattice point at the grid's last half cell rounds (half to even) past the edge: clip it back
        cells = np.clip(np.rint(pts).astype(int), 0, np.array(m.shape) - 1)
        keep = m[cells[:, 0], cells[:, 1]]
        nodes = cells[keep].astype(float)
        nodes = np.unique(nodes, axis=0)
        if best is None or abs(len(nodes) - n_nodes) < abs(len(best) - n_nodes):
            best = nodes
    return best


def crosses_land(mask: np.ndarray, a: np.ndarray, b: np.ndarray) -> bool:
    """Does the straight segment between cell centres ``a`` and ``b`` pass over a land cell?"""
    n = max(int(np.ceil(np.abs(b - a).max() * 4)), 1)
    pts = np.rint(a + np.linspace(0, 1, n + 1)[:, None] * (b - a)).astype(int)
    return bool(not mask[pts[:, 0], pts[:, 1]].all())


def _delaunay_edges(nodes: np.ndarray) -> np.ndarray:
    if len(nodes) <= 3:  # too few for a triangulation: every pair
        return np.array([(i, j) for i in range(len(nodes)) for j in range(i + 1, len(nodes))], int).reshape(
            -1, 2
        )
    tri = Delaunay(nodes, qhull_options="QJ")
    e = np.concatenate([tri.simplices[:, [0, 1]], tri.simplices[:, [1, 2]], tri.simplices[:, [0, 2]]])
    return np.unique(np.sort(e, axis=1), axis=0)


def _sea_edges(mask, nodes) -> np.ndarray:
    """Delaunay edges that stay over sea; if dropping the land-crossing ones disconnected the graph, the
    shortest sea-only edges between components are added back (Kruskal over all node pairs). Components that
    no straight sea-only edge can join stay apart; the mesh's ``n_components()`` reports it."""
    und = [tuple(e) for e in _delaunay_edges(nodes) if not crosses_land(mask, nodes[e[0]], nodes[e[1]])]
    n = len(nodes)
    parent = list(range(n))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in und:
        parent[find(a)] = find(b)
    if len({find(i) for i in range(n)}) > 1:
        ii, jj = np.triu_indices(n, 1)
        for k in np.argsort(np.linalg.norm(nodes[ii] - nodes[jj], axis=1)):
            a, b = int(ii[k]), int(jj[k])
            if find(a) != find(b) and not crosses_land(mask, nodes[a], nodes[b]):
                parent[find(a)] = find(b)
                und.append((a, b))
    und = np.asarray(und, int).reshape(-1, 2)
    return np.concatenate([und, und[:, ::-1]]).T  # (2, E): sender, receiver


@dataclass(frozen=True)
class SeaMesh:
    """A two-level mesh over the sea cells of ``mask``; edge arrays are (2, E) = (sender, receiver)."""

    mask: np.ndarray
    cells: np.ndarray  # (N_grid, 2) sea-cell coordinates
    nodes: np.ndarray  # (N1, 2) level-1 node coordinates
    nodes2: np.ndarray  # (N2, 2)
    m1_edges: np.ndarray
    m2_edges: np.ndarray
    up_edges: np.ndarray  # level-1 node -> level-2 node
    g2m_edges: np.ndarray  # grid cell -> level-1 node
    m2g_edges: np.ndarray  # level-1 node -> grid cell
    spacing: float

    def nodes_on_land(self) -> int:
        c = np.rint(np.vstack([self.nodes, self.nodes2])).astype(int)
        return int((~self.mask[c[:, 0], c[:, 1]]).sum())

    def land_crossing_edges(self) -> int:
        n = 0
        for pts, e in ((self.nodes, self.m1_edges), (self.nodes2, self.m2_edges)):
            n += sum(crosses_land(self.mask, pts[a], pts[b]) for a, b in e.T)
        return n

    def n_components(self, level: str = "hierarchy") -> int:
        """Connected components of the level-1 graph (``level="1"``) or of the whole mesh (``"hierarchy"``:
        level 1, level 2 and the up/down edges; a basin that no sea-only level-1 edge reaches, e.g. across a
        one-cell strait, is joined through level 2, as the digest allows)."""
        if level not in ("1", "hierarchy"):
            raise ValueError(f"level must be '1' or 'hierarchy', got {level!r}")
        n1, n2 = len(self.nodes), len(self.nodes2)
        e = [self.m1_edges]
        if level == "hierarchy":
            e += [self.m2_edges + n1, self.up_edges + np.array([[0], [n1]])]
        e = np.concatenate(e, axis=1)
        n = n1 + (n2 if level == "hierarchy" else 0)
        a = coo_matrix((np.ones(e.shape[1]), e), shape=(n, n))
        return int(connected_components(a, directed=False)[0])

    def coverage(self) -> float:
        return coverage_distance(self.mask, self.nodes)


def coverage_distance(mask, nodes) -> float:
    """Mean distance (cells) from each sea cell to its nearest node."""
    d, _ = cKDTree(np.asarray(nodes, float)).query(sea_cells(mask))
    return float(np.mean(d))


def build_mesh(
    mask, nodes, n_level2: int, *, g2m_radius: float = 0.67, m2g_k: int = 3, seed: int = 0
) -> SeaMesh:
    """Edges, a K-means second level and grid <-> mesh edges for level-1 ``nodes`` (sea cells) of ``mask``."""
    m = _check_mask(mask)
    nodes = np.asarray(nodes, float)
    if nodes.ndim != 2 or nodes.shape[1] != 2 or len(nodes) < 3:
        raise ValueError("nodes must be an (N, 2) array with N >= 3")
    n_level2 = _count(n_level2, "n_level2")
    if n_level2 >= len(nodes):
        raise ValueError(f"n_level2 must be below the level-1 node count ({len(nodes)}), got {n_level2}")
    m2g_k = _count(m2g_k, "m2g_k")
    if not (np.isfinite(g2m_radius) and g2m_radius > 0):
        raise ValueError(f"g2m_radius must be positive, got {g2m_radius!r}")
    cells = sea_cells(m)
    spacing = float(np.sqrt(len(cells) / len(nodes)))
    km = KMeans(n_clusters=n_level2, n_init=3, random_state=seed).fit(nodes)
    nodes2 = _snap_unique(km.cluster_centers_, cells)
    up = np.stack([np.arange(len(nodes)), km.labels_])
    tree = cKDTree(nodes)
    near = tree.query_ball_point(cells, r=g2m_radius * spacing + 1e-9)
    _, nearest = tree.query(cells)
    g2m = [(i, j) for i, (lst, nn) in enumerate(zip(near, nearest)) for j in set(lst) | {int(nn)}]
    g2m = np.asarray(g2m, int).T
    _, knn = tree.query(cells, k=min(m2g_k, len(nodes)))
    knn = np.asarray(knn).reshape(len(cells), -1)
    m2g = np.stack([knn.ravel(), np.repeat(np.arange(len(cells)), knn.shape[1])])
    return SeaMesh(
        m, cells, nodes, nodes2, _sea_edges(m, nodes), _sea_edges(m, nodes2), up, g2m, m2g, spacing
    )


def kmeans_mesh(mask, n_nodes: int, n_level2: int, seed: int = 0, **kw) -> SeaMesh:
    """Njord's K-means mesh: K-means level-1 nodes snapped to sea, then :func:`build_mesh`."""
    return build_mesh(mask, kmeans_nodes(mask, n_nodes, seed), n_level2, seed=seed, **kw)


def regular_mesh(mask, n_nodes: int, n_level2: int, seed: int = 0, **kw) -> SeaMesh:
    """The land-masked regular mesh with about ``n_nodes`` level-1 nodes, then :func:`build_mesh`."""
    return build_mesh(mask, regular_nodes(mask, n_nodes), n_level2, seed=seed, **kw)
