"""A synthetic clinical-update world with MedKIT's schema, and its probe families [reconstructed].

Everything here is invented (regimen, brand, condition and trial names; PMIDs): the released MedKIT data set
(HemOnc-derived, CC BY-NC-SA) is neither downloaded nor vendored; only its record schema is mirrored
(:class:`UpdateRecord`). A *comparison* is ``(regimen, comparator, condition, context, endpoint)`` with a
relation in ``RELATIONS``. Regimens of one (condition, context, endpoint) cluster carry a latent efficacy (tied regimens share
one value, so "no difference" is an equivalence), so base facts are consistent and chains compose.

Relation algebra (explicit, as the digest asks):

- swap: ``flip(superior) = inferior``, ``flip(inferior) = superior``, ``flip(no difference) = no difference``;
- compose (A vs B, then B vs C, gives A vs C) over an order with ties: ``no difference`` is equality, so
  ``r o no difference = no difference o r = r``; ``superior o superior = superior``, ``inferior o inferior =
  inferior``; mixed strict directions are undefined (excluded).

Probe families for an updated comparison (A vs B), all 3-way classification:

- ``original``: the update's own question form (closed Q1);
- ``lexical``: held-out paraphrase templates with synonyms (brand names, endpoint acronyms, condition
  abbreviations); training streams only ever use the *training* templates;
- ``relational``: B vs A (closed question "m"), answer flipped;
- ``compositional``: A vs C through B where the *update* is one hop and the other hop is a known (base,
  un-updated) "no difference" fact (B vs C, or C vs A): the answer is the updated relation carried over to a
  regimen the update never named, so it cannot be read off the base facts (:meth:`ClinicalWorld.update_blind_label`
  is the update-blind rule; the experiment measures it and gates the claim on it being near chance);
- ``operational``: a formulary decision over three options, the two regimens of the update and a third, D:
  "... seeks the best <endpoint>: X , Y or Z ?" with D known (base facts) to be worse than both, or "which
  of X , Y or Z gives the worst <endpoint> ?" with D known to be better than both; the answer is the position
  of the chosen option ("first", "second", "third"): an argmax / argmin that uses the update instead of
  restating it (updates to "no difference" have no single best and give no item);
- ``locality``: unrelated base facts (closed Q1), whose answers must not change.

Chronology: updates carry dates; several may touch one comparison; the latest wins (:meth:`ClinicalWorld.state`).
"""

from __future__ import annotations

import datetime
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

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
OPERATIONAL_ANSWERS = ("first", "second", "third")
ND = "no difference"
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
OPER = (
    "patient with {c} in {x} therapy seeks the best {e} : {o1} , {o2} or {o3} ?",
    "for {c} in {x} therapy , which of {o1} , {o2} or {o3} gives the worst {e} ?",
)
GOALS = ("best", "worst")
OPEN_QUESTION = (
    "patient with {c} in {x} therapy seeks the best {e} : {a} or {b} ?"  # the record's open question
)
PERMUTATIONS = tuple(itertools.permutations(range(3)))
STATEMENT = "{a} is {r} to {b} for {c} ( {x} ) endpoint {e}"


def flip(relation: str) -> str:
    """The relation of the swapped comparison (B vs A)."""
    if relation not in RELATIONS:
        raise ValueError(f"relation must be one of {RELATIONS}, got {relation!r}")
    return {"superior": "inferior", "inferior": "superior"}.get(relation, relation)


def compose(ab: str, bc: str) -> str | None:
    """A vs C from A vs B and B vs C over an order with ties ("no difference" is equality); None if undefined."""
    for r in (ab, bc):
        if r not in RELATIONS:
            raise ValueError(f"relation must be one of {RELATIONS}, got {r!r}")
    if bc == ND:
        return ab
    if ab == ND:
        return bc
    return ab if ab == bc else None


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
    options: tuple[str, ...] = ()  # compositional: (middle,); operational: the three options in order


@dataclass
class ClinicalWorld:
    """Base facts, chronological updates and the probe generators (see the module docstring).

    Build with :meth:`generate` (an invented world) or :meth:`from_records` (your own facts). ``base`` maps comparisons to relations (one orientation per pair);
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
        tie_share: float = 0.5,
    ) -> ClinicalWorld:
        """A world with exactly ``n_base`` base facts and ``n_updates`` dated updates (plus revisions).

        ``conflict_share`` of the updates overturn a base fact (``conflicting_edit``); the others add new
        comparisons; ``reupdate_share`` of them are later revised again (the latest wins). ``tie_share``: the
        chance that a regimen is in its cluster's tied class (tied regimens: "no difference", one efficacy).
        Raises ValueError when ``n_conditions`` x contexts x endpoints clusters of ``drugs_per_cluster``
        regimens hold fewer comparisons than ``n_base`` plus the new-fact updates (nothing is truncated).
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
        for name, v in (
            ("conflict_share", conflict_share),
            ("reupdate_share", reupdate_share),
            ("tie_share", tie_share),
        ):
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
        n_clusters = min(len(clusters), int(np.ceil((n_base + n_updates) / (0.95 * pairs_per_cluster))))
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
            # a latent efficacy per drug: relations follow it, so base facts are consistent; the tied class
            # shares one efficacy value (distinct from every untied drug's), so "no difference" is an equivalence
            eff = rng.permutation(drugs_per_cluster).astype(float)
            tie = rng.random(drugs_per_cluster) < tie_share
            if tie.any():
                eff[tie] = eff[np.flatnonzero(tie)[0]]
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
        if n_new + n_base > len(candidates_new):
            raise ValueError(
                f"n_base ({n_base}) plus the {n_new} new-fact updates exceed the {len(candidates_new)} comparisons "
                f"that n_conditions={n_conditions} x {len(CONTEXTS)} contexts x {len(ENDPOINTS)} endpoints x "
                f"drugs_per_cluster={drugs_per_cluster} allow: lower n_base or raise n_conditions / drugs_per_cluster"
            )
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

    @classmethod
    def from_records(
        cls,
        base: Mapping[Comparison | tuple[str, str, str, str, str], str],
        updates: Iterable[tuple[Comparison | tuple[str, str, str, str, str], str, str]],
        synonyms: Mapping[str, Sequence[str]] | None = None,
        seed: int = 0,
    ) -> ClinicalWorld:
        """A world from your own facts: ``base`` maps a comparison ``(regimen, comparator, condition, context,
        endpoint)`` to its relation before the updates; ``updates`` holds ``(comparison, relation, date)`` with
        ISO dates (``"2021-06-30"``), in any order (the latest wins).

        ``context`` must be one of :data:`CONTEXTS` and ``endpoint`` one of the keys of :data:`ENDPOINTS` (the
        probe templates and endpoint types are written for them). ``synonyms`` maps a name to its alternatives
        (brand names, abbreviations) for the lexical probes; a name without one keeps its own name there, and
        the endpoints' acronyms are added. An update is a conflicting edit when the comparison (in either
        orientation) was already known, from ``base`` or an earlier update, with another relation. ``seed``
        draws the records' invented fields (PMIDs, the locality question).
        """

        def comparison(key: Any, what: str) -> Comparison:
            comp = key if isinstance(key, Comparison) else None
            if comp is None:
                if not (isinstance(key, tuple) and len(key) == 5 and all(isinstance(k, str) for k in key)):
                    raise ValueError(
                        f"{what} must be a Comparison or a 5-tuple of strings (regimen, comparator, condition, "
                        f"context, endpoint), got {key!r}"
                    )
                comp = Comparison(*key)
            if comp.context not in CONTEXTS:
                raise ValueError(f"{what}: context must be one of {CONTEXTS}, got {comp.context!r}")
            if comp.endpoint not in ENDPOINTS:
                raise ValueError(f"{what}: endpoint must be one of {tuple(ENDPOINTS)}, got {comp.endpoint!r}")
            if comp.regimen == comp.comparator:
                raise ValueError(f"{what}: regimen and comparator must differ, got {comp.regimen!r} twice")
            return comp

        def relation(rel: Any, what: str) -> str:
            if rel not in RELATIONS:
                raise ValueError(f"{what}: relation must be one of {RELATIONS}, got {rel!r}")
            return str(rel)

        known: dict[Comparison, str] = {}
        for key, rel in dict(base).items():
            comp = comparison(key, "base")
            if comp in known or comp.swapped() in known:
                raise ValueError(f"base: the comparison {comp} is given twice (in some orientation)")
            known[comp] = relation(rel, "base")
        if len(known) < 2:
            raise ValueError(f"base must hold at least two facts, got {len(known)}")
        events = []
        for item in updates:
            if not (isinstance(item, tuple) and len(item) == 3):
                raise ValueError(f"updates must hold (comparison, relation, date) triples, got {item!r}")
            key, rel, date = item
            try:
                year = datetime.date.fromisoformat(str(date)).year
            except ValueError:
                raise ValueError(
                    f"updates: date must be an ISO date like '2021-06-30', got {date!r}"
                ) from None
            events.append((str(date), comparison(key, "updates"), relation(rel, "updates"), year))
        if not events:
            raise ValueError("updates must hold at least one update")
        syn: dict[str, list[str]] = {e: [acr] for e, (acr, _) in ENDPOINTS.items()}
        for name, alts in (synonyms or {}).items():
            alts = [alts] if isinstance(alts, str) else list(alts)
            if not alts or not all(isinstance(a, str) and a for a in alts):
                raise ValueError(f"synonyms[{name!r}] must be a non-empty list of names, got {alts!r}")
            syn[name] = alts
        for comp in list(known) + [c for _, c, _, _ in events]:
            for n in (comp.regimen, comp.comparator, comp.condition):
                syn.setdefault(n, [n])
        world = cls(dict(known), [], syn, seed, np.random.default_rng(seed))
        state = dict(known)
        records = []
        for date, comp, rel, year in sorted(events, key=lambda e: e[0]):
            before = world.relation(comp, state)
            records.append(world._record(comp, rel, year, before is not None and before != rel, date=date))
            key = comp.swapped() if comp not in state and comp.swapped() in state else comp
            state[key] = rel if key == comp else flip(rel)
        world.updates = records
        return world

    def _record(
        self, comp: Comparison, rel: str, year: int, conflicting: bool, date: str | None = None
    ) -> UpdateRecord:
        rng = self._rng
        if date is None:
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
            open_question=OPEN_QUESTION.format(a=a, b=b, c=c, x=x, e=e),
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
            if rel is None:
                return None
            return Example(text, RELATIONS.index(rel), family, comp, context, t, (middle,))
        elif family == "operational":
            if middle is None:
                raise ValueError("an operational example needs the third option (middle)")
            v = variant or 0
            perm, goal = PERMUTATIONS[v % len(PERMUTATIONS)], GOALS[(v // len(PERMUTATIONS)) % len(GOALS)]
            opts = tuple((a, b, middle)[k] for k in perm)
            best = self.best_option(opts, comp.cluster, knowledge, goal)
            if best is None:
                return None
            text = OPER[GOALS.index(goal)].format(o1=opts[0], o2=opts[1], o3=opts[2], c=c, x=x, e=e)
            return Example(text, best, family, comp, context, f"formulary-{goal}", opts)
        else:
            raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
        if rel is None:
            return None
        return Example(text, RELATIONS.index(rel), family, comp, context, t)

    def best_option(
        self,
        options: Sequence[str],
        cluster: tuple[str, str, str],
        knowledge: dict[Comparison, str],
        goal: str = "best",
    ) -> int | None:
        """Index of the option superior (goal "best") or inferior ("worst") to every other one in ``knowledge``
        (None if no such option)."""
        want = "superior" if goal == "best" else "inferior"
        for i, o in enumerate(options):
            if all(
                self.relation(Comparison(o, p, *cluster), knowledge) == want
                for j, p in enumerate(options)
                if j != i
            ):
                return i
        return None

    def update_blind_label(self, ex: Example) -> int:
        """The update-blind rule: the answer the *base facts alone* give for a compositional or operational
        probe (the un-updated knowledge, composed; where the base facts do not decide, the direct base fact
        about the asked pair, else the first option not known to lose / the most common base relation)."""
        kb = self.base
        comp = ex.comparison
        if ex.family == "compositional":
            (m,) = ex.options
            ab = self.relation(Comparison(comp.regimen, m, *comp.cluster), kb)
            bc = self.relation(Comparison(m, comp.comparator, *comp.cluster), kb)
            rel = compose(ab, bc) if ab is not None and bc is not None else None
            rel = rel or self.relation(comp, kb)
            if rel is None:
                values = list(kb.values())
                rel = max(RELATIONS, key=values.count)
            return RELATIONS.index(rel)
        if ex.family == "operational":
            goal = ex.template.rsplit("-", 1)[-1]
            best = self.best_option(ex.options, comp.cluster, kb, goal)
            if best is not None:
                return best
            loses = "inferior" if goal == "best" else "superior"
            for i, o in enumerate(ex.options):
                if not any(
                    self.relation(Comparison(o, p, *comp.cluster), kb) == loses for p in ex.options if p != o
                ):
                    return i
            return 0
        raise ValueError(
            f"update_blind_label is defined for compositional and operational probes, not {ex.family!r}"
        )

    def statement(self, comp: Comparison, rel: str) -> str:
        a, b, c, x, e = comp.regimen, comp.comparator, comp.condition, comp.context, comp.endpoint
        return STATEMENT.format(a=a, r=rel, b=b, c=c, x=x, e=e)

    def chains_through(
        self, key: Comparison, knowledge: dict[Comparison, str], known: dict[Comparison, str] | None = None
    ) -> list[tuple[Comparison, str]]:
        """Compositional items whose answer is ``key``'s relation carried over a "no difference" hop.

        ``(A vs C, via B)`` with B vs C "no difference", and ``(C vs B, via A)`` with C vs A "no difference"
        (A-B = ``key``); the tie must be a fact of ``known`` (default ``knowledge``) and C a third regimen.
        """
        known = knowledge if known is None else known
        a, b = key.regimen, key.comparator
        out = []
        for other in known:
            if other.cluster != key.cluster or other.pair == key.pair or known[other] != ND:
                continue
            for hinge, end_ in ((b, "right"), (a, "left")):
                if hinge not in other.pair:
                    continue
                c = other.comparator if other.regimen == hinge else other.regimen
                if c in key.pair:
                    continue
                target = Comparison(a, c, *key.cluster) if end_ == "right" else Comparison(c, b, *key.cluster)
                out.append((target, hinge))
        return out

    def formulary_thirds(self, key: Comparison, known: dict[Comparison, str]) -> list[tuple[str, str]]:
        """``(D, goal)`` for regimens D of ``key``'s cluster that facts of ``known`` place below both of ``key``'s
        regimens (goal "best": the answer is the better of the two) or above both (goal "worst")."""
        out = []
        drugs = {d for k in known if k.cluster == key.cluster for d in (k.regimen, k.comparator)}
        for d in sorted(drugs - set(key.pair)):
            rels = {
                self.relation(Comparison(d, r, *key.cluster), known) for r in (key.regimen, key.comparator)
            }
            if rels == {"inferior"}:
                out.append((d, "best"))
            elif rels == {"superior"}:
                out.append((d, "worst"))
        return out

    def vocabulary(self) -> list[str]:
        words: set[str] = set()
        texts: Iterable[str] = [Q1, CHAIN, *OPER, OPEN_QUESTION, STATEMENT, *LEX_TRAIN, *LEX_TEST]
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
