"""Knowledge-integration strategies on a tiny transformer classifier, and MedKIT's per-family scoring.

The learner is neural on purpose (a symbolic reader would solve every probe): a word-level
:class:`ProbeClassifier` (PyTorch ``TransformerEncoder``, 2 layers, 3-way head) with an optional context slot.
It is *pre-trained* on the base facts in every probe format (Q1, all paraphrase templates with synonyms,
swapped, chained through a tie, three-option formulary decisions) so that failures on updates are failures to
integrate, not unseen formats; a share of the pre-training items carry a context statement (relevant and
possibly counterfactual, or irrelevant), so the model learns to read the slot for the retrieval arm.

Strategies [reconstructed: the CPU subset of the paper's 12]:

- ``none``: the pre-trained model;
- ``ft_q1``: fine-tune on each update's own question (closed Q1);
- ``ft_paraphrase``: + the *training* paraphrase templates with synonyms;
- ``ft_paraphrase_swap``: + swapped (B vs A) forms;
- ``ft_q1_replay``: ``ft_q1`` mixed with replayed base-fact items (a locality guard);
- ``retrieval``: no weight change; the BM25 top-1 update statement (rank-bm25) goes in the context slot.

Fine-tuning runs on the latest state of every updated comparison at once (``order="batch"``) or through the
dated updates one by one (``order="sequential"``; the latest wins by recency).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..tokenizers import WordTokenizer
from .world import FAMILIES, GOALS, PERMUTATIONS, RELATIONS, ClinicalWorld, Comparison, Example, flip

__all__ = [
    "FT_STRATEGIES",
    "BM25Retriever",
    "Encoder",
    "STRATEGIES",
    "IntegrationConfig",
    "ProbeClassifier",
    "evaluate_families",
    "integrate",
    "leaked_probes",
    "pretrain",
    "pretraining_items",
    "probe_set",
    "update_blind_accuracy",
    "update_items",
]

FT_STRATEGIES = ("ft_q1", "ft_paraphrase", "ft_paraphrase_swap", "ft_q1_replay")
STRATEGIES = ("none", *FT_STRATEGIES, "retrieval")
SPECIAL = ["[pad]", "[ctx]", "[q]", "[unk]"]


class ProbeClassifier(nn.Module):
    """Word embeddings + learned positions -> ``nn.TransformerEncoder`` -> masked mean pool -> 3 logits."""

    def __init__(
        self, vocab_size: int, d_model: int = 64, n_layer: int = 2, n_head: int = 4, max_len: int = 64
    ):
        super().__init__()
        for name, v in (
            ("vocab_size", vocab_size),
            ("d_model", d_model),
            ("n_layer", n_layer),
            ("max_len", max_len),
        ):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        self.tok = nn.Embedding(vocab_size, d_model, padding_idx=0)
        self.pos = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(
            d_model, n_head, 4 * d_model, dropout=0.0, batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, n_layer, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, len(RELATIONS))
        self.max_len = max_len

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pad = ids == 0
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1]))[None]
        h = self.norm(self.encoder(x, src_key_padding_mask=pad))
        keep = (~pad).float()[..., None]
        return self.head((h * keep).sum(1) / keep.sum(1).clamp(min=1.0))


@dataclass
class IntegrationConfig:
    """Sizes and optimisation settings (defaults: the experiment's quick mode)."""

    d_model: int = 64
    n_layer: int = 2
    pretrain_epochs: int = 20
    pretrain_lr: float = 3e-3
    ft_epochs: int = 100  # at most: fine-tuning stops once every update item is fitted
    ft_lr: float = 1e-3
    batch_size: int = 128
    ft_batch_size: int = 16
    replay_per_update: int = 8
    context_share: float = 0.4
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("d_model", "n_layer", "pretrain_epochs", "ft_epochs", "batch_size", "ft_batch_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        for name in ("pretrain_lr", "ft_lr"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if not 0 <= self.context_share < 1:
            raise ValueError(f"context_share must be in [0, 1), got {self.context_share!r}")


class Encoder:
    """Text (+ context statement) to padded id tensors for a world's vocabulary."""

    def __init__(self, world: ClinicalWorld, max_len: int = 64) -> None:
        self.tok = WordTokenizer(SPECIAL + [w for w in world.vocabulary() if w not in SPECIAL], unk="[unk]")
        self.max_len = max_len

    def __call__(self, items: Sequence[Example]) -> torch.Tensor:
        rows = []
        for it in items:
            words = (["[ctx]", *it.context.split()] if it.context else []) + ["[q]", *it.text.split()]
            rows.append(self.tok.encode(words[: self.max_len]))
        T = max(map(len, rows))
        out = torch.zeros(len(rows), T, dtype=torch.long)
        for i, r in enumerate(rows):
            out[i, : len(r)] = torch.tensor(r)
        return out


def _with_context(
    world: ClinicalWorld, ex: Example, knowledge: dict, rng: np.random.Generator
) -> Example | None:
    """Pre-training item with a context statement: relevant (true or counterfactual) or irrelevant."""
    keys = list(world.base)
    if rng.random() < 0.5:  # irrelevant statement: the answer stays the memorised one
        other = keys[int(rng.integers(len(keys)))]
        if other.pair & ex.comparison.pair:
            return None
        return Example(
            ex.text, ex.label, ex.family, ex.comparison, world.statement(other, knowledge[other]), ex.template
        )
    first = ex.comparison
    rel = str(rng.choice(RELATIONS))  # the statement about this comparison decides, even if counterfactual
    alt = dict(knowledge)
    key = first if first in alt else first.swapped()
    alt[key] = rel if key == first else flip(rel)
    again = world.render(ex.family if ex.family != "locality" else "original", first, alt, rng, test=False)
    if again is None:
        return None
    statement = world.statement(first, rel)
    return Example(ex.text, again.label, ex.family, first, statement, ex.template)


def pretraining_items(
    world: ClinicalWorld, rng: np.random.Generator, context_share: float = 0.4
) -> list[Example]:
    """Every base fact in every format (both orientations, all templates), plus context-slot items.

    Compositional chains and operational (formulary) items are built from base facts only, with the same
    selection the probes use (a "no difference" hop; a third regimen worse than both).
    """
    kb = dict(world.base)
    items: list[Example] = []
    for comp in world.base:
        for c in (comp, comp.swapped()):
            items.append(world.render("original", c, kb))
            items.append(world.render("lexical", c, kb, rng, test=False))
            items.append(world.render("lexical", c, kb, rng, test=True))
        items.extend(_chains(world, comp, kb, kb, rng, 2))
        items.extend(_formulary(world, comp, kb, kb, rng, 2))
    items = [it for it in items if it is not None]
    extra = []
    for it in items:
        if it.family not in ("compositional", "operational") and rng.random() < context_share:
            ex = _with_context(world, it, kb, rng)
            if ex is not None:
                extra.append(ex)
    return items + extra


def _chains(
    world: ClinicalWorld,
    key: Comparison,
    knowledge: dict,
    known: dict,
    rng: np.random.Generator,
    k: int,
    exclude: set | frozenset = frozenset(),
) -> list[Example]:
    """Up to ``k`` compositional items carrying ``key``'s relation over a known tie (third pair not in ``exclude``)."""
    chains = [(t, m) for t, m in world.chains_through(key, knowledge, known) if t.pair not in exclude]
    pick = rng.permutation(len(chains))[:k]
    out = [
        world.render("compositional", chains[int(i)][0], knowledge, middle=chains[int(i)][1]) for i in pick
    ]
    return [e for e in out if e is not None]


def _formulary(
    world: ClinicalWorld,
    key: Comparison,
    knowledge: dict,
    known: dict,
    rng: np.random.Generator,
    k: int,
) -> list[Example]:
    """Up to ``k`` operational items: ``key``'s two regimens and a third known worse (or better) than both."""
    thirds = world.formulary_thirds(key, known)
    pick = rng.permutation(len(thirds))[:k]
    out = []
    for i in pick:
        d, goal = thirds[int(i)]
        v = int(rng.integers(len(PERMUTATIONS))) + len(PERMUTATIONS) * GOALS.index(goal)
        out.append(world.render("operational", key, knowledge, middle=d, variant=v))
    return [e for e in out if e is not None]


def update_items(
    world: ClinicalWorld,
    strategy: str,
    rng: np.random.Generator,
    updates=None,
    replay: Sequence[Example] = (),
    replay_per_update: int = 8,
) -> list[Example]:
    """The fine-tuning stream of ``strategy`` for ``updates`` (default: the latest update of each comparison)."""
    if strategy not in FT_STRATEGIES:
        raise ValueError(f"strategy must be one of {FT_STRATEGIES}, got {strategy!r}")
    ups = world.latest_updates() if updates is None else list(updates)
    items: list[Example] = []
    for u in ups:
        kb = {u.comparison: u.answer}
        c = u.comparison
        items.append(world.render("original", c, kb))
        if strategy in ("ft_paraphrase", "ft_paraphrase_swap"):
            for _ in range(3):
                items.append(world.render("lexical", c, kb, rng, test=False))
        if strategy == "ft_paraphrase_swap":
            items.append(world.render("original", c.swapped(), kb))
            for _ in range(3):
                items.append(world.render("lexical", c.swapped(), kb, rng, test=False))
    items = [it for it in items if it is not None]
    if strategy == "ft_q1_replay" and replay:  # replayed base-fact items go last (see integrate's fit check)
        touched = {c.pair for c in world.updated_keys()}
        pool = [e for e in replay if e.comparison.pair not in touched and not _mentions(e, touched)]
        n = min(len(pool), replay_per_update * len(ups))
        items += [pool[int(j)] for j in rng.choice(len(pool), n, replace=False)]
    return items


def _mentions(e: Example, pairs: set[frozenset]) -> bool:
    """Whether ``e``'s text or context names both regimens of one of ``pairs`` (e.g. a chain through it)."""
    words = set(e.text.split()) | set(e.context.split())
    return any(p <= words for p in pairs)


def _fit(
    model: nn.Module,
    enc: Encoder,
    items: Sequence[Example],
    epochs: int,
    lr: float,
    batch: int,
    seed: int,
    until_fit: bool = False,
    fit_first: int | None = None,
) -> int:
    """AdamW on cross-entropy; ``until_fit``: stop after the first epoch that fits every item (of the first
    ``fit_first`` items: the updates, not the replayed ones). Returns the epochs run."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    g = np.random.default_rng(seed)
    ids_all = enc(items)
    y_all = torch.tensor([it.label for it in items])
    model.train()
    for epoch in range(epochs):
        if until_fit and epoch > 0:
            model.eval()
            with torch.no_grad():
                n = fit_first or len(items)
                fitted = bool((model(ids_all[:n]).argmax(-1) == y_all[:n]).all())
            model.train()
            if fitted:
                model.eval()
                return epoch
        order = g.permutation(len(items))
        for s in range(0, len(items), batch):
            idx = torch.as_tensor(order[s : s + batch])
            ids = ids_all[idx]
            ids = ids[:, : int((ids != 0).sum(1).max())]
            loss = F.cross_entropy(model(ids), y_all[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    model.eval()
    return epochs


def pretrain(
    world: ClinicalWorld, config: IntegrationConfig | None = None
) -> tuple[ProbeClassifier, Encoder, list[Example]]:
    """The base model ("pre-trained" on every base fact in every format); returns model, encoder, its items."""
    cfg = config or IntegrationConfig()
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    enc = Encoder(world)
    items = pretraining_items(world, rng, cfg.context_share)
    model = ProbeClassifier(enc.tok.vocab_size, cfg.d_model, cfg.n_layer, max_len=enc.max_len)
    _fit(model, enc, items, cfg.pretrain_epochs, cfg.pretrain_lr, cfg.batch_size, cfg.seed)
    return model, enc, items


def integrate(
    model: ProbeClassifier,
    enc: Encoder,
    world: ClinicalWorld,
    strategy: str,
    config: IntegrationConfig | None = None,
    replay: Sequence[Example] = (),
    order: str = "batch",
) -> ProbeClassifier:
    """A copy of ``model`` with the updates integrated by the fine-tuning ``strategy``."""
    cfg = config or IntegrationConfig()
    if strategy not in FT_STRATEGIES:
        raise ValueError(f"strategy must be one of {FT_STRATEGIES}, got {strategy!r}")
    if order not in ("batch", "sequential"):
        raise ValueError(f"order must be 'batch' or 'sequential', got {order!r}")
    rng = np.random.default_rng(cfg.seed + 1)
    m = copy.deepcopy(model)
    if order == "batch":
        items = update_items(world, strategy, rng, replay=replay, replay_per_update=cfg.replay_per_update)
        n_up = (
            len(update_items(world, "ft_q1", np.random.default_rng(0)))
            if strategy == "ft_q1_replay"
            else None
        )
        _fit(
            m,
            enc,
            items,
            cfg.ft_epochs,
            cfg.ft_lr,
            cfg.ft_batch_size,
            cfg.seed,
            until_fit=True,
            fit_first=n_up,
        )
        return m
    # sequential: chronological chunks of updates (about 10 chunks), each trained in turn
    ups = world.updates
    chunks = np.array_split(np.arange(len(ups)), min(10, len(ups)))
    for k, ch in enumerate(chunks):
        chunk = [ups[i] for i in ch]
        items = update_items(world, strategy, rng, chunk, replay, cfg.replay_per_update)
        n_up = len(chunk) if strategy == "ft_q1_replay" else None
        _fit(
            m,
            enc,
            items,
            cfg.ft_epochs,
            cfg.ft_lr,
            cfg.ft_batch_size,
            cfg.seed + k,
            until_fit=True,
            fit_first=n_up,
        )
    return m


def probe_set(world: ClinicalWorld, n_locality: int = 200, seed: int = 0) -> dict[str, list[Example]]:
    """Test probes per family for the latest state (lexical: held-out templates); plus ``conflicting``."""
    rng = np.random.default_rng(seed + 7)
    kb = world.state()
    out: dict[str, list[Example]] = {f: [] for f in FAMILIES}
    out["conflicting"] = []
    conflicting = {u.comparison for u in world.updates if u.conflicting_edit}
    touched: set[frozenset] = set()
    for c in world.updated_keys():
        touched.add(c.pair)
        out["original"].append(world.render("original", c, kb))
        for k in range(2):  # each held-out template once
            out["lexical"].append(world.render("lexical", c, kb, rng, test=True, variant=k))
        out["relational"].append(world.render("relational", c, kb))
        if c in conflicting:
            out["conflicting"].append(world.render("original", c, kb))
    # compositional and operational probes use the update together with base facts the updates never touch
    known = {k: r for k, r in world.base.items() if k.pair not in touched}
    for c in world.updated_keys():
        out["compositional"].extend(_chains(world, c, kb, known, rng, 8, exclude=touched))
        for ex in _formulary(world, c, kb, known, rng, 4):
            out["operational"].append(ex)
            goal = GOALS.index(ex.template.rsplit("-", 1)[-1])  # a second option order of the same decision
            perm = int(rng.integers(len(PERMUTATIONS))) + len(PERMUTATIONS) * goal
            again = world.render("operational", c, kb, middle=_third(ex, c), variant=perm)
            if again is not None and again.text != ex.text:
                out["operational"].append(again)
    untouched = [c for c in world.base if c.pair not in touched]
    pick = rng.choice(len(untouched), min(n_locality, len(untouched)), replace=False)
    out["locality"] = [world.render("locality", untouched[int(i)], kb) for i in pick]
    return {k: [e for e in v if e is not None] for k, v in out.items()}


def _third(ex: Example, key: Comparison) -> str:
    """The option of an operational item that is neither regimen of ``key``."""
    return next(o for o in ex.options if o not in key.pair)


class BM25Retriever:
    """Top-1 update statement for a probe by BM25 (rank-bm25), ties broken by the later date."""

    def __init__(self, world: ClinicalWorld) -> None:
        from rank_bm25 import BM25Okapi

        self.records = sorted(world.updates, key=lambda u: u.date)
        self.bm25 = BM25Okapi([u.ground_truth.split() for u in self.records])

    def __call__(self, query: str) -> str:
        scores = self.bm25.get_scores(query.split())
        best = max(range(len(scores)), key=lambda i: (round(float(scores[i]), 9), i))  # later wins a tie
        return self.records[best].ground_truth


@torch.no_grad()
def evaluate_families(
    model: ProbeClassifier,
    enc: Encoder,
    probes: dict[str, list[Example]],
    retriever: BM25Retriever | None = None,
) -> dict[str, float]:
    """Accuracy per probe family (with ``retriever``: the top-1 statement in the context slot)."""
    model.eval()
    out = {}
    for fam, items in probes.items():
        if not items:
            out[fam] = float("nan")
            continue
        if retriever is not None:
            items = [
                Example(e.text, e.label, e.family, e.comparison, retriever(e.text), e.template) for e in items
            ]
        pred = model(enc(items)).argmax(-1)
        out[fam] = float((pred == torch.tensor([e.label for e in items])).float().mean())
    return out


HELD_OUT_FAMILIES = ("lexical", "compositional", "operational")


def update_blind_accuracy(world: ClinicalWorld, examples: Sequence[Example]) -> float:
    """Accuracy of the update-blind rule (:meth:`ClinicalWorld.update_blind_label`) on ``examples``."""
    if not examples:
        return float("nan")
    return float(np.mean([world.update_blind_label(e) == e.label for e in examples]))


def leaked_probes(train: Sequence[Example], probes: dict[str, list[Example]]) -> int:
    """Test probes of the held-out families whose (text, context, label) appears verbatim in ``train``.

    Original and relational probes are the update's own question and its swap, which fine-tuning strategies
    train on by design; the other families must never be trained on with the updated answer.
    """
    seen = {(e.text, e.context, e.label) for e in train}
    return sum((e.text, e.context, e.label) in seen for fam in HELD_OUT_FAMILIES for e in probes.get(fam, []))


def comparisons(examples: Sequence[Example]) -> set[Comparison]:
    return {e.comparison for e in examples}
