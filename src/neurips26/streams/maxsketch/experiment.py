"""Reproduction of MaxSketch (arXiv 2605.15571): robust distinct counting of noisy views.

Two streams, as in the digest: (1) synthetic unit centres in d = 256, each seen 1 + Poisson(4) times as
``normalize(u + sigma z / sqrt(d))``; (2) noisy views (word dropout, swaps, typos) of distinct standard-library
sentences embedded with all-MiniLM-L6-v2 and mean-centred. Baselines at equal memory (m floats = 4m bytes):
HyperLogLog (datasketch) on the raw observations, HyperLogLog on SimHash signatures (bit count swept; the best
is used, which favours the baseline) and a distinct-sampling-with-representatives sampler.
"""

from __future__ import annotations

import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from neurips26.harness import Run  # noqa: E402

from .maxsketch import LogLinearCalibration, MaxSketch, estimate_from_maxima, estimate_noise_scale  # noqa: E402

D_SYN = 256
M_MAIN = 1024
M_SWEEP = (64, 128, 256, 512, 1024)
SIMHASH_BITS = (8, 12, 16, 20, 24, 32)


# --- baselines ----------------------------------------------------------------------------------------------
def hll_count(keys: np.ndarray, p: int) -> float:
    """HyperLogLog (datasketch, 2**p one-byte registers) of the rows of ``keys`` as raw bytes.

    HLL ignores repeats, so feeding only the distinct rows gives the same registers as the whole stream.
    """
    from datasketch import HyperLogLog

    hll = HyperLogLog(p=p)
    for row in np.ascontiguousarray(np.unique(keys, axis=0)):
        hll.update(row.tobytes())
    return float(hll.count())


def hll_count_strings(items: list[str], p: int) -> float:
    """HyperLogLog (datasketch) of the UTF-8 bytes of ``items``."""
    from datasketch import HyperLogLog

    hll = HyperLogLog(p=p)
    for item in sorted(set(items)):
        hll.update(item.encode("utf-8"))
    return float(hll.count())


def simhash_signatures(x: np.ndarray, bits: int, seed: int) -> np.ndarray:
    """Random-hyperplane (SimHash) signatures, one uint64 per row."""
    planes = np.random.default_rng(seed).standard_normal((x.shape[1], bits)).astype(x.dtype)
    signs = (x @ planes) > 0
    return (signs.astype(np.uint64) << np.arange(bits, dtype=np.uint64)).sum(axis=1, dtype=np.uint64)[:, None]


def sampling_count(x: np.ndarray, budget: int, radius: float, seed: int, bucket_bits: int = 16) -> float:
    """Distinct sampling with representatives (simplified Chen-Zhang): memory of ``budget`` stored vectors.

    A coarse SimHash bucket is sampled when its hash is below the level ``p``; items of sampled buckets farther
    than ``radius`` from every kept representative become representatives; when more than ``budget`` are kept,
    ``p`` halves and representatives of dropped buckets are evicted. The estimate is ``#representatives / p``.
    """
    rng = np.random.default_rng(seed)
    buckets = simhash_signatures(x, bucket_bits, seed)[:, 0].astype(np.int64)
    bucket_hash = rng.random(2**bucket_bits)[buckets]
    level = 1.0
    reps = np.empty((0, x.shape[1]), dtype=x.dtype)
    rep_hash = np.empty(0)
    for i in np.flatnonzero(bucket_hash < level):  # candidates only; the level shrinks as we go
        if bucket_hash[i] >= level:
            continue
        if reps.shape[0] and np.min(np.sum((reps - x[i]) ** 2, axis=1)) <= radius**2:
            continue
        reps = np.vstack([reps, x[i]])
        rep_hash = np.append(rep_hash, bucket_hash[i])
        while reps.shape[0] > budget:
            level /= 2
            keep = rep_hash < level
            reps, rep_hash = reps[keep], rep_hash[keep]
    return reps.shape[0] / level


def leader_count(x: np.ndarray, radius: float) -> int:
    """Offline reference (O(n) memory): greedy leader clustering; an item farther than ``radius`` from every
    leader becomes a leader. Returns the number of leaders."""
    leaders = np.empty((0, x.shape[1]), dtype=x.dtype)
    for row in x:
        if leaders.shape[0] == 0 or np.min(np.sum((leaders - row) ** 2, axis=1)) > radius**2:
            leaders = np.vstack([leaders, row])
    return int(leaders.shape[0])


# --- data -----------------------------------------------------------------------------------------------------
def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def synthetic_stream(
    n: int, sigma: float, rng: np.random.Generator, dim: int = D_SYN
) -> tuple[np.ndarray, np.ndarray]:
    """n unit centres, each seen 1 + Poisson(4) times as normalize(u + sigma z / sqrt(d)), random order."""
    centres = _unit(rng.standard_normal((n, dim))).astype(np.float32)
    labels = np.repeat(np.arange(n), 1 + rng.poisson(4.0, size=n))
    rng.shuffle(labels)
    views = centres[labels] + (sigma / np.sqrt(dim)) * rng.standard_normal(
        (labels.size, dim), dtype=np.float32
    )
    return _unit(views).astype(np.float32), labels


def synthetic_pairs(n_pairs: int, sigma: float, rng: np.random.Generator, dim: int = D_SYN):
    """Two labelled views of each of ``n_pairs`` fresh objects (for the noise-scale estimate)."""
    centres = _unit(rng.standard_normal((n_pairs, dim)))
    noise = (sigma / np.sqrt(dim)) * rng.standard_normal((2, n_pairs, dim))
    return _unit(centres + noise[0]), _unit(centres + noise[1])


def _rel(est: float, n: int) -> float:
    return abs(est / n - 1.0)


def _sketch(x: np.ndarray, m: int, seed: int, batch: int = 50_000) -> MaxSketch:
    sk = MaxSketch(x.shape[1], m, seed=seed)
    for lo in range(0, x.shape[0], batch):
        sk.update(x[lo : lo + batch])
    return sk


# --- the experiment ---------------------------------------------------------------------------------------------
def run(run: Run) -> None:
    n_list = run.pick(quick=[1_000, 10_000], full=[1_000, 10_000, 100_000])
    n_seeds = run.pick(quick=8, full=20)
    seeds = run.seeds(n_seeds)
    rng = run.rng
    run.note(
        f"{'quick' if run.quick else 'full'} mode: synthetic n in {n_list}, {n_seeds} sketch seeds"
        + ("; the digest's full protocol uses n up to 1e5 and 20 seeds" if run.quick else "")
    )

    # ---------------- synthetic streams -----------------------------------------------------------------------
    rows: list[dict] = []
    err_main: dict[tuple[int, float, int | str], list[float]] = {}
    raw_main: dict[int, list[float]] = {}
    hll_raw_ratio: dict[tuple[int, float], float] = {}
    curves: dict[str, list[float]] = {}
    for sigma in (0.1, 0.3):
        tau = estimate_noise_scale(*synthetic_pairs(200, sigma, rng))
        run.metric(f"synthetic_tau_hat_sigma{sigma}", tau)
        for n in run.progress(n_list if sigma == 0.1 else n_list[:1], f"synthetic sigma={sigma}"):
            x, labels = synthetic_stream(n, sigma, rng)
            for s in seeds:
                with run.timer("maxsketch_update"):
                    sk = _sketch(x, M_MAIN, s)
                with run.timer("maxsketch_estimate"):
                    for m in M_SWEEP:  # the first m directions of a sketch are themselves an m-sketch
                        est = estimate_from_maxima(
                            sk.maxima_[:m], D_SYN, noise_scale=tau, n_items=sk.n_items_
                        )
                        err_main.setdefault((n, sigma, m), []).append(_rel(est, n))
                    est = sk.estimate(noise_scale=tau, views_model="fixed")
                    err_main.setdefault((n, sigma, "fixed"), []).append(_rel(est, n))
                    if sigma == 0.1:
                        raw_main.setdefault(n, []).append(sk.estimate(noise_scale=0.0))
            with run.timer("baselines"):
                p = int(np.log2(4 * M_MAIN))
                hll_raw = hll_count(x, p)
                hll_raw_ratio[(n, sigma)] = hll_raw / n
                sim = {b: hll_count(simhash_signatures(x, b, seeds[0]), p) for b in SIMHASH_BITS}
                best_bits = min(sim, key=lambda b: _rel(sim[b], n))
                budget = M_MAIN // D_SYN
                samp_r = 2.5 * sigma / np.sqrt(1 + sigma**2)
                samp = float(np.median([sampling_count(x, budget, radius=samp_r, seed=s) for s in seeds[:5]]))
            med = {m: float(np.median(err_main[(n, sigma, m)])) for m in M_SWEEP}
            rows.append(
                {
                    "stream": "synthetic",
                    "n": n,
                    "sigma": sigma,
                    "items": int(x.shape[0]),
                    "maxsketch_m256_med": med[256],
                    "maxsketch_m1024_med": med[1024],
                    "maxsketch_m1024_p90": float(np.quantile(err_main[(n, sigma, 1024)], 0.9)),
                    "maxsketch_m1024_fixed_views_med": float(np.median(err_main[(n, sigma, "fixed")])),
                    "hll_raw_err": _rel(hll_raw, n),
                    f"hll_simhash_best_err (bits={best_bits})": _rel(sim[best_bits], n),
                    "sampling_err": _rel(samp, n),
                }
            )
            if sigma == 0.1 and n == n_list[-1]:
                curves["MaxSketch (noise-corrected)"] = [med[m] for m in M_SWEEP]
                curves["HLL on raw"] = [_rel(hll_count(x, int(np.log2(4 * m))), n) for m in M_SWEEP]
                curves[f"HLL on SimHash ({best_bits} bits)"] = [
                    _rel(hll_count(simhash_signatures(x, best_bits, seeds[0]), int(np.log2(4 * m))), n)
                    for m in M_SWEEP
                ]

    # ---------------- calibration fitted on small n, applied at the largest n ---------------------------------
    cal_n = (100, 200, 500, 1000)
    cal_est, cal_true = [], []
    for n in cal_n:
        x, _ = synthetic_stream(n, 0.1, rng)
        for s in seeds[:4]:
            cal_est.append(_sketch(x, M_MAIN, s + 7919).estimate(noise_scale=0.0))
            cal_true.append(n)
    calib = LogLinearCalibration().fit(cal_est, cal_true)
    run.metric("calibration_slope", calib.slope_)
    run.metric("calibration_intercept", calib.intercept_)
    n_big = n_list[-1]
    calib_err = float(np.median([_rel(calib.predict(e), n_big) for e in raw_main[n_big]]))
    uncal_err = float(np.median([_rel(e, n_big) for e in raw_main[n_big]]))
    for r in rows:
        if r["sigma"] == 0.1:
            r["uncorrected_m1024_med"] = float(np.median([_rel(e, r["n"]) for e in raw_main[r["n"]]]))
            r["calibrated_m1024_med"] = float(
                np.median([_rel(calib.predict(e), r["n"]) for e in raw_main[r["n"]]])
            )
    run.table(
        rows,
        name="synthetic",
        caption="Median relative error |n_hat/n - 1| over sketch seeds; "
        "baselines at equal memory (4096 bytes = 1024 floats)",
    )

    # ---------------- text stream ---------------------------------------------------------------------------------
    text_rows = _text_stream(run, seeds)

    # ---------------- throughput -----------------------------------------------------------------------------------
    xb = _unit(np.random.default_rng(1).standard_normal((8192, 256))).astype(np.float32)
    sk = MaxSketch(256, 1024, seed=1)
    t0 = time.perf_counter()
    sk.update(xb)
    thr_batch = xb.shape[0] / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for row in xb[:64]:
        sk.update(row)
    thr_single = 64 / (time.perf_counter() - t0)
    run.metric("update_throughput_batch_vectors_per_s_d256_m1024", thr_batch)
    run.metric("update_throughput_single_vectors_per_s_d256_m1024", thr_single)
    run.note(
        f"update throughput at d=256, m=1024: {thr_batch:,.0f} vectors/s in batches of 8192 (float32), "
        f"{thr_single:,.0f} vectors/s one at a time (directions regenerated from the seed per call)"
    )

    # ---------------- figure --------------------------------------------------------------------------------------
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, ys in curves.items():
        ax.plot(M_SWEEP, ys, marker="o", label=label)
    ax.plot(M_SWEEP, [1 / np.sqrt(m - 2) for m in M_SWEEP], "k:", label="1/sqrt(m-2)")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="memory (floats; HLL: 4 bytes per float)",
        ylabel="median relative error",
        title=f"synthetic, n = {n_list[-1]}, sigma = 0.1",
    )
    ax.legend(fontsize=8)
    run.figure(fig, "error_vs_memory", caption="Relative error against memory at equal bytes")

    # ---------------- checks (digest thresholds) ----------------------------------------------------------------
    for n in n_list:
        run.check(
            f"synthetic median rel. error, m=1024, sigma=0.1, n={n}",
            float(np.median(err_main[(n, 0.1, 1024)])),
            "<=",
            0.08,
        )
    pooled = {
        m: float(np.median(np.concatenate([err_main[(n, 0.1, m)] for n in n_list]))) for m in (256, 1024)
    }
    run.check("error shrink m=256 -> 1024 (median over n and seeds)", pooled[256] / pooled[1024], ">=", 1.6)
    run.check(
        "HLL-on-raw overestimate factor (min over n)", min(hll_raw_ratio[(n, 0.1)] for n in n_list), ">=", 3.0
    )
    run.check(
        "HLL-on-raw error / MaxSketch error (min over n)",
        min(_rel(hll_raw_ratio[(n, 0.1)] * n, n) / np.median(err_main[(n, 0.1, 1024)]) for n in n_list),
        ">=",
        10.0,
    )
    t = text_rows
    run.check("text median rel. error (centred, m=1024)", t["maxsketch"], "<=", 0.25)
    run.check("text: MaxSketch error < HLL-on-raw error", t["maxsketch"] - t["hll_raw"], "<", 0.0)
    run.check(
        "text: MaxSketch error < HLL-on-SimHash error (best bits)",
        t["maxsketch"] - t["hll_simhash"],
        "<",
        0.0,
    )
    run.check(f"calibration fitted on n<=1000: median rel. error at n={n_big}", calib_err, "<=", 0.15)
    run.metric("uncalibrated_uncorrected_error_at_n_big", uncal_err)


def _text_stream(run: Run, seeds: list[int]) -> dict[str, float]:
    from neurips26.data.text_embeddings import encode_minilm

    from .text_stream import make_view_stream, stdlib_sentences

    rng = np.random.default_rng(run.seed + 17)
    sentences = stdlib_sentences()
    n_eval = run.pick(quick=400, full=min(3000, len(sentences) - 400))
    n_held = run.pick(quick=150, full=400)
    order = rng.permutation(len(sentences))
    evaluation = [sentences[i] for i in order[:n_eval]]
    held_out = [sentences[i] for i in order[n_eval : n_eval + n_held]]
    texts, labels = make_view_stream(evaluation, rng)
    held_texts, held_labels = make_view_stream(held_out, rng)
    run.note(
        f"text stream: {n_eval} distinct stdlib sentences, {len(texts)} noisy views; {n_held} held-out "
        "sentences for the centring mean, the noise scale and the calibration"
        + ("; the digest's quick protocol names 1000 sentences, cut for encoding time" if run.quick else "")
    )
    with run.timer("minilm_encoding"):
        emb = encode_minilm(texts + held_texts)
    x_raw, h_raw = emb[: len(texts)], emb[len(texts) :]
    mean = h_raw.mean(axis=0)

    def centre(a: np.ndarray) -> np.ndarray:
        return _unit(a - mean).astype(np.float32)

    # first two views of each held-out sentence form the labelled pairs for the noise scale
    first = np.array([np.flatnonzero(held_labels == k)[:2] for k in range(n_held)])
    dim = emb.shape[1]
    p = int(np.log2(4 * M_MAIN))
    out_rows, result = [], {}
    for name, f in (("raw", lambda a: a.astype(np.float32)), ("centred", centre)):
        xe, xh = f(x_raw), f(h_raw)
        tau = estimate_noise_scale(xh[first[:, 0]], xh[first[:, 1]])
        radius = float(np.quantile(np.linalg.norm(xh[first[:, 0]] - xh[first[:, 1]], axis=1), 0.9))
        # calibration streams: subsets of the held-out sentences (n <= n_held), never the evaluation set
        cal_est, cal_true = [], []
        for n_c in (n_held // 6, n_held // 3, 2 * n_held // 3, n_held):
            sel = held_labels < n_c
            for s in seeds[:3]:
                cal_est.append(_sketch(xh[sel], M_MAIN, s + 104729).estimate(noise_scale=0.0))
                cal_true.append(n_c)
        calib = LogLinearCalibration().fit(cal_est, cal_true)
        unc, cor, cal = [], [], []
        for s in seeds:
            sk = _sketch(xe, M_MAIN, s)
            est0 = sk.estimate(noise_scale=0.0)
            unc.append(_rel(est0, n_eval))
            cor.append(_rel(sk.estimate(noise_scale=tau), n_eval))
            cal.append(_rel(calib.predict(est0), n_eval))
        sim = {b: hll_count(simhash_signatures(xe, b, seeds[0]), p) for b in SIMHASH_BITS}
        best_bits = min(sim, key=lambda b: _rel(sim[b], n_eval))
        row = {
            "embedding": name,
            "n": n_eval,
            "items": len(texts),
            "tau_hat": tau,
            "maxsketch_uncorrected_med": float(np.median(unc)),
            "maxsketch_noise_corrected_med": float(np.median(cor)),
            "maxsketch_calibrated_med": float(np.median(cal)),
            "maxsketch_calibrated_p90": float(np.quantile(cal, 0.9)),
            "hll_raw_err": _rel(hll_count_strings(texts, p), n_eval),
            f"hll_simhash_best_err (bits={best_bits})": _rel(sim[best_bits], n_eval),
            "sampling_err": _rel(
                float(
                    np.median([sampling_count(xe, M_MAIN // dim, radius=radius, seed=s) for s in seeds[:5]])
                ),
                n_eval,
            ),
            "leader_clustering_offline_err (O(n) memory)": _rel(leader_count(xe, radius), n_eval),
        }
        out_rows.append(row)
        if name == "centred":
            result = {
                "maxsketch": row["maxsketch_calibrated_med"],
                "hll_raw": row["hll_raw_err"],
                "hll_simhash": row[f"hll_simhash_best_err (bits={best_bits})"],
            }
    run.table(
        out_rows,
        name="text",
        caption="MiniLM sentence stream, m = 1024 floats; median relative error "
        "over sketch seeds; the gated MaxSketch variant is centred + calibrated on held-out small streams",
    )
    return result
