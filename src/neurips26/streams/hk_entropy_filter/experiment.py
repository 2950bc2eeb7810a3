"""Reproduction: H_K estimator checks, then a scaled-down single-lineage collapse loop with H_K filtering.

Part A (estimator, exact): 10 random Markov chains (2-4 states, entropy rate in [0.3, 1.9] bits) with n = 2e4
tokens, replicated over fresh chains and sample paths: correlation and slope of H_K ("increasing") against the
true rate, worst relative error of the "bagrow" variant over the 10 chains; duplication (x -> xx) must lower and
word shuffling must raise H_K of real docstrings. Estimator cost at 1e6 tokens: the longest previous factor
from pydivsufsort's suffix array, our numpy suffix-array code and the naive O(n^2) scan (extrapolated from smaller n
by a power law). Only chains whose path of n tokens mixes are used (see ``MIXING_REL_SE_MAX``); the precondition
checks on every path that the states it visited give the chain's rate.

Part B (collapse loop; the paper's 8B-LLM QLoRA loop is out of reach, tier C): generation-0 data = Python
stdlib docstrings and pydoc topics (word tokens); model = word trigram LM (interpolated absolute discounting),
sampled at temperature 0.9 with top-k = 20; per generation a pool of D documents of 80-150 words, keep q = 50%
by the filter, refit on the kept set only (single lineage, no real data after generation 0). Filters: none
(keep all), random, logprob-low, logprob-high (mean token log-probability under the generating model),
H_K-high (length-adjusted), gzip-ratio-high. Diversity of the generation-G pool: unique trigrams,
vocabulary, within-document trigram repetition rate; quality guard: mean log-probability under the
generation-0 model. Welch t-tests across seeds. Our small-model loop tests direction and rough magnitude
only, not the paper's p-values.

Reconstructed [R] (paper text unavailable): the model (trigram LM instead of Llama-3.1-8B + QLoRA), its
smoothing, top-k = 20, the word unit, q = 0.5, "none" = keep the whole pool (the only condition trained on D
rather than q D documents), the length adjustment of H_K, the repetition metric (within-document repeated
trigrams), and the collapse detector computed on per-generation mean H_K (all seeds pooled).
"""

from __future__ import annotations

import zlib

import matplotlib.pyplot as plt
import numpy as np
from scipy import stats

from neurips26.harness import Run, loglog_slope, time_repeats

from .filter import EntropyRateFilter
from .hk_estimator import entropy_rate, match_lengths, naive_match_lengths, tokenize
from .ngram_lm import TrigramLM
from .stdlib_corpus import stdlib_docstrings

FILTERS = ("none", "random", "logprob-low", "logprob-high", "hk", "gzip")
# A chain is used only if the path of n tokens averages over its stationary law: the relative standard error of
# the path's occupation-weighted entropy (Markov-chain CLT, :func:`occupation_rate_rel_se`) must be at most
# 1/8 of the tightest claim's tolerance (the bagrow 8%), so that the precondition's bar of half the tolerance is
# four standard errors away on every path [R]
MIXING_REL_SE_MAX = 0.01


# --- part A: estimator --------------------------------------------------------------------------------------
def markov_entropy_rate(P: np.ndarray) -> float:
    """H = -sum_i pi_i sum_j P_ij log2 P_ij, pi the stationary distribution."""
    return float(stationary_distribution(P) @ row_entropies(P))


def spectral_gap(P: np.ndarray) -> float:
    """``1 - |lambda_2|`` of a transition matrix: the inverse relaxation time of the chain."""
    moduli = np.sort(np.abs(np.linalg.eigvals(P)))[::-1]
    return float(1.0 - moduli[1])


def stationary_distribution(P: np.ndarray) -> np.ndarray:
    w, vecs = np.linalg.eig(P.T)
    pi = np.real(vecs[:, np.argmin(np.abs(w - 1))])
    return pi / pi.sum()


def row_entropies(P: np.ndarray) -> np.ndarray:
    """h_s = -sum_j P_sj log2 P_sj, the entropy of the next token in state s (H = sum_s pi_s h_s)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.where(P > 0, P * np.log2(P), 0.0).sum(axis=1)


def occupation_rate_rel_se(P: np.ndarray, n: int) -> float:
    """Relative standard error, over paths of ``n`` steps, of the path's own entropy rate
    ``(1/n) sum_t h(X_t)`` around ``H``: how far the states a single path visits can move the rate it shows.

    Markov-chain CLT: ``n Var -> sigma^2 = Var_pi(h) + 2 sum_{k>=1} Cov_pi(h(X_0), h(X_k))``, in closed form
    ``2 <f, Z f>_pi - <f, f>_pi`` with ``f = h - H`` and the fundamental matrix ``Z = (I - P + 1 pi^T)^-1``
    (Kemeny and Snell); exact for any ergodic finite chain, reversible or not. A slowly mixing chain whose
    near-closed classes differ in entropy has a large value; one whose states all carry the same entropy has
    none, however slowly it mixes.
    """
    pi = stationary_distribution(P)
    h = row_entropies(P)
    rate = float(pi @ h)
    f = h - rate
    k = P.shape[0]
    Z = np.linalg.inv(np.eye(k) - P + np.outer(np.ones(k), pi))
    sigma2 = max(float(2 * pi @ (f * (Z @ f)) - pi @ (f * f)), 0.0)
    return float(np.sqrt(sigma2 / n) / rate)


def random_markov_sources(
    n_sources: int, rng: np.random.Generator, path_tokens: int | None = None
) -> list[tuple[np.ndarray, float]]:
    """Chains with 2-4 states whose entropy rates spread over [0.3, 1.9] bits (rejection sampling).

    With ``path_tokens``, chains that do not mix within a path of that length are redrawn: those whose
    :func:`occupation_rate_rel_se` exceeds ``MIXING_REL_SE_MAX``. A Dirichlet row with concentration 0.05 can
    make a nearly reducible chain (lambda_2 = 0.99976 was drawn), whose one path of that length shows a single
    near-closed class, not the stationary rate.
    """
    out = []
    for target in np.linspace(0.3, 1.9, n_sources):
        states = [k for k in (2, 3, 4) if np.log2(k) > target + 0.05]
        while True:
            k = int(rng.choice(states))
            P = rng.dirichlet(np.full(k, np.exp(rng.uniform(np.log(0.05), np.log(5.0)))), size=k)
            P = np.maximum(P, 1e-12)
            P /= P.sum(axis=1, keepdims=True)
            h = markov_entropy_rate(P)
            if abs(h - target) < 0.05 and (
                path_tokens is None or occupation_rate_rel_se(P, path_tokens) <= MIXING_REL_SE_MAX
            ):
                out.append((P, h))
                break
    return out


def sample_markov(P: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """A path of length ``n`` of the chain with transition matrix ``P`` from a uniform random start.

    Every step draws the next state from every state at once (``step[t, s]``); the path is the running
    composition ``s_{t+1} = step[t, s_t]``, computed as a prefix scan of maps (log2 n numpy passes).
    """
    cum = np.cumsum(P, axis=1)
    step = (rng.random(n)[:, None, None] > cum[None, :, :-1]).sum(
        axis=2
    )  # (n, k): next state from each state
    s0 = int(rng.integers(P.shape[0]))
    # prefix[t] = step[t-1] o ... o step[0], as maps on the k states (Hillis-Steele scan of compositions)
    prefix = np.vstack([np.arange(P.shape[0])[None, :], step[: n - 1]])
    offset = 1
    while offset < n:
        prefix[offset:] = np.take_along_axis(prefix[offset:], prefix[:-offset], axis=1)
        offset *= 2
    return prefix[:, s0]


# --- part B: collapse loop ----------------------------------------------------------------------------------
def pool_metrics(pool: list[np.ndarray], vocab_size: int) -> dict[str, float]:
    """Unique trigrams, vocabulary and mean within-document trigram repetition rate of a pool."""
    lengths = np.array([d.size for d in pool])
    x = np.concatenate(pool)
    doc = np.repeat(np.arange(len(pool)), lengths)
    ok = np.flatnonzero(doc[:-2] == doc[2:])
    keys = (x[ok] * vocab_size + x[ok + 1]) * vocab_size + x[ok + 2]
    per_doc = np.unique(doc[ok] * vocab_size**3 + keys) // vocab_size**3
    uniq_doc = np.bincount(per_doc, minlength=len(pool))
    total_doc = np.maximum(lengths - 2, 1)
    return {
        "unique_trigrams": float(np.unique(keys).size),
        "vocabulary": float(np.unique(x).size),
        "repetition": float(np.mean(1.0 - uniq_doc / total_doc)),
    }


def gzip_ratio(pool: list[np.ndarray], words: np.ndarray) -> np.ndarray:
    texts = [" ".join(words[d]).encode() for d in pool]
    return np.array([len(zlib.compress(t, 9)) / len(t) for t in texts])


def select(
    name: str, pool: list[np.ndarray], model: TrigramLM, words: np.ndarray, q: float, rng: np.random.Generator
) -> list[np.ndarray]:
    """The kept set of one generation: every filter keeps round(q * D) documents, "none" keeps all."""
    k = int(round(q * len(pool)))
    if name == "none":
        return pool
    if name == "random":
        idx = rng.permutation(len(pool))[:k]
    elif name == "logprob-low":  # most surprising (Gambetta et al. style)
        idx = np.argsort(model.mean_logprob(pool), kind="stable")[:k]
    elif name == "logprob-high":
        idx = np.argsort(-model.mean_logprob(pool), kind="stable")[:k]
    elif name == "gzip":  # least compressible
        idx = np.argsort(-gzip_ratio(pool, words), kind="stable")[:k]
    elif name == "hk":
        return EntropyRateFilter(keep_fraction=q).fit_transform(pool)
    else:
        raise ValueError(f"unknown filter {name!r}")
    return [pool[i] for i in np.sort(idx)]


def markov_replicate(rng: np.random.Generator, n_sources: int, n_tokens: int) -> list[dict[str, float]]:
    """One replicate of the estimator check: fresh chains, one sample path each; a row per chain."""
    rows = []
    for P, h in random_markov_sources(n_sources, rng, path_tokens=n_tokens):
        x = sample_markov(P, n_tokens, rng)
        hi, hb = entropy_rate(x), entropy_rate(x, variant="bagrow")
        occupation = np.bincount(x, minlength=P.shape[0]) / x.size
        rows.append(
            {
                "states": P.shape[0],
                "relaxations_in_path": n_tokens * spectral_gap(P),
                "mixing_rel_se": occupation_rate_rel_se(P, n_tokens),
                # the rate this path's visited states give, relative to the chain's: what mixing must keep small
                "occupation_rate_rel_dev": abs(float(occupation @ row_entropies(P)) / h - 1.0),
                "occupation_tv": 0.5 * float(np.abs(occupation - stationary_distribution(P)).sum()),
                "true_H": h,
                "H_K_increasing": hi,
                "H_K_bagrow": hb,
                "bagrow_rel_err": abs(hb - h) / h,
            }
        )
    return rows


def run(run: Run) -> None:
    rng = run.rng
    n_reps = run.param("markov_replicates", quick=8, full=20)
    n_tokens = run.param("markov_tokens", quick=20_000)
    n_sources = run.param("markov_sources", quick=10)
    # ---------------- part A: estimator checks, over fresh chains and sample paths ----------------
    with run.timer("markov"):
        reps = [markov_replicate(rng, n_sources, n_tokens) for _ in range(n_reps)]
    corr, slope, worst = [], [], []
    for rows in reps:
        truth = np.array([r["true_H"] for r in rows])
        fit = stats.linregress(truth, [r["H_K_increasing"] for r in rows])
        corr.append(float(fit.rvalue))
        slope.append(float(fit.slope))
        worst.append(max(r["bagrow_rel_err"] for r in rows))
    err = np.array([[r["bagrow_rel_err"] for r in rows] for rows in reps])  # (replicate, chain by rising H)
    bar = run.claims.get("markov_bagrow_worst_rel_error").threshold
    true_h = np.array([[r["true_H"] for r in rows] for rows in reps])
    bias = np.array([[r["H_K_increasing"] / r["true_H"] - 1 for r in rows] for rows in reps])
    run.table(
        [
            {
                "chain (by rising H)": k,
                "true_H_mean": float(true_h[:, k].mean()),
                "bagrow_rel_err_mean": float(err[:, k].mean()),
                "bagrow_rel_err_max": float(err[:, k].max()),
                "share_of_paths_above_bar": float(np.mean(err[:, k] > bar)),
                "increasing_rel_bias_mean": float(bias[:, k].mean()),
            }
            for k in range(n_sources)
        ],
        name="markov",
        caption=f"H_K on Markov chains with known entropy rate, n = {n_tokens} tokens, {n_reps} replicates "
        "(fresh chains and sample paths); chains ordered by their target rate (0.3 to 1.9 bits)",
    )
    run.metric("bagrow_worst_err_replicates_min", float(np.min(worst)))
    run.metric("bagrow_worst_err_replicates_max", float(np.max(worst)))
    run.metric("bagrow_replicates_above_bar", int(np.sum(np.array(worst) > bar)))
    run.metric("bagrow_err_mean_lowest_entropy_chain", float(err[:, 0].mean()))
    run.metric("bagrow_share_above_bar_lowest_entropy_chain", float(np.mean(err[:, 0] > bar)))
    run.metric("bagrow_err_mean_second_lowest_chain", float(err[:, 1].mean()))
    run.metric("bagrow_err_mean_upper_half_chains", float(err[:, n_sources // 2 :].mean()))
    run.metric("markov_increasing_mean_rel_bias", float(bias.mean()))

    docs = stdlib_docstrings() if run.full else stdlib_docstrings(max_chars=1_300_000)
    with run.timer("monotonicity"):
        long_docs = [t for t in (tokenize(d) for d in docs) if len(t) >= 200][:40]
        dup = np.mean([entropy_rate(t + t) < entropy_rate(t) for t in long_docs])
        shuf = []
        for t in long_docs:
            shuffled = [entropy_rate([t[i] for i in rng.permutation(len(t))]) for _ in range(5)]
            shuf.append(np.mean(shuffled) > entropy_rate(t))
    run.metric("monotonicity_docstrings", len(long_docs))

    with run.timer("estimator_scaling"):
        zipf = np.minimum(rng.zipf(1.3, size=1_000_000), 5000)
        naive_n = run.pick(quick=[200, 400, 800], full=[250, 500, 1000, 2000])
        naive_t = []
        for n in naive_n:
            assert np.array_equal(naive_match_lengths(zipf[:n]), match_lengths(zipf[:n], backend="numpy"))
            naive_t.append(time_repeats(lambda n=n: naive_match_lengths(zipf[:n]), repeat=1, warmup=0)["min"])
        reps_1e6 = run.pick(quick=2, full=5)
        t_pds = time_repeats(lambda: match_lengths(zipf, backend="pydivsufsort"), repeat=reps_1e6)["min"]
        t_ours = time_repeats(lambda: match_lengths(zipf, backend="numpy"), repeat=1, warmup=0)["min"]
        naive_fit = loglog_slope(naive_n, naive_t)
        naive_1e6 = float(np.exp(naive_fit.intercept + naive_fit.slope * np.log(1e6)))
    run.metric("pydivsufsort_seconds_at_1e6_tokens", t_pds)
    run.metric("numpy_seconds_at_1e6_tokens", t_ours)
    run.metric("numpy_over_pydivsufsort_time_at_1e6", t_ours / t_pds)
    run.metric("naive_seconds_at_1e6_tokens_extrapolated", naive_1e6)
    run.metric("naive_cost_exponent", naive_fit.slope)
    run.table(
        [
            {
                "method": "pydivsufsort suffix array + compiled LPF pass (default when installed)",
                "seconds_at_1e6": t_pds,
            },
            {
                "method": "suffix array + lifting in numpy (ours, fallback and reference)",
                "seconds_at_1e6": t_ours,
            },
            {"method": "naive scan (extrapolated)", "seconds_at_1e6": naive_1e6, "exponent": naive_fit.slope},
        ],
        name="estimator_cost",
        caption="H_K match lengths of 1e6 Zipf(1.3) tokens (identical lengths from all three)",
    )

    # ---------------- part B: collapse loop ----------------
    D = run.param("pool_documents", quick=400, full=2000)
    G = run.param("generations", quick=5, full=6)
    n_seeds = run.param("lineage_seeds", quick=8)
    q = run.param("keep_fraction", quick=0.5)
    with run.timer("corpus_and_gen0_model"):
        tokens = [w for d in docs for w in tokenize(d)]
        words = np.array(["<s>"] + sorted(set(tokens)))
        vocab = {w: i for i, w in enumerate(words)}
        ids = np.fromiter((vocab[w] for w in tokens), np.int64, len(tokens))
        corpus_rng = np.random.default_rng(run.seed + 12345)
        cuts = np.cumsum(corpus_rng.integers(80, 151, ids.size // 80))
        chunks = np.split(ids, cuts[cuts < ids.size])[:-1]
        V = words.size
        model0 = TrigramLM(V, discount=0.75, top_k=20, temperature=0.9).fit(chunks)
    run.metric("gen0_tokens", int(ids.size))
    run.metric("gen0_documents", len(chunks))
    run.metric("vocabulary_size", int(V - 1))

    # hist[filter][seed][g] = metrics of the pool generated at generation g
    hist: dict[str, list[list[dict[str, float]]]] = {f: [] for f in FILTERS}
    for seed in run.progress(run.seeds(n_seeds), "collapse loop (seeds)"):
        srng = np.random.default_rng(seed)
        pool0 = model0.sample(srng.integers(80, 151, D), srng)
        for f_idx, name in enumerate(FILTERS):
            frng = np.random.default_rng([seed, f_idx])
            model, pool, seq = model0, pool0, []
            for g in range(G + 1):
                with run.timer("metrics"):
                    m = pool_metrics(pool, V)
                    if name == "none" or g == G:  # the collapse detector reads the unfiltered lineage only
                        m["H_K"] = float(np.nanmean(EntropyRateFilter().entropy_rates(pool)[0]))
                    if g == G:  # quality guard: is the kept "diversity" still text-like?
                        m["quality_logprob_gen0"] = float(np.mean(model0.mean_logprob(pool)))
                seq.append(m)
                if g == G:
                    break
                with run.timer(f"filter_{name}"):
                    kept = select(name, pool, model, words, q, frng)
                with run.timer("fit_and_sample"):
                    model = TrigramLM(V, discount=0.75, top_k=20, temperature=0.9).fit(kept)
                    pool = model.sample(frng.integers(80, 151, D), frng)
            hist[name].append(seq)

    def final(name: str, key: str) -> np.ndarray:
        return np.array([seq[G][key] for seq in hist[name]])

    rows = []
    for name in FILTERS:
        row = {"filter": name}
        for key in ("unique_trigrams", "vocabulary", "repetition", "H_K", "quality_logprob_gen0"):
            vals = final(name, key)
            row[f"{key}_mean"] = float(vals.mean())
            row[f"{key}_sd"] = float(vals.std(ddof=1))
        rows.append(row)
    run.table(
        rows,
        name="collapse_loop",
        caption=f"generation-{G} pools ({D} documents), mean and sd over "
        f"{n_seeds} seeds; quality = mean log-prob under the generation-0 model (higher = closer to real)",
    )

    best_lp = max(("logprob-low", "logprob-high"), key=lambda n: final(n, "unique_trigrams").mean())
    run.metric("best_logprob_variant", best_lp)
    none_tri = np.array([[seq[g]["unique_trigrams"] for g in range(G + 1)] for seq in hist["none"]])
    pvals, gains = [], {}
    for key in ("unique_trigrams", "vocabulary"):
        hk = final("hk", key)
        for other, label in (("random", "random"), (best_lp, "best_logprob")):
            ref = final(other, key)
            gains[(key, label)] = hk / ref - 1  # per lineage seed (each seed's lineages share generation 0)
            run.metric(f"gain_{key}_vs_{label}_of_means", float(hk.mean() / ref.mean() - 1))
            pvals.append(float(stats.ttest_ind(hk, ref, equal_var=False).pvalue))
    rep_others = np.minimum(final("random", "repetition"), final(best_lp, "repetition"))
    gens = np.concatenate([np.arange(G + 1)] * n_seeds)
    hk_none = np.concatenate([[seq[g]["H_K"] for g in range(G + 1)] for seq in hist["none"]])
    rho = stats.spearmanr(gens, hk_none).statistic
    run.metric(
        "hk_vs_gzip_unique_trigram_gain",
        float(final("hk", "unique_trigrams").mean() / final("gzip", "unique_trigrams").mean() - 1),
    )
    run.metric("welch_pvalues", pvals)
    run.metric(
        "quality_hk_minus_best_logprob",
        float(final("hk", "quality_logprob_gen0").mean() - final(best_lp, "quality_logprob_gen0").mean()),
    )
    tri_lp = gains[("unique_trigrams", "best_logprob")]
    run.metric("trigram_gain_vs_best_logprob_min", float(tri_lp.min()))
    run.metric("trigram_gain_vs_best_logprob_max", float(tri_lp.max()))

    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    for name in FILTERS:
        for ax, key in zip(axes, ("unique_trigrams", "vocabulary", "repetition")):
            arr = np.array([[seq[g][key] for g in range(G + 1)] for seq in hist[name]])
            ax.errorbar(np.arange(G + 1), arr.mean(0), yerr=arr.std(0, ddof=1), label=name, capsize=2)
            ax.set_xlabel("generation")
            ax.set_title(key.replace("_", " "))
    axes[0].set_yscale("log")
    axes[0].legend()
    run.figure(
        fig,
        "unique_trigrams_by_generation",
        caption="Diversity of each lineage's pool by generation (mean +- sd over seeds), per filter",
    )

    # ---------------- checks (digest thresholds) ----------------
    # correlation, slope and bagrow worst case: the digest's statistics over the 10 chains of a replicate, one
    # value per replicate, gated by the mixing precondition (the fit pooled over all chains is only recorded)
    pooled = stats.linregress(true_h.ravel(), [r["H_K_increasing"] for rows in reps for r in rows])
    run.metric("markov_corr_pooled", float(pooled.rvalue))
    run.metric("markov_slope_pooled", float(pooled.slope))
    for name, values in (("markov_corr", corr), ("markov_slope", slope)):
        run.metric(f"{name}_replicates_min", float(np.min(values)))
        run.metric(f"{name}_replicates_max", float(np.max(values)))
    every_chain = [r for rows in reps for r in rows]
    run.metric("markov_min_relaxations_in_path", float(min(r["relaxations_in_path"] for r in every_chain)))
    run.metric("markov_mixing_rel_se_max", float(max(r["mixing_rel_se"] for r in every_chain)))
    run.metric("markov_occupation_tv_max", float(max(r["occupation_tv"] for r in every_chain)))
    deviation = np.array([[r["occupation_rate_rel_dev"] for r in rows] for rows in reps])
    run.metric("markov_occupation_rate_rel_dev_max", float(deviation.max()))
    run.check("markov_paths_mix", deviation.max(axis=1).tolist())  # worst chain of each replicate
    run.check("markov_corr_increasing", corr)  # the digest's statistic: across the 10 chains of a replicate
    run.check("markov_slope_increasing", slope)
    run.check("markov_bagrow_worst_rel_error", worst)
    run.check("duplication_lowers_hk", dup)
    run.check("shuffling_raises_hk", float(np.mean(shuf)))
    run.check("collapse_shown", none_tri[:, G] / none_tri[:, 0])
    # the filter comparisons are about mean diversity over lineage seeds: decided on a bootstrap 95% interval
    boot = np.random.default_rng([run.seed, 7])
    for check_id, key, other in (
        ("trigram_gain_vs_random", "unique_trigrams", "random"),
        ("trigram_gain_vs_best_logprob", "unique_trigrams", best_lp),
        ("vocabulary_gain_vs_random", "vocabulary", "random"),
        ("vocabulary_gain_vs_best_logprob", "vocabulary", best_lp),
    ):
        run.check(check_id, bootstrap_interval(final("hk", key), final(other, key), boot, "gain"))
    run.check("welch_max_pvalue", max(pvals))
    run.check(
        "repetition_vs_best_other",
        bootstrap_interval(final("hk", "repetition"), rep_others, boot, "difference"),
    )
    run.check("collapse_detector_spearman", rho)


def bootstrap_interval(
    ours: np.ndarray, other: np.ndarray, rng: np.random.Generator, kind: str, n_boot: int = 4000
) -> list[float]:
    """95% percentile-bootstrap interval, resampling lineage seeds in pairs, of ``mean(ours) / mean(other) - 1``
    (``kind="gain"``) or ``mean(ours - other)`` (``kind="difference"``)."""
    idx = rng.integers(0, ours.size, (n_boot, ours.size))
    a, b = ours[idx].mean(axis=1), other[idx].mean(axis=1)
    stat = a / b - 1.0 if kind == "gain" else a - b
    return [float(v) for v in np.quantile(stat, [0.025, 0.975])]
