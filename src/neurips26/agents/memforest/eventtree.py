"""MemForest's three steps as plain functions over arrays: event partition, EventTree merging, anchor re-ranking.

Every function here works on in-memory arrays (embeddings, timestamps, texts); :class:`~.store.MemoryStore`
reads a snapshot, calls them, and writes the difference back in one transaction.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "CompressionResult",
    "MemoryNodes",
    "anchor_rerank",
    "event_partition",
    "eventtree_compress",
    "extractive_merge",
    "maximum_spanning_tree",
    "merge_provenance",
    "split_sentences",
]

MERGED_EMBEDDINGS = ("sentences", "text", "mean")


def _unit_rows(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return (x / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def _check_fraction(value: float, name: str, *, open_low: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    value = float(value)
    ok = (0.0 < value <= 1.0) if open_low else (0.0 <= value <= 1.0)
    if not ok or math.isnan(value):
        raise ValueError(f"{name} must be in {'(0, 1]' if open_low else '[0, 1]'}, got {value!r}")
    return value


@dataclass
class MemoryNodes:
    """An in-memory copy of a store's nodes (one row each): what compression reads and returns."""

    ids: np.ndarray  # int64
    timestamps: np.ndarray  # float64 (seconds)
    texts: list[str]
    provenance: list[dict[str, Any]]
    embeddings: np.ndarray  # float32, unit rows

    def __post_init__(self) -> None:
        self.ids = np.asarray(self.ids, dtype=np.int64)
        self.timestamps = np.asarray(self.timestamps, dtype=np.float64)
        self.embeddings = np.asarray(self.embeddings, dtype=np.float32)
        n = len(self.ids)
        if not (len(self.timestamps) == len(self.texts) == len(self.provenance) == len(self.embeddings) == n):
            raise ValueError(
                "ids, timestamps, texts, provenance and embeddings must have the same length, got "
                f"{n}, {len(self.timestamps)}, {len(self.texts)}, {len(self.provenance)}, {len(self.embeddings)}"
            )

    def __len__(self) -> int:
        return len(self.ids)

    def take(self, index: Sequence[int] | np.ndarray) -> MemoryNodes:
        index = np.asarray(index, dtype=np.int64)
        return MemoryNodes(
            self.ids[index],
            self.timestamps[index],
            [self.texts[i] for i in index],
            [self.provenance[i] for i in index],
            self.embeddings[index],
        )


# --- 1. event partition -------------------------------------------------------------------------------------------
def event_partition(
    embeddings: np.ndarray,
    timestamps: np.ndarray,
    *,
    gamma: float = 0.05,
    alpha: float = 0.8,
    window: int = 5,
    max_iter: int = 30,
    random_state: int = 0,
) -> np.ndarray:
    """Event-unit label of every node: k-means on the embeddings, re-assigned by a semantic + temporal score.

    ``k = max(1, floor(gamma n))`` k-means++ clusters (at most ``max_iter`` Lloyd steps); each cluster's centre
    node ``z_c`` is the member nearest its mean; ``p_i`` is node i's rank in time (ties by index). Every
    non-centre node moves to ``argmax_c alpha cos(e_i, e_{z_c}) + (1 - alpha) 1[|p_i - p_{z_c}| <= window]``,
    ties going to its k-means label. Returns labels in ``0..U-1`` (units numbered by first appearance).
    """
    from sklearn.cluster import KMeans

    e = np.asarray(embeddings, dtype=np.float64)
    t = np.asarray(timestamps, dtype=np.float64)
    if e.ndim != 2 or len(e) == 0:
        raise ValueError(f"embeddings must be a non-empty 2-D array, got shape {e.shape}")
    if t.shape != (len(e),):
        raise ValueError(f"timestamps must have one value per embedding row ({len(e)}), got shape {t.shape}")
    gamma = _check_fraction(gamma, "gamma", open_low=True)
    alpha = _check_fraction(alpha, "alpha")
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 0:
        raise ValueError(f"window must be a non-negative integer, got {window!r}")
    n = len(e)
    k = max(1, math.floor(gamma * n))
    if k == 1:
        return np.zeros(n, dtype=np.int64)
    km = KMeans(n_clusters=k, init="k-means++", n_init=1, max_iter=max_iter, random_state=random_state)
    labels = km.fit_predict(e)
    present = np.unique(labels)
    # centre node of each (non-empty) cluster: the member nearest the cluster mean
    centres = np.empty(len(present), dtype=np.int64)
    for j, c in enumerate(present):
        members = np.flatnonzero(labels == c)
        d = np.linalg.norm(e[members] - e[members].mean(axis=0), axis=1)
        centres[j] = members[np.argmin(d)]
    position = np.empty(n, dtype=np.int64)
    position[np.lexsort((np.arange(n), t))] = np.arange(n)
    unit = _unit_rows(e)
    score = alpha * (unit @ unit[centres].T) + (1.0 - alpha) * (
        np.abs(position[:, None] - position[centres][None, :]) <= window
    )
    own = np.searchsorted(present, labels)  # column of each node's k-means cluster
    best = np.argmax(score, axis=1)
    keep_own = score[np.arange(n), own] >= score[np.arange(n), best]
    assigned = np.where(keep_own, own, best)
    assigned[centres] = np.arange(len(present))
    _, first = np.unique(assigned, return_index=True)
    order = np.argsort(first)
    relabel = np.empty(len(present), dtype=np.int64)
    relabel[np.unique(assigned)[order]] = np.arange(len(order))
    return relabel[assigned]


# --- 2. EventTree progressive merging ------------------------------------------------------------------------------
def maximum_spanning_tree(sim: np.ndarray) -> np.ndarray:
    """Edges ``(u, v)``, u < v, of a maximum spanning tree of the complete graph weighted by ``sim``.

    Kruskal: edges by descending weight (ties by (u, v) order), union-find; m - 1 edges for m nodes.
    """
    m = len(sim)
    if m < 2:
        return np.empty((0, 2), dtype=np.int64)
    iu, ju = np.triu_indices(m, 1)
    order = np.lexsort((ju, iu, -sim[iu, ju]))
    parent = list(range(m))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    edges = []
    for e in order:
        a, b = find(int(iu[e])), find(int(ju[e]))
        if a != b:
            parent[a] = b
            edges.append((int(iu[e]), int(ju[e])))
            if len(edges) == m - 1:
                break
    return np.asarray(edges, dtype=np.int64)


def _best_tree_edge(sim: np.ndarray, beta: float) -> tuple[int, int]:
    """The edge to merge: argmax over tree edges of ``beta cos - (1 - beta) (deg u + deg v) / max edge degree``."""
    edges = maximum_spanning_tree(sim)
    deg = np.bincount(edges.ravel(), minlength=len(sim))
    pair_deg = deg[edges[:, 0]] + deg[edges[:, 1]]
    score = beta * sim[edges[:, 0], edges[:, 1]] - (1.0 - beta) * pair_deg / pair_deg.max()
    u, v = edges[int(np.argmax(score))]  # first maximum: edges come out in Kruskal order
    return int(u), int(v)


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` (split after . ! ? followed by whitespace), stripped, empty ones dropped."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def extractive_merge(older: str, newer: str) -> str:
    """Deterministic stand-in for the paper's LLM summariser: the sentence-level union of both texts.

    Sentences keep their order (older text first); a sentence equal to an earlier one up to whitespace and case
    is dropped, so the result is never longer than the two inputs together and loses no distinct sentence.
    [reconstructed: the paper asks an LLM for one summary that also resolves relative dates.]
    """
    seen: set[str] = set()
    out = []
    for s in split_sentences(older) + split_sentences(newer):
        key = " ".join(s.split()).lower()
        if key not in seen:
            seen.add(key)
            out.append(s)
    return " ".join(out)


def merge_provenance(older: Mapping[str, Any], newer: Mapping[str, Any]) -> dict[str, Any]:
    """Provenance of a merged node: the union of both nodes' provenance, key by key; nothing given is lost.

    A key in one node only is kept as it is; a key whose values are equal keeps that value; otherwise the values
    are unioned into one list, older first, each distinct value once (a list value contributes its items, any
    other value itself). So ``{"session": 3}`` and ``{"session": 7}`` give ``{"session": [3, 7]}``, and
    ``{"facts": [1, 2]}`` and ``{"facts": [2, 5]}`` give ``{"facts": [1, 2, 5]}``.
    """
    out: dict[str, Any] = dict(older)
    for key, value in newer.items():
        if key not in out or out[key] == value:
            out[key] = value
            continue
        merged: list[Any] = []
        for part in (out[key], value):
            for item in part if isinstance(part, list) else [part]:
                if item not in merged:
                    merged.append(item)
        out[key] = merged
    return out


@dataclass
class CompressionResult:
    """What :func:`eventtree_compress` did: the surviving nodes and the merges, in order."""

    nodes: MemoryNodes
    merges: list[tuple[int, int]]  # (older id, newer id): the newer id survives, holding both
    unit_sizes: list[int]
    removed_ids: list[int] = field(default_factory=list)
    changed_ids: list[int] = field(default_factory=list)


def _renormalised_sum(vectors: np.ndarray) -> np.ndarray:
    v = vectors.sum(axis=0)
    return (v / max(float(np.linalg.norm(v)), 1e-12)).astype(np.float32)


def eventtree_compress(
    nodes: MemoryNodes,
    keep_ratio: float = 0.5,
    *,
    embed: Callable[[list[str]], np.ndarray] | None = None,
    merged_embedding: str = "sentences",
    gamma: float = 0.05,
    alpha: float = 0.8,
    window: int = 5,
    beta: float = 0.9,
    merge_text: Callable[[str, str], str] = extractive_merge,
    random_state: int = 0,
    partition: bool = True,
) -> CompressionResult:
    """MemForest compression: event partition, then EventTree merging inside every unit down to ``ceil(m rho)``.

    Per unit, each iteration rebuilds the maximum spanning tree of the cosine graph, merges the edge maximising
    ``beta cos(e_u, e_v) - (1 - beta) (deg u + deg v) / max_edges(deg)`` into the newer node (its id, timestamp;
    text ``merge_text(older, newer)``; provenance :func:`merge_provenance`), and re-embeds the merged node:
    ``merged_embedding="sentences"`` embeds each sentence and averages (no MiniLM truncation of long merged
    texts), ``"text"`` embeds the merged text, ``"mean"`` renormalises the sum of the two embeddings (no
    encoder). Units are independent, so they advance in lock-step and the new texts of one round are embedded in
    one batch. ``partition=False`` treats the whole store as one unit (an ablation).
    """
    keep_ratio = _check_fraction(keep_ratio, "keep_ratio", open_low=True)
    beta = _check_fraction(beta, "beta")
    if merged_embedding not in MERGED_EMBEDDINGS:
        raise ValueError(f"merged_embedding must be one of {MERGED_EMBEDDINGS}, got {merged_embedding!r}")
    if merged_embedding != "mean" and embed is None:
        raise ValueError(f"merged_embedding={merged_embedding!r} needs an embed callable (or use 'mean')")
    n = len(nodes)
    if n == 0:
        return CompressionResult(nodes, [], [])
    if partition:
        labels = event_partition(
            nodes.embeddings,
            nodes.timestamps,
            gamma=gamma,
            alpha=alpha,
            window=window,
            random_state=random_state,
        )
    else:
        labels = np.zeros(n, dtype=np.int64)
    # the node pool grows with merged nodes; units hold pool indices
    ids = list(nodes.ids)
    ts = list(nodes.timestamps)
    texts = list(nodes.texts)
    prov = [dict(p) for p in nodes.provenance]
    emb = [row for row in _unit_rows(nodes.embeddings)]
    units = [list(np.flatnonzero(labels == u)) for u in range(int(labels.max()) + 1)]
    unit_sizes = [len(u) for u in units]
    targets = [max(1, math.ceil(len(u) * keep_ratio)) for u in units]
    merges: list[tuple[int, int]] = []
    changed: set[int] = set()
    while True:
        active = [j for j, u in enumerate(units) if len(u) > targets[j]]
        if not active:
            break
        pending: list[tuple[int, int, int, str]] = []  # (unit, older pool index, newer pool index, text)
        for j in active:
            members = units[j]
            e = np.stack([emb[i] for i in members])
            a, b = _best_tree_edge(e @ e.T, beta)
            ia, ib = members[a], members[b]
            older, newer = (ia, ib) if (ts[ia], ia) <= (ts[ib], ib) else (ib, ia)
            pending.append((j, older, newer, merge_text(texts[older], texts[newer])))
        if merged_embedding == "mean":
            new_vectors = [_renormalised_sum(np.stack([emb[o], emb[w]])) for _, o, w, _ in pending]
        elif merged_embedding == "text":
            new_vectors = list(_unit_rows(np.asarray(embed([t for *_, t in pending]), dtype=np.float32)))
        else:  # "sentences": one vector per sentence (cached by the store), averaged
            sentence_lists = [split_sentences(t) or [t] for *_, t in pending]
            encoded = _unit_rows(
                np.asarray(embed([s for ss in sentence_lists for s in ss]), dtype=np.float32)
            )
            bounds = np.cumsum([0] + [len(ss) for ss in sentence_lists])
            new_vectors = [
                _renormalised_sum(encoded[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)
            ]
        for (j, older, newer, text), vec in zip(pending, new_vectors, strict=True):
            if not np.all(np.isfinite(vec)):
                raise ValueError("the embed callable returned a non-finite vector for a merged text")
            new = len(ids)
            ids.append(ids[newer])
            ts.append(ts[newer])
            texts.append(text)
            prov.append(merge_provenance(prov[older], prov[newer]))
            emb.append(vec)
            merges.append((int(ids[older]), int(ids[newer])))
            changed.add(int(ids[newer]))
            members = [i for i in units[j] if i not in (older, newer)] + [new]
            units[j] = sorted(members, key=lambda i: (ts[i], i))  # re-sorted by time
    survivors = sorted((i for u in units for i in u), key=lambda i: (ts[i], ids[i]))
    out = MemoryNodes(
        np.asarray([ids[i] for i in survivors], dtype=np.int64),
        np.asarray([ts[i] for i in survivors]),
        [texts[i] for i in survivors],
        [prov[i] for i in survivors],
        np.stack([emb[i] for i in survivors]) if survivors else np.empty((0, nodes.embeddings.shape[1])),
    )
    kept = set(out.ids.tolist())
    removed = [int(i) for i in nodes.ids if int(i) not in kept]
    return CompressionResult(out, merges, unit_sizes, removed, sorted(changed & kept))


# --- 3. anchor-guided retrieval -----------------------------------------------------------------------------------
def anchor_rerank(
    sims: np.ndarray,
    timestamps: np.ndarray,
    k: int,
    *,
    anchor_fraction: float = 0.2,
    weight: float = 0.1,
) -> np.ndarray:
    """Indices (into the candidate arrays) of the top ``k`` after anchor re-ranking, ordered by similarity.

    Anchors: the ``a = round_half_up(anchor_fraction k)`` most similar candidates (at least 1). A candidate's
    position is the rank of its distinct timestamp among the candidates;
    ``tau_i = mean_anchors exp(-|pos_i - pos_a|)`` and ``f_i = (1 - weight) sim_i + weight tau_i``. The top
    ``k`` by ``f`` (ties by similarity) are returned in descending similarity.
    """
    sims = np.asarray(sims, dtype=np.float64)
    ts = np.asarray(timestamps, dtype=np.float64)
    if sims.ndim != 1 or ts.shape != sims.shape:
        raise ValueError(f"sims and timestamps must be 1-D of one length, got {sims.shape} and {ts.shape}")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    for name, value in (("anchor_fraction", anchor_fraction), ("weight", weight)):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
            raise TypeError(f"{name} must be a number in [0, 1], got {type(value).__name__}")
        if not 0.0 <= float(value) <= 1.0:  # NaN fails too
            raise ValueError(f"{name} must be in [0, 1], got {value!r}")
    m = len(sims)
    if m == 0:
        return np.empty(0, dtype=np.int64)
    k = min(int(k), m)
    a = min(m, max(1, math.floor(anchor_fraction * k + 0.5)))
    by_sim = np.lexsort((np.arange(m), -sims))
    anchors = by_sim[:a]
    pos = np.unique(ts, return_inverse=True)[1].astype(np.float64)
    tau = np.exp(-np.abs(pos[:, None] - pos[anchors][None, :])).mean(axis=1)
    f = (1.0 - weight) * sims + weight * tau
    top = np.lexsort((np.arange(m), -sims, -f))[:k]
    return top[np.lexsort((top, -sims[top]))]
