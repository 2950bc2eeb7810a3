"""A synthetic clinical-update world with MedKIT's schema, and its probe families [reconstructed].

Everything here is invented (regimen, brand, condition and trial names; PMIDs): the released MedKIT data set
(HemOnc-derived, CC BY-NC-SA) is neither downloaded nor vendored; only its record schema is mirrored
(:class:`UpdateRecord`). A *comparison* is ``(regimen, comparator, condition, context, endpoint)`` with a
relation in ``RELATIONS``. Regimens of one (condition, context, endpoint) cluster carry a latent efficacy, so
base facts are consistent and chains compose.

Relation algebra (explicit, as the digest asks):

- swap: ``flip(superior) = inferior``, ``flip(inferior) = superior``, ``flip(no difference) = no difference``;
- compose (A vs B, then B vs C, gives A vs C): ``superior o superior = superior``, ``inferior o inferior =
  inferior``; every other pair (mixed directions, anything with "no difference") is undefined and excluded.

Probe families for an updated comparison (A vs B), all 3-way classification:

- ``original``: the update's own question form (closed Q1);
- ``lexical``: held-out paraphrase templates with synonyms (brand names, endpoint acronyms, condition
  abbreviations); training streams only ever use the *training* templates;
- ``relational``: B vs A (closed question "m"), answer flipped;
- ``compositional``: A vs C through B, with B vs C a base fact and the composition defined;
- ``operational``: a vignette "patient with <condition> (<context>) seeking the best <endpoint>: X or Y?" with
  the answer "first", "second" or "no preference";
- ``locality``: unrelated base facts (closed Q1), whose answers must not change.

Chronology: updates carry dates; several may touch one comparison; the latest wins (:meth:`ClinicalWorld.state`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "FAMILIES",
    "RELATIONS",
    "ClinicalWorld",
    "Comparison",
    "Example",
    "UpdateRecord",
    "compose",
    "flip",
]

RELATIONS = ("superior", "inferior", "no difference")
FAMILIES = ("original", "lexical", "relational", "compositional", "operational", "locality")
OPERATIONAL_ANSWERS = ("first", "second", "no preference")
CONTEXTS = ("induction", "consolidation", "maintenance", "salvage", "adjuvant", "first-line")
ENDPOINTS = {  # endpoint -> (acronym, endpoint type)
    "overall survival": ("OS", "survival"),
    "progression-free survival": ("PFS", "survival"),
    "event-free survival": ("EFS", "survival"),
    "overall response rate": ("ORR", "response"),
    "complete remission": ("CR", "response"),
    "grade 3 toxicity": ("G3T", "toxicity"),
    "quality of life": ("QoL", "patient-reported"),
}
_SYL = ["zor", "va", "ti", "lex", "mo", "ri", "pa", "dex", "cu", "ne", "bra", "fi", "lo", "tra", "qui", "sen"]
_DRUG_SUFFIX = ["nib", "mab", "stat", "platin", "rubicin", "zumab", "ciclib", "parib"]
_COND_SUFFIX = ["oma", "itis", "emia", "osis", "blastoma"]
Q1 = "does {a} improve {e} versus {b} in {c} during {x} therapy ?"
LEX_TRAIN = [
    "compared with {b} , is {a} better for {e} in {c} ( {x} ) ?",
    "in {x} treatment of {c} , how does {a} fare against {b} on {e} ?",
    "{a} or {b} : which wins on {e} for {c} patients in {x} ?",
]
LEX_TEST = [
    "for {c} in the {x} setting , rate {a} relative to {b} regarding {e} .",
    "trial question : {a} vs {b} , endpoint {e} , population {c} , phase {x} ?",
]
CHAIN = "via {m} , how does {a} compare with {b} on {e} in {c} during {x} ?"
OPER = "patient with {c} in {x} therapy seeks the best {e} : {a} or {b} ?"
STATEMENT = "{a} is {r} to {b} for {c} ( {x} ) endpoint {e}"


def flip(relation: str) -> str:
    """The relation of the swapped comparison (B vs A)."""
    if relation not in RELATIONS:
        raise ValueError(f"relation must be one of {RELATIONS}, got {relation!r}")
    return {"superior": "inferior", "inferior": "superior"}.get(relation, relation)


def compose(ab: str, bc: str) -> str | None:
    """A vs C from A vs B and B vs C: defined for two equal strict relations only (else None)."""
    for r in (ab, bc):
        if r not in RELATIONS:
            raise ValueError(f"relation must be one of {RELATIONS}, got {r!r}")
    return ab if ab == bc and ab != "no difference" else None


@dataclass(frozen=True)
class Comparison:
    """The key of a fact: regimen vs comparator for a condition, treatment context and endpoint."""

    regimen: str
    comparator: str
    condition: str
    context: str
    endpoint: str

    @property
    def cluster(self) -> tuple[str, str, str]:
        return (self.condition, self.context, self.endpoint)

    @property
    def pair(self) -> frozenset[str]:
        return frozenset((self.regimen, self.comparator))

    def swapped(self) -> Comparison:
        return Comparison(self.comparator, self.regimen, self.condition, self.context, self.endpoint)


@dataclass(frozen=True)
class UpdateRecord:
    """One dated clinical update, mirroring the MedKIT table's fields (values invented)."""

    date: str
    year: int
    evidence: str
    pmids: tuple[int, ...]
    comparison: Comparison
    endpoint_type: str
    answer: str
    ground_truth: str
    closed_questions: tuple[str, str, str]
    closed_question_m: str
    closed_answer_m: str
    open_question: str
    reference_generation: str
    locality_question: str
    locality_answer: str
    conflicting_edit: bool


@dataclass(frozen=True)
class Example:
    """A probe or training item: question text, optional context statement, 3-way label, provenance."""

    text: str
    label: int
    family: str
    comparison: Comparison
    context: str = ""
    template: str = ""


@dataclass
class ClinicalWorld:
    """Base facts, chronological updates and the probe generators (see the module docstring).

    Build with :meth:`generate`. ``base`` maps comparisons to relations (one orientation per pair);
    ``updates`` is sorted by date; ``synonyms`` maps a canonical name to its alternatives.
    """

    base: dict[Comparison, str]
    updates: list[UpdateRecord]
    synonyms: dict[str, list[str]]
    seed: int = 0
    _rng: np.random.Generator = field(default=None, repr=False)  # type: ignore[assignment]

    # --- generation ------------------------------------------------------------------------------------------
    @classmethod
    def generate(
        cls,
        n_base: int = 400,
        n_updates: int = 120,
        conflict_share: float = 0.3,
        reupdate_share: float = 0.1,
        n_conditions: int = 12,
        drugs_per_cluster: int = 6,
        seed: int = 0,
    ) -> ClinicalWorld:
        """A world with about ``n_base`` base facts and ``n_updates`` dated updates.

        ``conflict_share`` of the updates overturn a base fact (``conflicting_edit``); the others add new
        comparisons; ``reupdate_share`` of them are later revised again (the latest wins).
        """
        for name, v, lo in (
            ("n_base", n_base, 10),
            ("n_updates", n_updates, 1),
            ("n_conditions", n_conditions, 1),
        ):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
        if (
            isinstance(drugs_per_cluster, bool)
            or not isinstance(drugs_per_cluster, int)
            or drugs_per_cluster < 4
        ):
            raise ValueError(f"drugs_per_cluster must be an integer >= 4, got {drugs_per_cluster!r}")
        for name, v in (("conflict_share", conflict_share), ("reupdate_share", reupdate_share)):
            if not (isinstance(v, (int, float)) and 0 <= v <= 1):
                raise ValueError(f"{name} must be in [0, 1], got {v!r}")
        rng = np.random.default_rng(seed)
        names: set[str] = set()

        def word(suffixes: Sequence[str], n_syl: int) -> str:
            while True:
                w = "".join(rng.choice(_SYL, n_syl)) + str(rng.choice(suffixes))
                if w not in names:
                    names.add(w)
                    return w

        synonyms: dict[str, list[str]] = {}
        conditions = []
        for _ in range(n_conditions):
            c = word(_COND_SUFFIX, 2)
            abbr = c[:3].upper() + "D"
            while abbr in names:
                abbr = abbr[:-1] + str(rng.choice(_SYL)).upper() + "D"
            names.add(abbr)
            synonyms[c] = [abbr]
            conditions.append(c)
        for e, (acr, _) in ENDPOINTS.items():
            synonyms[e] = [acr]
        clusters = [(c, x, e) for c in conditions for x in CONTEXTS for e in ENDPOINTS]
        order = rng.permutation(len(clusters))
        pairs_per_cluster = drugs_per_cluster * (drugs_per_cluster - 1) // 2
        n_clusters = min(len(clusters), int(np.ceil((n_base + n_updates) / (0.8 * pairs_per_cluster))))
        base: dict[Comparison, str] = {}
        candidates_new: list[tuple[Comparison, str]] = []
        for k in order[:n_clusters]:
            cond, ctx, end = clusters[k]
            drugs = []
            for _ in range(drugs_per_cluster):
                d = word(_DRUG_SUFFIX, 2)
                brand = d[:4].capitalize() + "ex"
                while brand in names:  # brand names are unique too
                    brand = brand[:-2] + str(rng.choice(_SYL)) + "ex"
                names.add(brand)
                synonyms[d] = [brand]
                drugs.append(d)
            # a latent efficacy per drug: relations follow it, so base facts are consistent
            eff = rng.permutation(drugs_per_cluster).astype(float)
            tie = rng.random(drugs_per_cluster) < 0.25
            for i, j in itertools.combinations(range(drugs_per_cluster), 2):
                a, b = (i, j) if rng.random() < 0.5 else (j, i)
                if tie[i] and tie[j]:
                    rel = "no difference"
                else:
                    rel = "superior" if eff[a] > eff[b] else "inferior"
                comp = Comparison(drugs[a], drugs[b], cond, ctx, end)
                candidates_new.append((comp, rel))
        rng.shuffle(candidates_new)  # type: ignore[arg-type]
        n_new = int(round((1 - conflict_share) * n_updates))
        # a new trial's result is not predictable from the base facts: its relation is drawn uniformly
        new_facts = [(c, str(rng.choice(RELATIONS))) for c, _ in candidates_new[:n_new]]
        for comp, rel in candidates_new[n_new : n_new + n_base]:
            base[comp] = rel
        base_keys = list(base)
        conflicted = [base_keys[i] for i in rng.choice(len(base_keys), n_updates - n_new, replace=False)]
        events: list[tuple[Comparison, str, bool]] = [(c, r, False) for c, r in new_facts]
        for c in conflicted:
            old = base[c]
            new = str(rng.choice([r for r in RELATIONS if r != old]))
            events.append((c, new, True))
        order_ev = rng.permutation(len(events))
        events = [events[i] for i in order_ev]
        n_re = int(round(reupdate_share * len(events)))
        revised = []
        for c, r, _ in events[:n_re]:  # a later trial revises an earlier update (never back to the base fact)
            banned = {r, base.get(c)}
            revised.append((c, str(rng.choice([x for x in RELATIONS if x not in banned])), True))
        years = np.sort(rng.integers(1990, 2024, len(events)))
        re_years = rng.integers(2024, 2027, len(revised))
        world = cls(base, [], synonyms, seed, rng)
        recs = [world._record(c, r, int(y), conf) for (c, r, conf), y in zip(events, years)]
        recs += [world._record(c, r, int(y), conf) for (c, r, conf), y in zip(revised, re_years)]
        recs.sort(key=lambda u: u.date)
        world.updates = recs
        return world

    def _record(self, comp: Comparison, rel: str, year: int, conflicting: bool) -> UpdateRecord:
        rng = self._rng
        date = f"{year}-{int(rng.integers(1, 13)):02d}-{int(rng.integers(1, 29)):02d}"
        a, b, c, x, e = comp.regimen, comp.comparator, comp.condition, comp.context, comp.endpoint
        loc = self.base_facts()[int(rng.integers(len(self.base)))]
        return UpdateRecord(
            date=date,
            year=year,
            evidence=f"A randomised trial of {a} versus {b} in {c} ({x} therapy)",
            pmids=tuple(int(p) for p in rng.integers(10_000_000, 40_000_000, 2)),
            comparison=comp,
            endpoint_type=ENDPOINTS[e][1],
            answer=rel,
            ground_truth=STATEMENT.format(a=a, r=rel, b=b, c=c, x=x, e=e),
            closed_questions=(
                Q1.format(a=a, b=b, c=c, x=x, e=e),
                LEX_TEST[0].format(a=self.synonyms[a][0], b=b, c=c, x=x, e=ENDPOINTS[e][0]),
                LEX_TEST[1].format(a=a, b=self.synonyms[b][0], c=self.synonyms[c][0], x=x, e=e),
            ),
            closed_question_m=Q1.format(a=b, b=a, c=c, x=x, e=e),
            closed_answer_m=flip(rel),
            open_question=OPER.format(a=a, b=b, c=c, x=x, e=e),
            reference_generation=(
                f"Prefer {a}."
                if rel == "superior"
                else f"Prefer {b}."
                if rel == "inferior"
                else "Either is fine."
            ),
            locality_question=Q1.format(
                a=loc.regimen, b=loc.comparator, c=loc.condition, x=loc.context, e=loc.endpoint
            ),
            locality_answer=self.base[loc],
            conflicting_edit=conflicting,
        )

    # --- knowledge -----------------------------------------------------------------------------------------
    def base_facts(self) -> list[Comparison]:
        return list(self.base)

    def state(self, upto: str | None = None) -> dict[Comparison, str]:
        """The relation of every comparison after the updates dated ``<= upto`` (all: None); latest wins."""
        out = dict(self.base)
        for u in self.updates:  # sorted by date
            if upto is not None and u.date > upto:
                break
            key = u.comparison
            if key not in out and key.swapped() in out:
                key, rel = key.swapped(), flip(u.answer)
            else:
                rel = u.answer
            out[key] = rel
        return out

    def relation(self, comp: Comparison, knowledge: dict[Comparison, str]) -> str | None:
        """The relation of ``comp`` in ``knowledge`` in either orientation (None if unknown)."""
        if comp in knowledge:
            return knowledge[comp]
        if comp.swapped() in knowledge:
            return flip(knowledge[comp.swapped()])
        return None

    def updated_keys(self) -> list[Comparison]:
        """Comparisons touched by an update, in first-touch order, once each (latest state applies)."""
        seen: dict[Comparison, None] = {}
        for u in self.updates:
            seen.setdefault(u.comparison, None)
        return list(seen)

    def latest_updates(self) -> list[UpdateRecord]:
        """The latest update of each updated comparison."""
        last: dict[Comparison, UpdateRecord] = {}
        for u in self.updates:
            last[u.comparison] = u
        return [last[k] for k in self.updated_keys()]

    # --- rendering ------------------------------------------------------------------------------------------
    def _name(self, n: str, rng: np.random.Generator | None, p: float) -> str:
        if rng is not None and n in self.synonyms and rng.random() < p:
            return self.synonyms[n][0]
        return n

    def render(
        self,
        family: str,
        comp: Comparison,
        knowledge: dict[Comparison, str],
        rng: np.random.Generator | None = None,
        test: bool = False,
        middle: str | None = None,
        context: str = "",
        variant: int | None = None,
    ) -> Example | None:
        """One example of ``family`` about ``comp`` labelled from ``knowledge`` (None when undefined).

        ``test``: held-out templates and synonyms for the lexical family (training streams use ``test=False``).
        ``middle``: the intermediate regimen of a compositional item. ``context``: a statement in the context slot.
        ``variant``: the paraphrase template index (lexical; default: drawn from ``rng``).
        """
        a, b, c, x, e = comp.regimen, comp.comparator, comp.condition, comp.context, comp.endpoint
        rel = self.relation(comp, knowledge)
        if family in ("original", "locality"):
            text, t = Q1.format(a=a, b=b, c=c, x=x, e=e), "Q1"
        elif family == "lexical":
            pool = LEX_TEST if test else LEX_TRAIN
            k = (
                variant % len(pool)
                if variant is not None
                else int(rng.integers(len(pool)))
                if rng is not None
                else 0
            )
            p = 1.0 if test else 0.5
            r = rng if rng is not None else np.random.default_rng(0)
            text = pool[k].format(
                a=self._name(a, r, p),
                b=self._name(b, r, p),
                c=self._name(c, r, p),
                x=x,
                e=self._name(e, r, p),
            )
            t = f"{'test' if test else 'train'}-{k}"
        elif family == "relational":
            text, t = Q1.format(a=b, b=a, c=c, x=x, e=e), "Q1-swapped"
            rel = None if rel is None else flip(rel)
        elif family == "compositional":
            if middle is None:
                raise ValueError("a compositional example needs the intermediate regimen (middle)")
            ab = self.relation(Comparison(a, middle, c, x, e), knowledge)
            bc = self.relation(Comparison(middle, b, c, x, e), knowledge)
            rel = None if ab is None or bc is None else compose(ab, bc)
            text, t = CHAIN.format(m=middle, a=a, b=b, c=c, x=x, e=e), "chain"
        elif family == "operational":
            text, t = OPER.format(a=a, b=b, c=c, x=x, e=e), "vignette"
        else:
            raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
        if rel is None:
            return None
        label = RELATIONS.index(
            rel
        )  # operational: superior -> first, inferior -> second, none -> no preference
        return Example(text, label, family, comp, context, t)

    def statement(self, comp: Comparison, rel: str) -> str:
        a, b, c, x, e = comp.regimen, comp.comparator, comp.condition, comp.context, comp.endpoint
        return STATEMENT.format(a=a, r=rel, b=b, c=c, x=x, e=e)

    def middles(self, comp: Comparison, knowledge: dict[Comparison, str]) -> list[str]:
        """Regimens M with ``comp.regimen`` vs M in ``comp`` itself and M vs ``comp.comparator`` known."""
        out = []
        for other in knowledge:
            if other.cluster != comp.cluster:
                continue
            for m in (other.regimen, other.comparator):
                if m in comp.pair or m in out:
                    continue
                if self.relation(Comparison(m, comp.comparator, *comp.cluster), knowledge) is not None:
                    out.append(m)
        return out

    def chains_through(
        self, key: Comparison, knowledge: dict[Comparison, str]
    ) -> list[tuple[Comparison, str]]:
        """Compositional items that use ``key`` as the first hop: (A vs C, via B) with A-B = key, B-C known."""
        a, b = key.regimen, key.comparator
        out = []
        for other in knowledge:
            if other.cluster != key.cluster or other.pair == key.pair or b not in other.pair:
                continue
            c = other.comparator if other.regimen == b else other.regimen
            if c == a:
                continue
            out.append((Comparison(a, c, *key.cluster), b))
        return out

    def vocabulary(self) -> list[str]:
        words: set[str] = set()
        texts: Iterable[str] = [Q1, CHAIN, OPER, STATEMENT, *LEX_TRAIN, *LEX_TEST]
        for t in texts:
            words.update(w for w in t.split() if not w.startswith("{"))
        for k, v in self.synonyms.items():
            words.update(k.split())
            for s in v:
                words.update(s.split())
        for r in RELATIONS:
            words.update(r.split())
        words.update(CONTEXTS)
        return sorted(words)
