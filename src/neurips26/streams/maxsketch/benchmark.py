"""MaxSketch against datasketch's HyperLogLog at equal memory, on the same noisy-view stream.

datasketch has no robust (near-duplicate-aware) distinct counter, so its HyperLogLog, the digest's named peer
and baseline, is run on exactly the same stream: raw observations (bytes) and SimHash signatures. Rows give
wall time, items per second and relative error; ratios are MaxSketch / peer.
"""

from __future__ import annotations

import time

import numpy as np

from neurips26.streams.maxsketch import MaxSketch, estimate_noise_scale
from neurips26.streams.maxsketch.experiment import simhash_signatures, synthetic_pairs, synthetic_stream


def _hll_stream(keys: np.ndarray, p: int) -> float:
    from datasketch import HyperLogLog

    hll = HyperLogLog(p=p)
    for row in np.ascontiguousarray(keys):  # the whole stream, item by item, as a user would feed it
        hll.update(row.tobytes())
    return float(hll.count())


def main(quick: bool = True) -> list[dict]:
    n, m, sigma = (10_000, 1024, 0.1) if quick else (100_000, 1024, 0.1)
    rng = np.random.default_rng(0)
    x, _ = synthetic_stream(n, sigma, rng)
    tau = estimate_noise_scale(*synthetic_pairs(200, sigma, rng))
    p = int(np.log2(4 * m))
    rows = []

    t0 = time.perf_counter()
    sk = MaxSketch(x.shape[1], m, seed=1)
    for lo in range(0, x.shape[0], 8192):
        sk.update(x[lo : lo + 8192])
    est = sk.estimate(noise_scale=tau)
    t_ms = time.perf_counter() - t0
    rows.append(
        {"method": f"MaxSketch m={m} (noise-corrected)", "seconds": t_ms, "rel_error": abs(est / n - 1)}
    )

    t0 = time.perf_counter()
    est = _hll_stream(x, p)
    rows.append(
        {
            "method": f"datasketch HLL p={p} on raw",
            "seconds": time.perf_counter() - t0,
            "rel_error": abs(est / n - 1),
        }
    )

    t0 = time.perf_counter()
    est = _hll_stream(simhash_signatures(x, 12, 1), p)
    rows.append(
        {
            "method": f"datasketch HLL p={p} on SimHash-12",
            "seconds": time.perf_counter() - t0,
            "rel_error": abs(est / n - 1),
        }
    )

    for row in rows:
        row["items_per_s"] = x.shape[0] / row["seconds"]
        row["time_ratio_vs_maxsketch"] = row["seconds"] / t_ms
        row["error_ratio_vs_maxsketch"] = row["rel_error"] / rows[0]["rel_error"]
        print(
            f"{row['method']:<40} {row['seconds']:8.3f} s  {row['items_per_s']:12,.0f} items/s  "
            f"rel.err {row['rel_error']:.4f}  time x{row['time_ratio_vs_maxsketch']:.2f}  "
            f"err x{row['error_ratio_vs_maxsketch']:.1f}"
        )
    return rows


if __name__ == "__main__":
    main()
