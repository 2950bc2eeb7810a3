"""MemoryStore.search beside faiss-cpu's exact IndexFlatIP on the same 20k vectors, in one process.

Same vectors (unit-norm float32, d = 384), same queries, k = 10, one thread each (faiss' OpenMP pool set to 1).
Latency is process CPU time per query call: for every query the fastest of the interleaved repeats, then the
median over queries. Our search returns full hits (text, timestamp, provenance fetched from SQLite); faiss
returns ids and scores only. Rows: plain top-k (the like-for-like comparison), the batched ``search_many`` against
faiss' batched search, and MemForest's anchor re-ranking on top (4k candidates).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from neurips26.agents.memforest import MemoryStore


def _per_query(fn, queries: np.ndarray, repeats: int) -> float:
    """Median over queries of the per-query minimum CPU seconds over ``repeats`` passes."""
    times = np.empty((repeats, len(queries)))
    for r in range(repeats):
        for i, q in enumerate(queries):
            t0 = time.process_time()
            fn(q)
            times[r, i] = time.process_time() - t0
    return float(np.median(times.min(axis=0)))


def main(quick: bool = True) -> list[dict]:
    try:
        import faiss
    except ImportError:  # optional peer
        print("faiss-cpu not installed: pip install faiss-cpu")
        return []
    faiss.omp_set_num_threads(1)
    n, d, k = 20_000, 384, 10
    n_queries, repeats = (200, 5) if quick else (1000, 7)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, d)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    q = rng.normal(size=(n_queries, d)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    with tempfile.TemporaryDirectory() as tmp:
        store = MemoryStore(Path(tmp) / "bench.db", embed=None, synchronous="NORMAL")
        ids = np.asarray(
            store.add(
                [f"memory {i}." for i in range(n)], np.arange(n, dtype=float), embeddings=x, batch_size=5000
            )
        )
        index = faiss.IndexFlatIP(d)
        index.add(x)
        store.search(q[0], k, anchors=False)  # load the vector cache
        _, faiss_idx = index.search(q, k)
        ours = [[h.id for h in store.search(v, k, anchors=False)] for v in q]
        identical = float(np.mean([o == list(ids[row]) for o, row in zip(ours, faiss_idx, strict=True)]))
        many = store.search_many(q, k, anchors=False)
        identical_many = float(
            np.mean([[h.id for h in hs] == list(ids[row]) for hs, row in zip(many, faiss_idx, strict=True)])
        )
        t_ours, t_faiss, t_anchor = [], [], []
        for _ in range(3):  # interleave the three timings
            t_ours.append(_per_query(lambda v: store.search(v, k, anchors=False), q, repeats))
            t_faiss.append(_per_query(lambda v: index.search(v[None, :], k), q, repeats))
            t_anchor.append(_per_query(lambda v: store.search(v, k, anchors=True), q, repeats))
        t0 = time.process_time()
        store.search_many(q, k, anchors=False)
        t_many = time.process_time() - t0
        t0 = time.process_time()
        index.search(q, k)
        t_faiss_batch = time.process_time() - t0
        stats = store.stats()
        store.compress(0.5, merged_embedding="mean")
        after = store.stats()
        store.close()
    ours_s, faiss_s, anchor_s = min(t_ours), min(t_faiss), min(t_anchor)
    return [
        {
            "method": "MemoryStore.search (plain top-k, hits from SQLite) vs faiss IndexFlatIP, one query per call",
            "nodes": n,
            "dim": d,
            "k": k,
            "identical_topk_share": identical,
            "ours_ms_per_query": 1000 * ours_s,
            "faiss_ms_per_query": 1000 * faiss_s,
            "latency_ratio_ours_over_faiss": ours_s / faiss_s,
        },
        {
            "method": "MemoryStore.search_many vs faiss batched search",
            "queries": n_queries,
            "identical_topk_share": identical_many,
            "ours_ms_per_query": 1000 * t_many / n_queries,
            "faiss_ms_per_query": 1000 * t_faiss_batch / n_queries,
            "latency_ratio_ours_over_faiss": t_many / t_faiss_batch,
        },
        {
            "method": "MemoryStore.search with MemForest anchor re-ranking (4k candidates) vs faiss plain top-k",
            "ours_ms_per_query": 1000 * anchor_s,
            "faiss_ms_per_query": 1000 * faiss_s,
            "latency_ratio_ours_over_faiss": anchor_s / faiss_s,
        },
        {
            "method": "store bytes after WAL checkpoint + VACUUM (random vectors; compress(0.5) with mean embeddings)",
            "file_bytes_uncompressed": stats["file_bytes"],
            "file_bytes_compressed": after["file_bytes"],
            "nodes_after": after["nodes"],
            "bytes_ratio": after["file_bytes"] / stats["file_bytes"],
            "vector_bytes": stats["vector_bytes"],
            "text_bytes": stats["text_bytes"],
        },
    ]
