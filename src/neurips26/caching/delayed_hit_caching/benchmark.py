"""Peer benchmark for delayed-hit caching: simulator throughput per policy, and LRU against libCacheSim.

libCacheSim has no delayed-hit latency model, so the cross-check runs both LRUs with zero fetch latency
(classic caching) on the same Zipf trace and compares hit counts (must be equal) and wall time. libCacheSim is
driven request by request through its Python binding (``cache.get``), the binding's public per-request API.
"""

from __future__ import annotations

import time

from neurips26.caching.delayed_hit_caching import (
    LAFTPL,
    LFU,
    LRU,
    LRUMAD,
    UCBDH,
    Marker,
    make_trace,
    simulate,
)


def main(quick: bool = True) -> list[dict]:
    n_req = 200_000 if quick else 1_000_000
    tr = make_trace("S1", n_req, n_items=1000, capacity=50, fetch_latency=20, random_state=0)
    rows: list[dict] = []
    for pol in (LRU(), LFU(), Marker(), LRUMAD(), UCBDH(), LAFTPL()):
        t0 = time.perf_counter()
        simulate(tr.requests, pol, 50, tr.fetch_latency, random_state=0)
        dt = time.perf_counter() - t0
        rows.append(
            {"case": f"throughput {pol.name} (Z=20)", "T": n_req, "seconds": dt, "requests/s": n_req / dt}
        )

    t0 = time.perf_counter()
    ours = simulate(tr.requests, LRU(), 50, 0)
    t_ours = time.perf_counter() - t0
    row = {
        "case": "LRU, Z=0, vs libcachesim",
        "T": n_req,
        "seconds": t_ours,
        "requests/s": n_req / t_ours,
        "hits (ours)": ours.n_hits,
    }
    try:
        import libcachesim as lcs
    except ImportError:
        row["peer"] = "libcachesim not installed"
    else:
        cache, req, hits = lcs.LRU(cache_size=50), lcs.Request(), 0
        ids = tr.requests.tolist()
        t0 = time.perf_counter()
        for i in ids:
            req.obj_id, req.obj_size = i, 1
            hits += bool(cache.get(req))
        t_peer = time.perf_counter() - t0
        row.update(
            {
                "hits (libcachesim)": hits,
                "hit counts equal": hits == ours.n_hits,
                "peer seconds": t_peer,
                "time ratio ours/peer": t_ours / t_peer,
            }
        )
    rows.append(row)
    for r in rows:
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()})
    return rows


if __name__ == "__main__":
    import sys

    main(quick="--full" not in sys.argv)
