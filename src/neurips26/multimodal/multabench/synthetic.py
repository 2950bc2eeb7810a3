"""Seeded text-tabular tables with the two MulTaBench properties (the digest's generator).

Every row has 5 numeric columns and a free-text ``description``: ``n_topic_sentences`` sentences drawn from one
of 20 topic sentence banks (template x topic vocabulary) plus one short "condition" sentence (one of many good or
bad paraphrases) at a random position. Generic sentence embeddings are dominated by the topic.

- task-aware table: ``y = 1[b.x + 1.5 c + noise > 0]`` with ``c = +-1`` the condition; the topic is ALSO a
  tabular categorical column (so it is redundant). A frozen PCA-30 keeps little of ``c``; a tuned encoder can.
- control table: ``y = 1[b.x + 1.5 g + noise > 0]`` with ``g = +-1`` the topic group (topics 0-9 vs 10-19),
  which is NOT a tabular column: the text is needed, but frozen embeddings already capture it.
The regression twins drop the indicator: ``y = b.x + 1.5 c + noise`` (resp. ``g``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

TOPICS: dict[str, tuple[list[str], list[str]]] = {
    "kitchen": (
        ["kettle", "skillet", "colander", "whisk", "oven mitt", "cutting board"],
        ["simmer", "slice", "bake"],
    ),
    "garden": (
        ["trowel", "watering can", "hedge shears", "seed tray", "rake", "planter"],
        ["prune", "water", "sow"],
    ),
    "astronomy": (
        ["telescope", "star chart", "eyepiece", "tripod mount", "red torch", "filter"],
        ["observe", "track", "align"],
    ),
    "cycling": (
        ["bike helmet", "chain", "saddle", "pump", "derailleur", "tyre lever"],
        ["ride", "pedal", "shift"],
    ),
    "aquarium": (
        ["fish tank", "heater", "gravel", "air stone", "net", "water filter"],
        ["clean", "feed", "cycle"],
    ),
    "woodwork": (
        ["chisel", "hand plane", "clamp", "dovetail saw", "mallet", "workbench"],
        ["carve", "plane", "join"],
    ),
    "photography": (
        ["camera body", "lens hood", "tripod", "memory card", "flash", "light meter"],
        ["shoot", "frame", "expose"],
    ),
    "knitting": (
        ["yarn", "knitting needle", "stitch marker", "pattern book", "wool", "crochet hook"],
        ["knit", "purl", "cast on"],
    ),
    "camping": (
        ["tent", "sleeping bag", "camp stove", "lantern", "backpack", "compass"],
        ["pitch", "hike", "camp"],
    ),
    "music": (
        ["guitar", "violin bow", "metronome", "amplifier", "drum stick", "sheet music"],
        ["play", "tune", "practise"],
    ),
    "office": (
        ["stapler", "desk lamp", "filing cabinet", "ring binder", "paper shredder", "monitor stand"],
        ["file", "print", "sort"],
    ),
    "fitness": (
        ["dumbbell", "yoga mat", "kettlebell", "jump rope", "resistance band", "bench press"],
        ["lift", "stretch", "train"],
    ),
    "pets": (
        ["dog leash", "cat tree", "pet bed", "food bowl", "chew toy", "litter box"],
        ["walk", "groom", "feed"],
    ),
    "baby": (
        ["stroller", "high chair", "baby monitor", "crib", "bottle warmer", "changing mat"],
        ["soothe", "carry", "rock"],
    ),
    "automotive": (
        ["car jack", "wiper blade", "tyre gauge", "jump starter", "floor mat", "roof rack"],
        ["drive", "tow", "service"],
    ),
    "painting": (
        ["easel", "brush set", "canvas", "palette knife", "watercolour pad", "oil paint"],
        ["paint", "blend", "sketch"],
    ),
    "fishing": (
        ["fishing rod", "reel", "tackle box", "landing net", "lure", "wader"],
        ["cast", "reel in", "bait"],
    ),
    "electronics": (
        ["soldering iron", "multimeter", "breadboard", "oscilloscope", "wire stripper", "power supply"],
        ["solder", "measure", "wire"],
    ),
    "bathroom": (
        ["shower head", "towel rail", "bath mat", "soap dispenser", "mirror cabinet", "toilet brush"],
        ["rinse", "scrub", "dry"],
    ),
    "tea": (
        ["teapot", "tea strainer", "loose leaf tin", "tea cup", "infuser", "tea tray"],
        ["brew", "steep", "pour"],
    ),
}
TEMPLATES = [
    "The {a} sits next to the {b} in this set.",
    "You can {v} with the {a} most days.",
    "It is made for people who like to {v}.",
    "Our {a} pairs well with a {b}.",
    "Many buyers use the {a} to {v} at home.",
    "The listing shows a {a} and a {b}.",
    "A {b} is handy when you {v}.",
    "This {a} comes from a shop that sells every {b}.",
]
GOOD = [
    "It arrived in perfect condition.",
    "Everything works flawlessly.",
    "The quality is excellent.",
    "No scratches or defects at all.",
    "It performs exactly as promised.",
    "Sturdy and reliable after months of use.",
    "The finish is flawless.",
    "Still like new.",
    "Works great.",
    "Top quality, highly recommended.",
    "Not a single problem so far.",
    "Well made and durable.",
]
BAD = [
    "It arrived broken.",
    "Several parts were missing.",
    "The quality is terrible.",
    "Badly scratched and dented.",
    "It stopped working after a day.",
    "Flimsy and fell apart quickly.",
    "The finish is peeling off.",
    "Cracked on arrival.",
    "Does not work.",
    "Poor quality, avoid it.",
    "Problems from the very first use.",
    "Cheaply made and fragile.",
]


def make_text_table(
    n: int,
    kind: str = "task_aware",
    target: str = "binary",
    n_topic_sentences: tuple[int, int] = (3, 5),
    effect: float = 1.5,
    noise: float = 1.0,
    seed: int = 0,
) -> tuple[pd.DataFrame, np.ndarray, dict]:
    """One synthetic table: ``(X, y, info)``; ``X`` has num_0..num_4, (topic), description.

    ``kind``: "task_aware" or "control"; ``target``: "binary" or "regression".
    """
    if kind not in ("task_aware", "control"):
        raise ValueError(f"kind must be 'task_aware' or 'control', got {kind!r}")
    if target not in ("binary", "regression"):
        raise ValueError(f"target must be 'binary' or 'regression', got {target!r}")
    if not isinstance(n, (int, np.integer)) or n < 10:
        raise ValueError(f"n must be an integer >= 10, got {n!r}")
    lo, hi = n_topic_sentences
    if not 1 <= lo <= hi:
        raise ValueError(f"n_topic_sentences must be (lo, hi) with 1 <= lo <= hi, got {n_topic_sentences}")
    rng = np.random.default_rng(seed)
    names = list(TOPICS)
    x = rng.normal(size=(n, 5))
    b = rng.normal(size=5)
    b *= 1.0 / np.linalg.norm(b)
    topic = rng.integers(0, len(names), n)
    cond = rng.choice([-1.0, 1.0], n)
    texts = []
    for i in range(n):
        nouns, verbs = TOPICS[names[topic[i]]]
        k = int(rng.integers(lo, hi + 1))
        sents = []
        for t in rng.choice(len(TEMPLATES), k, replace=False):
            a, c = rng.choice(len(nouns), 2, replace=False)
            sents.append(TEMPLATES[t].format(a=nouns[a], b=nouns[c], v=verbs[int(rng.integers(len(verbs)))]))
        bank = GOOD if cond[i] > 0 else BAD
        sents.insert(int(rng.integers(0, k + 1)), bank[int(rng.integers(len(bank)))])
        texts.append(" ".join(sents))
    group = np.where(topic < len(names) // 2, -1.0, 1.0)
    signal = cond if kind == "task_aware" else group
    latent = x @ b + effect * signal + noise * rng.normal(size=n)
    y = (latent > 0).astype(int) if target == "binary" else latent
    X = pd.DataFrame(x, columns=[f"num_{j}" for j in range(5)])
    if kind == "task_aware":
        X["topic"] = pd.Categorical([names[t] for t in topic])
    X["description"] = texts
    info = {"topic": topic, "condition": cond, "group": group, "b": b}
    return X, y, info
