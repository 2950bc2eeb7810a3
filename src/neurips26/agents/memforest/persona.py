"""A seeded synthetic long-horizon "persona memory" stream with questions whose gold answer is a fact id.

Digest protocol [reconstructed; the paper's benchmarks (LoCoMo, LongMemEval, PersonaMem) are not usable offline]:
each event is one person's episode of one kind (a trip, a dinner, ...) identified by a key value (the city, the
restaurant); it carries 2-4 facts (attribute = value) written as 3-8 single-sentence memory entries inside a
short time window, some entries restating a fact already said, some adding a new one. The same person has
several episodes of the same kind in distant windows, so purely semantic clustering mixes events. About 10 % of
facts are later updated by an entry in a later window (the question then asks for the new value). One question
per live fact; a "temporal chain" fact is mentioned only in an entry that names neither the person nor the key
and sits right after an entry that does (so only its temporal neighbourhood ties it to the question).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["PersonaStream", "Question", "persona_stream"]

PEOPLE = [
    "Maya",
    "Omar",
    "Lena",
    "Ravi",
    "Sofia",
    "Jonas",
    "Aiko",
    "Diego",
    "Priya",
    "Tomas",
    "Nadia",
    "Felix",
    "Ines",
    "Kofi",
    "Mei",
    "Lucas",
    "Hana",
    "Arjun",
    "Elena",
    "Samir",
    "Greta",
    "Yusuf",
    "Clara",
    "Mateo",
]

# kind -> (key attribute, key values, {attribute: (values, statement templates, question, chain template)})
# Templates use {p} person, {k} key value, {v} value.
KINDS: dict[str, tuple[str, list[str], dict[str, tuple[list[str], list[str], str, str]]]] = {
    "trip": (
        "destination",
        [
            "Lisbon",
            "Oslo",
            "Kyoto",
            "Lima",
            "Cairo",
            "Dublin",
            "Hanoi",
            "Quito",
            "Tallinn",
            "Porto",
            "Seville",
            "Krakow",
            "Nairobi",
            "Bergen",
            "Malaga",
            "Valencia",
        ],
        {
            "hotel": (
                [
                    "Seaview Inn",
                    "Harbor Lodge",
                    "Cedar House",
                    "Blue Door Hotel",
                    "Old Mill Suites",
                    "Lantern Rooms",
                    "Juniper Hostel",
                    "Grand Pier Hotel",
                    "Willow Court",
                    "Stone Bridge Inn",
                ],
                ["{p} booked the {v} for the trip to {k}.", "For the {k} trip, {p} is staying at the {v}."],
                "Where is {p} staying on the trip to {k}?",
                "The hotel for that trip is the {v}.",
            ),
            "companion": (
                PEOPLE,
                ["{p} is travelling to {k} together with {v}.", "{v} will join {p} on the {k} trip."],
                "Who is travelling with {p} to {k}?",
                "The travel companion on that trip is {v}.",
            ),
            "transport": (
                ["night train", "ferry", "red-eye flight", "rental car", "coach bus", "direct flight"],
                ["{p} is getting to {k} by {v}.", "{p} picked the {v} to reach {k}."],
                "How is {p} getting to {k}?",
                "For that trip the way to get there is the {v}.",
            ),
            "budget": (
                ["800 euros", "1200 euros", "450 euros", "2000 euros", "950 euros", "1500 euros"],
                ["{p} set a budget of {v} for the {k} trip.", "The {k} trip budget for {p} is {v}."],
                "What budget did {p} set for the trip to {k}?",
                "The budget for that trip is {v}.",
            ),
        },
    ),
    "dinner": (
        "restaurant",
        [
            "Casa Verde",
            "The Copper Pot",
            "Nori Bar",
            "Little Saigon",
            "Olive Tree",
            "Saffron House",
            "Blue Fig",
            "Maple Table",
            "Ember Grill",
            "Luna Trattoria",
            "Pepper Lane",
            "Golden Wok",
        ],
        {
            "dish": (
                [
                    "mushroom risotto",
                    "lamb tagine",
                    "duck curry",
                    "seafood paella",
                    "beef pho",
                    "spinach gnocchi",
                    "grilled octopus",
                    "tofu ramen",
                ],
                ["At {k}, {p} ordered the {v}.", "{p} loved the {v} at {k}."],
                "What did {p} order at {k}?",
                "The dish ordered at that dinner was the {v}.",
            ),
            "guest": (
                PEOPLE,
                ["{p} had dinner at {k} with {v}.", "{v} joined {p} for dinner at {k}."],
                "Who had dinner with {p} at {k}?",
                "The dinner guest that evening was {v}.",
            ),
            "occasion": (
                ["a promotion", "an anniversary", "a farewell", "a reunion", "a graduation", "a new job"],
                ["The dinner at {k} was {p}'s way to celebrate {v}.", "{p} went to {k} to celebrate {v}."],
                "What was {p} celebrating at {k}?",
                "That dinner was to celebrate {v}.",
            ),
            "bill": (
                ["64 euros", "120 euros", "38 euros", "95 euros", "150 euros", "72 euros"],
                ["The bill at {k} came to {v} for {p}.", "{p} paid {v} at {k}."],
                "How much was {p}'s bill at {k}?",
                "The bill for that dinner came to {v}.",
            ),
        },
    ),
    "course": (
        "subject",
        [
            "pottery",
            "Spanish",
            "salsa",
            "photography",
            "woodworking",
            "piano",
            "chess",
            "climbing",
            "painting",
            "coding",
            "sailing",
            "yoga",
        ],
        {
            "teacher": (
                PEOPLE,
                ["{p}'s {k} course is taught by {v}.", "{v} teaches the {k} class {p} signed up for."],
                "Who teaches {p}'s {k} course?",
                "The teacher of that course is {v}.",
            ),
            "weekday": (
                ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"],
                ["{p} has the {k} class every {v}.", "The {k} lessons for {p} are on {v}."],
                "On which day is {p}'s {k} class?",
                "That class takes place every {v}.",
            ),
            "venue": (
                [
                    "Riverside Studio",
                    "Oak Hall",
                    "the Community Centre",
                    "Lighthouse Loft",
                    "Elm Street Gym",
                    "the Art Depot",
                ],
                ["The {k} course {p} takes is held at {v}.", "{p} goes to {v} for the {k} course."],
                "Where is {p}'s {k} course held?",
                "That course is held at {v}.",
            ),
            "fee": (
                ["90 euros", "140 euros", "60 euros", "210 euros", "45 euros", "175 euros"],
                ["{p} paid {v} for the {k} course.", "The {k} course costs {p} {v}."],
                "How much did {p} pay for the {k} course?",
                "The fee for that course was {v}.",
            ),
        },
    ),
    "repair": (
        "appliance",
        [
            "washing machine",
            "boiler",
            "laptop",
            "bicycle",
            "dishwasher",
            "fridge",
            "car",
            "roof",
            "oven",
            "piano stool",
            "garage door",
        ],
        {
            "technician": (
                PEOPLE,
                ["{v} came to fix {p}'s {k}.", "{p}'s {k} was repaired by {v}."],
                "Who repaired {p}'s {k}?",
                "The repair was done by {v}.",
            ),
            "fault": (
                [
                    "a broken seal",
                    "a burnt fuse",
                    "a cracked hinge",
                    "a leaking valve",
                    "a worn belt",
                    "a faulty sensor",
                ],
                ["{p}'s {k} had {v}.", "The problem with {p}'s {k} turned out to be {v}."],
                "What was wrong with {p}'s {k}?",
                "The fault in it was {v}.",
            ),
            "cost": (
                ["85 euros", "230 euros", "40 euros", "310 euros", "125 euros", "60 euros"],
                ["Fixing the {k} cost {p} {v}.", "{p} paid {v} to repair the {k}."],
                "How much did the {k} repair cost {p}?",
                "The repair cost came to {v}.",
            ),
            "shop": (
                ["FixIt Corner", "Volt Works", "the Tool Barn", "QuickMend", "Gear Doctor", "the Repair Hub"],
                ["{p} took the {k} to {v}.", "The {k} of {p} went to {v} for repair."],
                "Which shop handled {p}'s {k}?",
                "The repair shop was {v}.",
            ),
        },
    ),
}


@dataclass(frozen=True)
class Question:
    text: str
    fact_id: int
    answer: str
    chain: bool  # temporal-chain question (its fact's only mention names neither the person nor the key)


@dataclass
class PersonaStream:
    texts: list[str]
    timestamps: np.ndarray  # seconds
    facts: list[list[int]]  # fact ids each entry states
    event: np.ndarray  # event index of each entry (-1 for an update entry)
    questions: list[Question]
    fact_answers: dict[int, str] = field(default_factory=dict)

    def provenance(self) -> list[dict]:
        return [{"facts": list(f), "entry": i} for i, f in enumerate(self.facts)]

    def __len__(self) -> int:
        return len(self.texts)


def persona_stream(
    n_events: int = 150,
    *,
    seed: int = 0,
    update_rate: float = 0.10,
    chain_rate: float = 0.4,
    time_offset: float = 0.0,
) -> PersonaStream:
    """Generate the stream (see the module docstring); deterministic in ``seed``."""
    if n_events < 1:
        raise ValueError(f"n_events must be >= 1, got {n_events}")
    rng = np.random.default_rng(seed)
    kinds = list(KINDS)
    texts: list[str] = []
    times: list[float] = []
    facts: list[list[int]] = []
    events: list[int] = []
    questions: list[Question] = []
    answers: dict[int, str] = {}
    used_keys: set[tuple[str, str, str]] = set()
    pending_updates: list[tuple[float, str, int, str, str, str]] = []  # (due time, text, fact, q, ans, ...)
    clock = time_offset
    next_fact = 0
    # a small cast per stream: each person recurs in many distant events of the same kinds
    cast = list(rng.choice(PEOPLE, size=8, replace=False))
    for e in range(n_events):
        clock += float(rng.uniform(6, 30)) * 3600.0  # next episode hours to a day later
        kind = kinds[int(rng.integers(len(kinds)))]
        key_attr, key_values, attrs = KINDS[kind]
        for _ in range(50):
            person = cast[int(rng.integers(len(cast)))]
            key = key_values[int(rng.integers(len(key_values)))]
            if (person, kind, key) not in used_keys:
                break
        used_keys.add((person, kind, key))
        n_facts = int(rng.integers(2, 5))
        chosen = [list(attrs)[i] for i in rng.choice(len(attrs), size=n_facts, replace=False)]
        event_facts = []
        for attr in chosen:
            values = [v for v in attrs[attr][0] if v != person]
            event_facts.append((next_fact, attr, values[int(rng.integers(len(values)))]))
            next_fact += 1
        chain_fact = event_facts[-1][0] if rng.random() < chain_rate else None
        # entries: an opener naming person + key, one statement per fact, restatements up to 3-8 entries
        n_entries = int(rng.integers(3, 9))
        entries: list[tuple[str, list[int]]] = [(_opener(kind, person, key, rng), [])]
        for fid, attr, value in event_facts:
            templates = attrs[attr][1]
            if fid == chain_fact:
                # the chain entry right after a strong one: insert a statement of an earlier fact first
                entries.append((attrs[attr][3].format(p=person, k=key, v=value), [fid]))
            else:
                entries.append((templates[0].format(p=person, k=key, v=value), [fid]))
        restatable = [f for f in event_facts if f[0] != chain_fact]
        said = {f[0]: 1 for f in restatable}
        while len(entries) < n_entries and restatable:
            fid, attr, value = restatable[int(rng.integers(len(restatable)))]
            template = attrs[attr][1][int(rng.integers(len(attrs[attr][1])))]
            entries.append((template.format(p=person, k=key, v=value), [fid]))
            said[fid] += 1
            restatable = [f for f in restatable if said[f[0]] < 3]  # a fact is said at most three times
        # order: opener first, chain entry directly after the opener (a strong match), the rest shuffled
        body = entries[1:]
        chain_entries = [x for x in body if x[1] and x[1][0] == chain_fact]
        rest = [x for x in body if not (x[1] and x[1][0] == chain_fact)]
        order = rng.permutation(len(rest))
        ordered = [entries[0]] + chain_entries + [rest[i] for i in order]
        for text, fids in ordered:
            clock += float(rng.uniform(1, 10)) * 60.0  # minutes apart inside the episode
            texts.append(text)
            times.append(clock)
            facts.append(fids)
            events.append(e)
        # updates and questions
        for fid, attr, value in event_facts:
            values, templates, question, _ = attrs[attr]
            if fid != chain_fact and rng.random() < update_rate:
                others = [v for v in values if v not in (value, person)]
                new_value = others[int(rng.integers(len(others)))]
                new_fid = next_fact
                next_fact += 1
                due = clock + float(rng.uniform(3, 20)) * 86400.0
                text = f"Change of plan: {templates[0].format(p=person, k=key, v=new_value)}"
                pending_updates.append((due, text, new_fid, question.format(p=person, k=key), new_value, ""))
                answers[new_fid] = new_value
            else:
                questions.append(Question(question.format(p=person, k=key), fid, value, fid == chain_fact))
                answers[fid] = value
        # updates fall due inside a later episode's time span
        due_now = [u for u in pending_updates if u[0] <= clock]
        for u in due_now:
            pending_updates.remove(u)
            texts.append(u[1])
            times.append(u[0])
            facts.append([u[2]])
            events.append(-1)
            questions.append(Question(u[3], u[2], u[4], False))
    for u in pending_updates:
        texts.append(u[1])
        times.append(u[0])
        facts.append([u[2]])
        events.append(-1)
        questions.append(Question(u[3], u[2], u[4], False))
    order = np.argsort(np.asarray(times), kind="stable")
    return PersonaStream(
        [texts[i] for i in order],
        np.asarray(times)[order],
        [facts[i] for i in order],
        np.asarray(events)[order],
        questions,
        answers,
    )


def _opener(kind: str, person: str, key: str, rng: np.random.Generator) -> str:
    options = {
        "trip": ["{p} is planning a trip to {k}.", "{p} told me about the upcoming trip to {k}."],
        "dinner": ["{p} went out for dinner at {k}.", "{p} described the evening at {k}."],
        "course": ["{p} signed up for a {k} course.", "{p} started taking {k} lessons."],
        "repair": ["{p}'s {k} broke down.", "{p} had trouble with the {k}."],
    }[kind]
    return options[int(rng.integers(len(options)))].format(p=person, k=key)
