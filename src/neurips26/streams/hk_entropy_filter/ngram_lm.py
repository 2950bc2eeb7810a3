"""A small word-level trigram language model for the model-collapse loop (vectorized fit, sampling, scoring).

Interpolated absolute discounting (Ney, Essen and Kneser 1994) restricted to a candidate set per context:

    p2(w | v)    ∝ max(c(v w) - d, 0) / c(v) + d N1+(v .) / c(v) * p1(w)            over w seen after v
    p3(w | u, v) ∝ max(c(u v w) - d, 0) / c(u v) + d N1+(u v .) / c(u v) * p2(w | v)
                   over w seen after (u, v) plus the ``backoff_candidates`` most likely w under p2(. | v)

Each distribution is renormalized over its candidate set. Sampling draws from the ``top_k`` most likely
candidates at ``temperature`` (p ** (1 / T)), which sharpens the distribution and drops its tail: the
mechanism that makes a single-lineage loop (train on your own samples, repeat) lose rare n-grams. Contexts
never seen back off to p2, then to the unigram distribution. Documents start from the context (BOS, BOS).

Everything is numpy over integer token ids: counts by ``np.unique`` over packed keys, per-context top-k by one
lexsort, and sampling of all documents at once per position through one ``searchsorted`` over the cumulative
probabilities laid end to end (context c occupies the interval (c, c + 1]).
"""

from __future__ import annotations

import numpy as np

__all__ = ["TrigramLM"]

BOS = 0  # token id 0 is reserved for the begin-of-document context


def _segment_starts(groups: np.ndarray) -> np.ndarray:
    """Index where each run of equal values in the sorted array ``groups`` starts, per element."""
    starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
    return starts[np.cumsum(np.r_[True, groups[1:] != groups[:-1]]) - 1]


class _Table:
    """Conditional distributions keyed by an integer context; entries sorted by (context, token)."""

    def __init__(
        self, ctx: np.ndarray, tok: np.ndarray, prob: np.ndarray, vocab: int, top_k: int, temp: float
    ):
        order = np.lexsort((tok, ctx))
        ctx, tok, prob = ctx[order], tok[order], prob[order]
        sums = np.bincount(np.unique(ctx, return_inverse=True)[1], weights=prob)
        self.keys = np.unique(ctx)
        cidx = np.searchsorted(self.keys, ctx)
        prob = prob / sums[cidx]
        self.lookup = ctx * vocab + tok  # sorted: for log-probabilities of (context, token)
        self.logp = np.log(prob)
        # sampling table: top-k per context, tempered, cumulative in (c, c + 1]
        order = np.lexsort((-prob, cidx))
        c_s, t_s, p_s = cidx[order], tok[order], prob[order]
        rank = np.arange(c_s.size) - _segment_starts(c_s)
        keep = rank < top_k
        c_s, t_s, p_s = c_s[keep], t_s[keep], p_s[keep] ** (1.0 / temp)
        p_s = p_s / np.bincount(c_s, weights=p_s)[c_s]
        cum = np.cumsum(p_s)
        start = _segment_starts(c_s)
        cum = cum - np.r_[0.0, cum][start]  # cumulative within each context
        self.cum = c_s + np.minimum(cum, 1.0)
        self.cum[np.r_[c_s[1:] != c_s[:-1], True]] = c_s[np.r_[c_s[1:] != c_s[:-1], True]] + 1.0
        self.sample_tok = t_s

    def find(self, ctx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pos = np.searchsorted(self.keys, ctx)
        pos_c = np.minimum(pos, self.keys.size - 1)
        return pos_c, self.keys[pos_c] == ctx

    def draw(self, cidx: np.ndarray, u: np.ndarray) -> np.ndarray:
        j = np.searchsorted(self.cum, cidx + u, side="right")
        return self.sample_tok[np.minimum(j, self.cum.size - 1)]


class TrigramLM:
    """Word-level trigram LM with interpolated absolute discounting, top-k / temperature sampling.

    Parameters
    ----------
    vocab_size : number of token ids (id 0 is reserved for BOS and never generated).
    discount : absolute discount d in (0, 1).
    top_k : number of candidates kept when sampling (>= 1).
    temperature : sampling temperature (> 0); < 1 sharpens.
    backoff_candidates : how many p2-most-likely words every trigram context may back off to (>= 0).
    """

    def __init__(
        self,
        vocab_size: int,
        discount: float = 0.75,
        top_k: int = 20,
        temperature: float = 0.9,
        backoff_candidates: int = 10,
    ):
        self.vocab_size = vocab_size
        self.discount = discount
        self.top_k = top_k
        self.temperature = temperature
        self.backoff_candidates = backoff_candidates

    def _validate(self) -> None:
        if not isinstance(self.vocab_size, (int, np.integer)) or self.vocab_size < 2:
            raise ValueError(f"vocab_size must be an integer >= 2, got {self.vocab_size!r}")
        if not 0.0 < self.discount < 1.0:
            raise ValueError(f"discount must be in (0, 1), got {self.discount}")
        if not isinstance(self.top_k, (int, np.integer)) or self.top_k < 1:
            raise ValueError(f"top_k must be an integer >= 1, got {self.top_k!r}")
        if not (np.isfinite(self.temperature) and self.temperature > 0):
            raise ValueError(f"temperature must be a finite number > 0, got {self.temperature}")
        if not isinstance(self.backoff_candidates, (int, np.integer)) or self.backoff_candidates < 0:
            raise ValueError(f"backoff_candidates must be an integer >= 0, got {self.backoff_candidates!r}")

    def _stream(self, docs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if len(docs) == 0:
            raise ValueError("docs must hold at least one document")
        arrs = [np.asarray(d) for d in docs]
        for a in arrs:
            if a.ndim != 1 or a.size == 0 or a.dtype.kind not in "iu":
                raise ValueError("docs must be non-empty 1-D integer token-id arrays")
        full = np.concatenate([np.r_[BOS, BOS, a] for a in arrs]).astype(np.int64)
        if full.max() >= self.vocab_size or np.concatenate(arrs).min() < 1:
            raise ValueError(f"docs token ids must lie in [1, vocab_size - 1] = [1, {self.vocab_size - 1}]")
        is_tok = np.ones(full.size, dtype=bool)
        starts = np.cumsum([0] + [a.size + 2 for a in arrs[:-1]])
        is_tok[starts] = is_tok[starts + 1] = False
        t = np.flatnonzero(is_tok)
        return full[t - 2], full[t - 1], full[t]

    def fit(self, docs: list[np.ndarray]) -> TrigramLM:
        """Count unigrams, bigrams and trigrams of ``docs`` (lists of token ids >= 1) and build the tables."""
        self._validate()
        u, v, w = self._stream(docs)
        vs, d = self.vocab_size, self.discount
        p1 = np.bincount(w, minlength=vs).astype(np.float64)
        p1 /= p1.sum()
        # bigram level p2(w | v)
        bkeys, bcnt = np.unique(v * vs + w, return_counts=True)
        bv, bw = bkeys // vs, bkeys % vs
        cv = np.bincount(bv, weights=bcnt, minlength=vs)
        n1v = np.bincount(bv, minlength=vs)
        p2 = np.maximum(bcnt - d, 0) / cv[bv] + d * n1v[bv] / cv[bv] * p1[bw]
        self.bigram_ = _Table(bv, bw, p2, vs, self.top_k, self.temperature)
        p2n = np.exp(self.bigram_.logp)  # normalized p2, in the table's (v, w) order
        # trigram level p3(w | u, v)
        tkeys, tcnt = np.unique((u * vs + v) * vs + w, return_counts=True)
        tctx, tw = tkeys // vs, tkeys % vs
        ckeys, cinv = np.unique(tctx, return_inverse=True)
        cuv = np.bincount(cinv, weights=tcnt)
        n1uv = np.bincount(cinv)
        lam = d * n1uv / cuv  # back-off weight per context
        p2_of = p2n[np.searchsorted(self.bigram_.lookup, (tctx % vs) * vs + tw)]
        ctx_all, tok_all = [tctx], [tw]
        prob_all = [np.maximum(tcnt - d, 0) / cuv[cinv] + lam[cinv] * p2_of]
        if self.backoff_candidates > 0:  # p2's top candidates of v for every (u, v) context
            order = np.lexsort((-p2n, self.bigram_.lookup // vs))
            bv_s = (self.bigram_.lookup // vs)[order]
            rank = np.arange(bv_s.size) - _segment_starts(bv_s)
            keep = order[rank < self.backoff_candidates]
            kv, kw, kp = self.bigram_.lookup[keep] // vs, self.bigram_.lookup[keep] % vs, p2n[keep]
            first = np.searchsorted(kv, ckeys % vs)
            count = np.searchsorted(kv, ckeys % vs, side="right") - first
            rep_ctx = np.repeat(np.arange(ckeys.size), count)
            idx = np.repeat(first - np.r_[0, np.cumsum(count)[:-1]], count) + np.arange(count.sum())
            ctx_all.append(ckeys[rep_ctx])
            tok_all.append(kw[idx])
            prob_all.append(lam[rep_ctx] * kp[idx])
        ctx_c, tok_c, prob_c = np.concatenate(ctx_all), np.concatenate(tok_all), np.concatenate(prob_all)
        keys, inv = np.unique(ctx_c * vs + tok_c, return_inverse=True)
        prob = np.bincount(inv.ravel(), weights=prob_c)
        prob_k = np.zeros_like(
            prob
        )  # observed trigrams already hold their back-off term: keep, don't add twice
        obs = np.searchsorted(keys, tkeys)
        prob_k[obs] = prob_all[0]
        extra = np.ones(keys.size, dtype=bool)
        extra[obs] = False
        prob_k[extra] = prob[extra]
        self.trigram_ = _Table(keys // vs, keys % vs, prob_k, vs, self.top_k, self.temperature)
        self.unigram_logp_ = np.log(np.where(p1 > 0, p1, 1.0 / (vs * max(w.size, 1))))
        order = np.argsort(-p1[1:])[: self.top_k] + 1
        pu = p1[order] ** (1.0 / self.temperature)
        self.unigram_sample_ = (order, np.cumsum(pu / pu.sum()))
        return self

    def sample(
        self, lengths: np.ndarray, random_state: np.random.Generator | int | None = None
    ) -> list[np.ndarray]:
        """Sample one document per entry of ``lengths`` (token counts >= 1), all documents in parallel."""
        rng = np.random.default_rng(random_state)
        lengths = np.asarray(lengths, dtype=np.int64)
        if lengths.ndim != 1 or lengths.size == 0 or lengths.min() < 1:
            raise ValueError("lengths must be a non-empty 1-D array of integers >= 1")
        m, vs = lengths.size, self.vocab_size
        out = np.zeros((m, int(lengths.max())), dtype=np.int64)
        u = np.full(m, BOS, dtype=np.int64)
        v = np.full(m, BOS, dtype=np.int64)
        for t in range(out.shape[1]):
            r = rng.random(m)
            w = np.empty(m, dtype=np.int64)
            pos, hit = self.trigram_.find(u * vs + v)
            w[hit] = self.trigram_.draw(pos[hit], r[hit])
            miss = np.flatnonzero(~hit)
            if miss.size:
                pos2, hit2 = self.bigram_.find(v[miss])
                w[miss[hit2]] = self.bigram_.draw(pos2[hit2], r[miss[hit2]])
                rest = miss[~hit2]
                toks, cum = self.unigram_sample_
                w[rest] = toks[np.minimum(np.searchsorted(cum, r[rest], side="right"), toks.size - 1)]
            out[:, t] = w
            u, v = v, w
        return [out[i, : lengths[i]] for i in range(m)]

    def mean_logprob(self, docs: list[np.ndarray], backoff_penalty: float = 0.4) -> np.ndarray:
        """Mean natural-log probability per token of each document under the (untempered) model.

        Pairs outside the trigram table score with the bigram table times ``backoff_penalty``, then with the
        unigram distribution times ``backoff_penalty**2`` (stupid back-off, Brants et al. 2007), so any text
        over the vocabulary gets a finite score.
        """
        u, v, w = self._stream(docs)
        vs = self.vocab_size
        lp = self.unigram_logp_[w] + 2 * np.log(backoff_penalty)
        for table, key, pen in ((self.bigram_, v * vs + w, 1), (self.trigram_, (u * vs + v) * vs + w, 0)):
            pos = np.minimum(np.searchsorted(table.lookup, key), table.lookup.size - 1)
            hit = table.lookup[pos] == key
            lp[hit] = table.logp[pos[hit]] + pen * np.log(backoff_penalty)
        lengths = np.array([len(d) for d in docs])
        doc = np.repeat(np.arange(len(docs)), lengths)
        return np.bincount(doc, weights=lp) / lengths
