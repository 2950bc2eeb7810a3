"""Reproduction: H_K estimator checks, then a scaled-down single-lineage collapse loop with H_K filtering.

Part A (estimator, exact): 10 random Markov chains (2-4 states, entropy rate in [0.3, 1.9] bits) with n = 2e4
tokens: correlation and slope of H_K ("increasing") against the true rate, relative error of the "bagrow"
variant; duplication (x -> xx) must lower and word shuffling must raise H_K of real docstrings. Estimator cost
at 1e6 tokens against the naive O(n^2) scan (extrapolated from smaller n by a fitted power law).

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

import time
import zlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

from neurips26.harness import Run  # noqa: E402

from .filter import EntropyRateFilter  # noqa: E402
from .hk_estimator import entropy_rate, match_lengths, naive_match_lengths, tokenize  # noqa: E402
from .ngram_lm import TrigramLM  # noqa: E402
from .stdlib_corpus import stdlib_docstrings  # noqa: E402

FILTERS = ("none", "random", "logprob-low", "logprob-high", "hk", "gzip")


# --- part A: estimator --------------------------------------------------------------------------------------
def markov_entropy_rate(P: np.ndarray) -> float:
    """H = -sum_i pi_i sum_j P_ij log2 P_ij, pi the stationary distribution."""
    w, vecs = np.linalg.eig(P.T)
    pi = np.real(vecs[:, np.argmin(np.abs(w - 1))])
    pi = pi / pi.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(P > 0, P * np.log2(P), 0.0)
    return float(-(pi * plogp.sum(axis=1)).sum())


def random_markov_sources(n_sources: int, rng: np.random.Generator) -> list[tuple[np.ndarray, float]]:
    """Chains with 2-4 states whose entropy rates spread over [0.3, 1.9] bits (rejection sampling)."""
    out = []
    for target in np.linspace(0.3, 1.9, n_sources):
        states = [k for k in (2, 3, 4) if np.log2(k) > target + 0.05]
        while True:
            k = int(rng.choice(states))
            P = rng.dirichlet(np.full(k, np.exp(rng.uniform(np.log(0.05), np.log(5.0)))), size=k)
            P = np.maximum(P, 1e-12)
            P /= P.sum(axis=1, keepdims=True)
            h = markov_entropy_rate(P)
            if abs(h - target) < 0.05:
                out.append((P, h))
                break
    return out


def sample_markov(P: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    cum = np.cumsum(P, axis=1)
    nxt = (rng.random(n)[:, None, None] > cum[None, :, :-1]).sum(
        axis=2
    )  # next state from every state, per step
    nxt = nxt.tolist()
    s = int(rng.integers(P.shape[0]))
    out = [0] * n
    for t in range(n):
        out[t] = s
        s = nxt[t][s]
    return np.asarray(out)


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


def run(run: Run) -> None:
    run.expect(
        "partial",
        reason=(
            "Two of 13 checks fail in quick mode (seed 0). (1) The 'bagrow' variant's worst relative "
            "error over the 10 Markov chains is 9.3% > 8%, on the lowest-entropy chain (H = 0.29 bits, "
            "long runs of one state); other sample paths of the same chain give 5-6%, so the 8% bound "
            "is at the edge of the finite-sample (n = 2e4) spread for low-entropy sources. (2) In the "
            "trigram-LM loop, H_K filtering beats random on every metric and beats surprise "
            "(logprob-low) filtering on vocabulary (+60%) and repetition, but keeps only ~12% (< 15%) "
            "more unique trigrams than logprob-low: keeping the most surprising documents also keeps "
            "rare trigrams when the model is an n-gram table. Logprob-low pays with the worst quality "
            "guard (log-prob under the generation-0 model). Collapse, the collapse detector "
            "(rho ~ -0.98) and all significance tests pass. Full mode (D = 2000, G = 6): the trigram "
            "gain over logprob-low is 19% and passes; only the bagrow check (same chains) fails."
        ),
    )
    rng = run.rng
    # ---------------- part A: estimator checks ----------------
    with run.timer("markov"):
        sources = random_markov_sources(10, rng)
        rows, truth, h_inc, h_bag = [], [], [], []
        for k, (P, h) in enumerate(sources):
            x = sample_markov(P, 20_000, rng)
            hi, hb = entropy_rate(x), entropy_rate(x, variant="bagrow")
            truth.append(h)
            h_inc.append(hi)
            h_bag.append(hb)
            rows.append(
                {
                    "source": k,
                    "states": P.shape[0],
                    "true_H": h,
                    "H_K_increasing": hi,
                    "H_K_bagrow": hb,
                    "bagrow_rel_err": abs(hb - h) / h,
                }
            )
        run.table(
            rows, name="markov", caption="H_K (bits/token) on Markov chains with known entropy rate, n=2e4"
        )
    truth, h_inc, h_bag = map(np.asarray, (truth, h_inc, h_bag))
    fit = stats.linregress(truth, h_inc)
    run.check("Markov: corr(H_K increasing, true rate), 10 sources", fit.rvalue, ">=", 0.98)
    run.check("Markov: slope of H_K increasing on true rate", fit.slope, "in", (0.8, 1.2))
    run.check("Markov: bagrow variant max relative error", np.max(np.abs(h_bag - truth) / truth), "<=", 0.08)
    run.metric("markov_increasing_mean_rel_bias", float(np.mean((h_inc - truth) / truth)))
    run.note(
        "The 'increasing' variant is biased low at n=2e4 (log2(i) converges slowly); documented, not fixed."
    )

    docs = stdlib_docstrings() if run.full else stdlib_docstrings(max_chars=1_300_000)
    with run.timer("monotonicity"):
        long_docs = [t for t in (tokenize(d) for d in docs) if len(t) >= 200][:40]
        dup = np.mean([entropy_rate(t + t) < entropy_rate(t) for t in long_docs])
        shuf = []
        for t in long_docs:
            shuffled = [entropy_rate([t[i] for i in rng.permutation(len(t))]) for _ in range(5)]
            shuf.append(np.mean(shuffled) > entropy_rate(t))
    run.check(f"duplication x->xx lowers H_K (fraction of {len(long_docs)} docstrings)", dup, ">=", 1.0)
    run.check(
        f"word shuffling raises H_K (fraction of {len(long_docs)} docstrings)", np.mean(shuf), ">=", 1.0
    )

    with run.timer("estimator_scaling"):
        zipf = np.minimum(rng.zipf(1.3, size=1_000_000), 5000)
        naive_n = run.pick(quick=[200, 400, 800], full=[250, 500, 1000, 2000])
        naive_t = []
        for n in naive_n:
            assert np.array_equal(naive_match_lengths(zipf[:n]), match_lengths(zipf[:n]))
            t0 = time.perf_counter()
            naive_match_lengths(zipf[:n])
            naive_t.append(time.perf_counter() - t0)
        fast_n = [100_000, 300_000, 1_000_000]
        fast_t = []
        for n in fast_n:
            t0 = time.perf_counter()
            match_lengths(zipf[:n])
            fast_t.append(time.perf_counter() - t0)
        b_naive = np.polyfit(np.log(naive_n), np.log(naive_t), 1)
        b_fast = np.polyfit(np.log(fast_n), np.log(fast_t), 1)
        naive_1e6 = float(np.exp(np.polyval(b_naive, np.log(1e6))))
    run.metric("fast_seconds_at_1e6_tokens", fast_t[-1])
    run.metric("naive_seconds_at_1e6_tokens_extrapolated", naive_1e6)
    run.metric("speedup_at_1e6_tokens", naive_1e6 / fast_t[-1])
    run.metric("fast_cost_exponent", float(b_fast[0]))
    run.metric("naive_cost_exponent", float(b_naive[0]))
    run.table(
        [
            {"method": "suffix array + lifting (ours)", "seconds_at_1e6": fast_t[-1], "exponent": b_fast[0]},
            {"method": "naive scan (extrapolated)", "seconds_at_1e6": naive_1e6, "exponent": b_naive[0]},
        ],
        name="estimator_cost",
        caption="H_K match lengths at 1e6 Zipf tokens; naive extrapolated by power law",
    )

    # ---------------- part B: collapse loop ----------------
    D = run.pick(quick=400, full=2000)
    G = run.pick(quick=5, full=6)
    n_seeds = 5
    q = 0.5
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
    run.note(
        f"generation 0: {ids.size} word tokens ({len(chunks)} documents) of stdlib docstrings and pydoc "
        f"topics, vocabulary {V - 1}; D={D} documents per generation, q={q}, G={G}, {n_seeds} seeds"
        + ("" if run.full else " (quick: D=400, G=5 instead of D=2000, G=6)")
    )

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
                    m["H_K"] = float(np.mean(EntropyRateFilter().score(pool)[0]))
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
    run.note(f"best logprob variant (more unique trigrams at generation {G}): {best_lp}")
    none_tri = np.array([[seq[g]["unique_trigrams"] for g in range(G + 1)] for seq in hist["none"]])
    run.check(
        f"collapse shown: unfiltered unique trigrams, generation {G} / generation 0",
        float(np.mean(none_tri[:, G] / none_tri[:, 0])),
        "<",
        1.0,
        note="if this fails the loop did not collapse and the filter comparison is inconclusive",
    )
    pvals = []
    for key, thr in (("unique_trigrams", 0.15), ("vocabulary", 0.10)):
        hk = final("hk", key)
        for other in ("random", best_lp):
            ref = final(other, key)
            run.check(
                f"H_K vs {other}: relative gain in {key} at generation {G}",
                hk.mean() / ref.mean() - 1,
                ">=",
                thr,
            )
            pvals.append(stats.ttest_ind(hk, ref, equal_var=False).pvalue)
    run.check("largest Welch p-value of the four H_K comparisons (5 seeds)", max(pvals), "<", 0.05)
    rep_others = min(final("random", "repetition").mean(), final(best_lp, "repetition").mean())
    run.check(
        "H_K repetition rate minus the lower of random / best logprob",
        final("hk", "repetition").mean() - rep_others,
        "<",
        0.0,
    )
    gens = np.concatenate([np.arange(G + 1)] * n_seeds)
    hk_none = np.concatenate([[seq[g]["H_K"] for g in range(G + 1)] for seq in hist["none"]])
    rho = stats.spearmanr(gens, hk_none).statistic
    run.check("collapse detector: Spearman rho(mean H_K of pool, generation), unfiltered", rho, "<", -0.5)
    gzip_gain = final("hk", "unique_trigrams").mean() / final("gzip", "unique_trigrams").mean() - 1
    run.metric("hk_vs_gzip_unique_trigram_gain", float(gzip_gain))
    run.metric("welch_pvalues", [float(p) for p in pvals])

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
