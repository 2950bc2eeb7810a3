"""MemForest: Efficient Agent Memory Management via EventTree Partitioning and Progressive Merging.

(arXiv id not found; official code: Celina-love-sweet/MemForest. Not the namesake arXiv 2605.23986.)

An agent's memory is a set of nodes i with text s_i, unit embedding e_i and timestamp t_i. MemForest halves it
without forgetting:

1. **Event partition.** k = max(1, floor(gamma n)) k-means clusters; each cluster's centre node z_c is its member
   nearest the mean; p_i is node i's rank in time. Every other node moves to
   argmax_c alpha cos(e_i, e_{z_c}) + (1 - alpha) 1[|p_i - p_{z_c}| <= w]  (gamma = 0.05, alpha = 0.8, w = 5).
2. **EventTree merging.** In each unit U, while |U| > ceil(rho |U|): build the maximum spanning tree of the cosine
   graph, merge the edge maximising beta cos(u, v) - (1 - beta) (deg u + deg v) / max_edges(deg u' + deg v')
   (beta = 0.9) into the newer node, re-embed, rebuild the tree.
3. **Anchor-guided retrieval.** Take the 4k most similar nodes; the round(0.2 k) most similar are anchors;
   tau_i = mean_a exp(-|pos_i - pos_a|) over distinct-timestamp ranks; keep the top k of 0.9 sim + 0.1 tau.

[reconstructed] The LLM summariser is replaced by a deterministic extractive merger (sentence union, exact
duplicates dropped; merged nodes embedded sentence-wise and averaged). :class:`MemoryStore` keeps the nodes in
a real SQLite database (WAL mode): every add and compress is one transaction, so a writer killed mid-call leaves
the store as it was, readers in other processes see consistent snapshots, and a foreign or corrupt file is
refused with :class:`MemoryStoreError`.

    store = MemoryStore("agent.db")                      # all-MiniLM-L6-v2, offline
    store.add(["Maya booked the Seaview Inn for Lisbon."], [1_700_000_000.0], [{"session": 3}])
    store.compress(keep_ratio=0.5)
    hits = store.search("Where is Maya staying in Lisbon?", k=10)
"""

from .eventtree import (
    CompressionResult,
    MemoryNodes,
    anchor_rerank,
    event_partition,
    eventtree_compress,
    extractive_merge,
    maximum_spanning_tree,
    merge_provenance,
)
from .store import CompressionReport, Hit, MemoryStore, MemoryStoreError, minilm_embedder

__all__ = [
    "MemoryStore",
    "MemoryStoreError",
    "MemoryNodes",
    "Hit",
    "event_partition",
    "eventtree_compress",
    "anchor_rerank",
    "extractive_merge",
    "CompressionReport",
    "CompressionResult",
    "maximum_spanning_tree",
    "merge_provenance",
    "minilm_embedder",
]
