"""Peer benchmark for delayed-hit caching: simulator throughput, and LRU / FIFO / LFU against libCacheSim.

1. Throughput of every policy on ``n`` Zipf(0.9) requests (S1: N = 1000 items, K = 50, Z = 20 slots) in the
   delayed-hit model, best of 3 runs after a warm-up (the first call compiles the numba loops), by wall time and
   by process CPU time (on a shared machine the wall clock also counts waiting for a core).
2. libCacheSim has no delayed-hit latency model, so the cross-check runs classic caching (Z = 0) on the same
   Zipf requests with sparse 64-bit object ids and byte sizes, written once as an oracleGeneral file by our
   writer: libCacheSim's C loop (``cache.process_trace`` on its own reader of that file) against our
   ``read_oracle_general`` + ``simulate``. Hit counts (unit sizes) and byte hit ratios (capacity in bytes) must
   be equal; time ratios are reported both with and without our file reading.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from neurips26.harness import time_repeats

from .policies import FIFO, LAFTPL, LFU, LRU, LRUMAD, UCBDH, Marker
from .simulator import simulate
from .trace_io import read_oracle_general, write_oracle_general
from .traces import Trace, make_trace


def _cpu_seconds(fn, repeat: int = 3) -> float:
    """Best process CPU time of ``repeat`` calls: on a shared machine wall time also counts waiting for a core."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def _peer_trace(n_req: int, seed: int = 0) -> Trace:
    rng = np.random.default_rng(seed)
    base = make_trace("S1", n_req, n_items=20_000, alpha=0.9, random_state=seed)
    ids = rng.choice(2**62, size=20_000, replace=False)  # sparse 64-bit object ids
    sizes = rng.integers(100, 100_000, size=20_000)
    return Trace.from_requests(ids[base.requests], sizes={int(i): int(s) for i, s in zip(ids, sizes)})


def _ordered_dict_lru(requests: list, capacity: int) -> int:
    """What a user would write instead: an LRU over collections.OrderedDict (classic caching, Z = 0); hits."""
    from collections import OrderedDict

    cache: OrderedDict = OrderedDict()
    hits = 0
    for x in requests:
        if x in cache:
            cache.move_to_end(x)
            hits += 1
        else:
            cache[x] = None
            if len(cache) > capacity:
                cache.popitem(last=False)
    return hits


def lru_vs_ordered_dict(n_req: int = 1_000_000, repeat: int = 5, id_kind: str = "dense") -> dict:
    """``simulate(ids, LRU(), K, fetch_latency=0)`` on 1M Zipf(0.9) requests over N = 100k raw integer ids
    (the whole call: id encoding, loop, counts) against an OrderedDict LRU of the same ids, interleaved, best
    process CPU time over ``repeat`` (and libCacheSim's LRU on the same requests when it is installed).
    ``id_kind``: "dense" (0..N-1, the lookup-table encoding) or "sparse" (random 62-bit ids, the hash encoding)."""
    if id_kind not in ("dense", "sparse"):
        raise ValueError(f"id_kind must be 'dense' or 'sparse', got {id_kind!r}")
    rng = np.random.default_rng(0)
    n_items, capacity = 100_000, 1000
    p = np.arange(1, n_items + 1, dtype=np.float64) ** -0.9
    ranks = rng.choice(n_items, size=n_req, p=p / p.sum())
    ids = ranks if id_kind == "dense" else rng.choice(2**62, size=n_items, replace=False)[ranks]
    as_list = ids.tolist()
    simulate(ids[:1000], LRU(), capacity, fetch_latency=0)  # compile
    t_ours, t_od = [], []
    for _ in range(repeat):
        t0 = time.process_time()
        res = simulate(ids, LRU(), capacity, fetch_latency=0)
        t_ours.append(time.process_time() - t0)
        t0 = time.process_time()
        hits_od = _ordered_dict_lru(as_list, capacity)
        t_od.append(time.process_time() - t0)
    row = {
        "case": f"LRU, 1M Zipf(0.9) requests, N=100k {id_kind} raw ids, K=1000, Z=0: simulate vs OrderedDict LRU",
        "T": n_req,
        "hits (ours)": res.n_hits,
        "hits (OrderedDict)": hits_od,
        "cpu seconds (ours, whole call)": min(t_ours),
        "cpu seconds (OrderedDict)": min(t_od),
        "speedup vs OrderedDict": min(t_od) / min(t_ours),
    }
    try:
        import libcachesim as lcs
    except ImportError:
        row["libcachesim"] = "not installed: pip install 'neurips26[cachesim]'"
        return row
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "zipf.oracleGeneral"
        write_oracle_general(Trace.from_requests(ids), path)
        params = lcs.ReaderInitParam()
        params.ignore_obj_size = True

        def peer() -> tuple[float, float]:
            reader = lcs.TraceReader(str(path), lcs.TraceType.ORACLE_GENERAL_TRACE, params)
            return lcs.LRU(cache_size=capacity).process_trace(reader)

        miss_ratio, _ = peer()
        row["hits (libcachesim)"] = int(round((1.0 - miss_ratio) * n_req))
        row["cpu seconds (libcachesim LRU, C loop incl. read)"] = _cpu_seconds(peer, repeat)
        row["speedup vs libcachesim LRU"] = row["cpu seconds (libcachesim LRU, C loop incl. read)"] / min(
            t_ours
        )
    return row


def main(quick: bool = True) -> list[dict]:
    n_req = 1_000_000 if quick else 10_000_000
    repeat = 3
    rows: list[dict] = [lru_vs_ordered_dict(id_kind="dense"), lru_vs_ordered_dict(id_kind="sparse")]
    tr = make_trace("S1", n_req, n_items=1000, capacity=50, fetch_latency=20, random_state=0)
    for pol in (LRU(), FIFO(), LFU(), Marker(), LRUMAD(), UCBDH(), LAFTPL()):
        t = time_repeats(lambda pol=pol: simulate(tr, pol, 50, random_state=0), repeat=repeat, warmup=1)
        cpu = _cpu_seconds(lambda pol=pol: simulate(tr, pol, 50, random_state=0), repeat)
        rows.append(
            {
                "case": f"throughput {pol.name} (delayed hits, Z=20, K=50)",
                "T": n_req,
                "seconds (best of 3)": t["min"],
                "requests/s": n_req / t["min"],
                "requests/s (CPU time)": n_req / cpu,
            }
        )

    try:
        import libcachesim as lcs
    except ImportError:
        rows.append(
            {"case": "libcachesim cross-check", "peer": "not installed: pip install 'neurips26[cachesim]'"}
        )
        return _print(rows)
    peer_tr = _peer_trace(n_req)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "zipf.oracleGeneral"
        write_oracle_general(peer_tr, path)
        t_read = time_repeats(lambda: read_oracle_general(path), repeat=repeat, warmup=1)["min"]
        ours_tr = read_oracle_general(path)
        unit_tr = Trace(ours_tr.name, ours_tr.requests, None, items=ours_tr.items)  # sizes ignored
        unit_params = lcs.ReaderInitParam()
        unit_params.ignore_obj_size = True
        wss = int(ours_tr.sizes.sum())
        for unit in (True, False):
            capacity = 1000 if unit else wss // 20
            for ours_pol, peer_cls in ((LRU(), lcs.LRU), (FIFO(), lcs.FIFO), (LFU(in_cache=True), lcs.LFU)):
                trace = unit_tr if unit else ours_tr
                res = simulate(trace, ours_pol, capacity, 0)
                t_ours = time_repeats(
                    lambda trace=trace, pol=ours_pol, cap=capacity: simulate(trace, pol, cap, 0),
                    repeat=repeat,
                )["min"]

                def peer_run(unit=unit, peer_cls=peer_cls, capacity=capacity) -> tuple[float, float]:
                    reader = (
                        lcs.TraceReader(str(path), lcs.TraceType.ORACLE_GENERAL_TRACE, unit_params)
                        if unit
                        else lcs.TraceReader(str(path), lcs.TraceType.ORACLE_GENERAL_TRACE)
                    )
                    return peer_cls(cache_size=capacity).process_trace(reader)

                miss_ratio, byte_miss_ratio = peer_run()
                t_peer = time_repeats(peer_run, repeat=repeat)["min"]
                peer_hits = int(round((1.0 - miss_ratio) * n_req))
                row = {
                    "case": f"{ours_pol.name}{' (in-cache)' if isinstance(ours_pol, LFU) else ''}, Z=0, "
                    + ("unit sizes, K=1000" if unit else f"byte sizes, capacity={capacity} B")
                    + ", vs libcachesim",
                    "T": n_req,
                    "hits (ours)": res.n_hits,
                    "hits (libcachesim)": peer_hits,
                    "hit counts equal": res.n_hits == peer_hits,
                    "seconds (ours, simulate)": t_ours,
                    "seconds (ours, read + simulate)": t_ours + t_read,
                    "seconds (libcachesim, C loop incl. read)": t_peer,
                    "requests/s (ours)": n_req / t_ours,
                    "requests/s (libcachesim)": n_req / t_peer,
                    "time ratio ours/peer (read + simulate)": (t_ours + t_read) / t_peer,
                }
                if not unit:
                    row["byte hit ratio (ours)"] = res.byte_hit_ratio
                    row["byte hit ratio (libcachesim)"] = 1.0 - byte_miss_ratio
                    row["byte hit ratios equal"] = bool(
                        abs(res.byte_hit_ratio - (1.0 - byte_miss_ratio)) < 1e-12
                    )
                rows.append(row)
    return _print(rows)


def _print(rows: list[dict]) -> list[dict]:
    for r in rows:
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()})
    return rows


if __name__ == "__main__":
    import sys

    main(quick="--full" not in sys.argv)
