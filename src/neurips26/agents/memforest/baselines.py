"""Compression baselines the digest names, on in-memory nodes: random drop, FIFO, dedup, global greedy merge."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .eventtree import MemoryNodes, extractive_merge, merge_provenance, split_sentences

__all__ = ["dedup_drop", "fifo_drop", "global_greedy_merge", "random_drop"]


def random_drop(nodes: MemoryNodes, n_keep: int, rng: np.random.Generator) -> MemoryNodes:
    """Keep ``n_keep`` nodes chosen uniformly at random."""
    keep = np.sort(rng.choice(len(nodes), size=n_keep, replace=False))
    return nodes.take(keep)


def fifo_drop(nodes: MemoryNodes, n_keep: int) -> MemoryNodes:
    """Keep the ``n_keep`` newest nodes (drop the oldest first)."""
    order = np.lexsort((nodes.ids, nodes.timestamps))
    return nodes.take(np.sort(order[len(nodes) - n_keep :]))


def dedup_drop(nodes: MemoryNodes, n_keep: int) -> MemoryNodes:
    """Cosine-threshold dedup: drop a node when a newer node is nearly the same.

    Each node's score is its highest cosine to any newer node; the ``n_keep`` nodes with the lowest scores are
    kept (equivalently, a threshold set so that ``n_keep`` survive).
    """
    order = np.lexsort((nodes.ids, nodes.timestamps))
    e = nodes.embeddings[order]
    sim = e @ e.T
    sim[np.tril_indices(len(e))] = -np.inf  # only newer nodes count
    newest_dup = sim.max(axis=1)
    keep = order[np.argsort(newest_dup, kind="stable")[:n_keep]]
    return nodes.take(np.sort(keep))


def global_greedy_merge(
    nodes: MemoryNodes,
    n_keep: int,
    embed: Callable[[list[str]], np.ndarray],
    *,
    merges_per_round: float = 0.125,
) -> MemoryNodes:
    """Merge the globally most similar pairs (no event partition, no tree) until ``n_keep`` nodes remain.

    Each round takes the most similar disjoint pairs greedily (up to ``merges_per_round`` of the surplus, at least
    one), merges each with the same extractive merger and sentence-mean embedding as MemForest, and updates the
    similarity matrix; rounds replace one-merge-per-step so the new texts are embedded in batches.
    """
    ids = list(nodes.ids)
    ts = list(nodes.timestamps)
    texts = list(nodes.texts)
    prov = [dict(p) for p in nodes.provenance]
    emb = np.array(nodes.embeddings, dtype=np.float32)
    alive = np.ones(len(ids), dtype=bool)
    sim = emb @ emb.T
    np.fill_diagonal(sim, -np.inf)
    while alive.sum() > n_keep:
        surplus = int(alive.sum()) - n_keep
        budget = max(1, min(surplus, math.ceil(merges_per_round * surplus)))
        live = np.flatnonzero(alive)
        sub = sim[np.ix_(live, live)]
        iu, ju = np.triu_indices(len(live), 1)
        w = sub[iu, ju]
        top = np.argsort(-w, kind="stable")[: 8 * budget + 8]
        used: set[int] = set()
        pairs = []
        for t in top:
            a, b = int(live[iu[t]]), int(live[ju[t]])
            if a in used or b in used:
                continue
            used.update((a, b))
            pairs.append((a, b) if (ts[a], a) <= (ts[b], b) else (b, a))
            if len(pairs) == budget:
                break
        merged = [extractive_merge(texts[o], texts[n]) for o, n in pairs]
        sentence_lists = [split_sentences(t) or [t] for t in merged]
        enc = np.asarray(embed([s for ss in sentence_lists for s in ss]), dtype=np.float32)
        enc /= np.linalg.norm(enc, axis=1, keepdims=True)
        bounds = np.cumsum([0] + [len(ss) for ss in sentence_lists])
        for (older, newer), text, a, b in zip(pairs, merged, bounds[:-1], bounds[1:], strict=True):
            v = enc[a:b].sum(axis=0)
            v /= max(float(np.linalg.norm(v)), 1e-12)
            texts[newer] = text
            prov[newer] = merge_provenance(prov[older], prov[newer])
            emb[newer] = v
            alive[older] = False
            sim[older, :] = -np.inf
            sim[:, older] = -np.inf
            row = emb @ v
            row[~alive] = -np.inf
            row[newer] = -np.inf
            sim[newer, :] = row
            sim[:, newer] = row
    keep = np.flatnonzero(alive)
    return MemoryNodes(
        np.asarray(ids)[keep],
        np.asarray(ts)[keep],
        [texts[i] for i in keep],
        [prov[i] for i in keep],
        emb[keep],
    )
