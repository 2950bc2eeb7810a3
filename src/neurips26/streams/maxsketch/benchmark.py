"""MaxSketch beside datasketch's HyperLogLog: throughput and accuracy on the same noisy-view stream.

datasketch has no robust (near-duplicate-aware) distinct counter, so its HyperLogLog, the digest's named peer and
baseline, runs on exactly the same stream at equal bytes: raw observations and SimHash signatures. Throughput is
measured on a fresh stream at d = 256, m = 1024 (float32 and float64 input) and reported beside float32 normalise +
GEMM + max per direction of the same batches (from float64 input: cast first), interleaved in the same loop (the
machine's own limit for this work), as ratios of wall time and of process CPU time, so they travel across machines
and survive a shared one.
"""

from __future__ import annotations

import time

import numpy as np

from neurips26.harness import time_repeats
from neurips26.streams.maxsketch import MaxSketch
from neurips26.streams.maxsketch.experiment import (
    hll_precision_for,
    simhash_signatures,
    synthetic_stream,
    update_throughput,
)


def _hll_stream(keys: np.ndarray, p: int) -> float:
    import warnings

    from datasketch import HyperLogLog

    hll = HyperLogLog(p=p)
    for row in np.ascontiguousarray(keys):  # the whole stream, item by item, as a user would feed it
        hll.update(row.tobytes())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return float(hll.count())


def main(quick: bool = True) -> list[dict]:
    try:
        import datasketch  # noqa: F401
    except ImportError:  # optional peer
        print("datasketch not installed: pip install 'neurips26[streams]'")
        return []
    n, m, sigma = (10_000, 1024, 0.1) if quick else (100_000, 1024, 0.1)
    x, _ = synthetic_stream(n, sigma, np.random.default_rng(0))
    n_bytes = MaxSketch(x.shape[1], m).memory_bytes
    p = hll_precision_for(n_bytes)
    thr = update_throughput(batch=8192, dim=256, m=1024, repeats=7 if quick else 11)
    rows = [
        {
            "method": "float32 normalise + GEMM + max per direction (what a user would write), batches of 8192",
            "items_per_s": thr["gemm_vectors_per_s_same_shape"],
        },
        {
            "method": "the same from float64 input (cast to float32 first)",
            "items_per_s": thr["gemm_from_float64_vectors_per_s"],
        },
        {
            "method": "MaxSketch.update, fresh float32 batches of 8192 (d=256, m=1024)",
            "items_per_s": thr["update_vectors_per_s_d256_m1024_batch8192"],
            "throughput_ratio_vs_reference": thr["update_throughput_over_reference"],
            "throughput_ratio_vs_reference_cpu": thr["update_throughput_over_reference_cpu"],
        },
        {
            "method": "MaxSketch.update, fresh float64 batches of 8192 (ratio to the float32 reference)",
            "items_per_s": thr["update_float64_vectors_per_s"],
            "throughput_ratio_vs_reference": thr["update_float64_throughput_over_reference"],
            "throughput_ratio_vs_reference_cpu": thr["update_float64_throughput_over_reference_cpu"],
        },
        {
            "method": "MaxSketch.update, fresh float64 batches of 8192 (ratio to the float64-input reference)",
            "items_per_s": thr["update_float64_vectors_per_s"],
            "throughput_ratio_vs_reference": thr["update_float64_throughput_over_float64_reference"],
            "throughput_ratio_vs_reference_cpu": thr["update_float64_throughput_over_float64_reference_cpu"],
        },
        {
            "method": "MaxSketch.update, one vector per call",
            "items_per_s": thr["single_vector_updates_per_s"],
        },
    ]
    n_thr = len(rows)

    def sketch() -> float:
        sk = MaxSketch(x.shape[1], m, seed=1)
        for lo in range(0, x.shape[0], 8192):
            sk.update(x[lo : lo + 8192])
        return sk.estimate()

    est_holder = {}
    t_ms = time_repeats(lambda: est_holder.setdefault("est", sketch()), repeat=3 if quick else 5)["min"]
    rows.append(
        {
            "method": f"MaxSketch m={m} defaults, whole stream + estimate",
            "seconds": t_ms,
            "items_per_s": x.shape[0] / t_ms,
            "bytes": n_bytes,
            "rel_error": abs(est_holder["est"] / n - 1),
        }
    )
    for label, keys in (("raw", x), ("SimHash-12", simhash_signatures(x, 12, 1))):
        t0 = time.perf_counter()
        est = _hll_stream(keys, p)
        seconds = time.perf_counter() - t0
        rows.append(
            {
                "method": f"datasketch HyperLogLog p={p} on {label}",
                "seconds": seconds,
                "items_per_s": x.shape[0] / seconds,
                "bytes": 2**p,
                "rel_error": abs(est / n - 1),
            }
        )
    for row in rows[n_thr:]:
        row["time_ratio_vs_maxsketch"] = row["seconds"] / t_ms
        row["error_ratio_vs_maxsketch"] = row["rel_error"] / rows[n_thr]["rel_error"]
    for row in rows:
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()})
    return rows


if __name__ == "__main__":
    main()
