"""Tokenizers for the small-LM stack: byte-level, char-level and word-level, all with ``encode`` / ``decode``.

- :class:`ByteTokenizer`: the 256 UTF-8 byte values; round-trips every string (no vocabulary to fit).
- :class:`CharTokenizer`: one id per character of a fitted alphabet (``from_text``); characters outside it map to
  an optional ``unk`` character or raise. Round-trips any text drawn from its alphabet.
- :class:`WordTokenizer`: whitespace-separated words of a closed vocabulary (small synthetic worlds); ``decode``
  joins with single spaces, so it round-trips text whose words are separated by single spaces.

Each has ``vocab_size``, ``encode(text) -> list[int]``, ``encode_array(text) -> np.ndarray`` (int64) and
``decode(ids) -> str``, and ``to_dict()``; :func:`tokenizer_from_dict` rebuilds any of them (checkpoints store it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["ByteTokenizer", "CharTokenizer", "Tokenizer", "WordTokenizer", "tokenizer_from_dict"]


def _ids(ids: Any, vocab_size: int) -> list[int]:
    if isinstance(ids, np.ndarray) or hasattr(ids, "tolist"):
        ids = ids.tolist()
    if not isinstance(ids, (list, tuple)):
        raise TypeError(f"ids must be a sequence of integers, got {type(ids).__name__}")
    out = []
    for i in ids:
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"ids must be integers, got {i!r}")
        if not 0 <= i < vocab_size:
            raise ValueError(f"token id {i} is outside the vocabulary [0, {vocab_size})")
        out.append(int(i))
    return out


def _text(text: Any) -> str:
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    return text


class Tokenizer:
    """Common interface (see the module docstring)."""

    vocab_size: int

    def encode(self, text: str) -> list[int]:
        return self.encode_array(text).tolist()

    def encode_array(self, text: str) -> np.ndarray:
        raise NotImplementedError

    def decode(self, ids: Sequence[int]) -> str:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        raise NotImplementedError

    def __len__(self) -> int:
        return self.vocab_size


class ByteTokenizer(Tokenizer):
    """UTF-8 bytes as tokens (vocabulary 256). ``decode`` raises on a byte sequence that is not valid UTF-8
    unless ``errors="replace"``."""

    vocab_size = 256

    def __init__(self, errors: str = "strict") -> None:
        if errors not in ("strict", "replace"):
            raise ValueError(f"errors must be 'strict' or 'replace', got {errors!r}")
        self.errors = errors

    def encode_array(self, text: str) -> np.ndarray:
        return np.frombuffer(_text(text).encode("utf-8"), dtype=np.uint8).astype(np.int64)

    def decode(self, ids: Sequence[int]) -> str:
        return bytes(_ids(ids, 256)).decode("utf-8", errors=self.errors)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "byte", "errors": self.errors}

    def __repr__(self) -> str:
        return "ByteTokenizer()"


class CharTokenizer(Tokenizer):
    """One id per character of ``alphabet`` (ids in the alphabet's order).

    Parameters
    ----------
    alphabet : the characters (a string or a sequence of one-character strings), without repeats.
    unk : a character of ``alphabet`` that stands for every character outside it; ``None`` raises instead.
    """

    def __init__(self, alphabet: str | Sequence[str], unk: str | None = None) -> None:
        chars = list(alphabet)
        if not chars:
            raise ValueError("alphabet must not be empty")
        if any(not isinstance(c, str) or len(c) != 1 for c in chars):
            raise ValueError("alphabet must consist of single characters")
        if len(set(chars)) != len(chars):
            raise ValueError("alphabet has repeated characters")
        if unk is not None and unk not in chars:
            raise ValueError(f"unk {unk!r} must be a character of the alphabet")
        self.chars = chars
        self.unk = unk
        self.vocab_size = len(chars)
        self._index = {c: i for i, c in enumerate(chars)}
        codes = np.array([ord(c) for c in chars], dtype=np.int64)
        self._lut = np.full(int(codes.max()) + 1, -1, dtype=np.int64)
        self._lut[codes] = np.arange(len(chars))

    @classmethod
    def from_text(
        cls,
        text: str | Iterable[str],
        min_count: int = 1,
        unk: str | None = "\ufffd",
        max_vocab: int | None = None,
    ) -> CharTokenizer:
        """Fit the alphabet: characters seen at least ``min_count`` times (the ``max_vocab`` most frequent), in
        code-point order, plus ``unk`` (when given) for the rest."""
        if isinstance(min_count, bool) or not isinstance(min_count, int) or min_count < 1:
            raise ValueError(f"min_count must be a positive integer, got {min_count!r}")
        if max_vocab is not None and (not isinstance(max_vocab, int) or max_vocab < 2):
            raise ValueError(f"max_vocab must be an integer >= 2 or None, got {max_vocab!r}")
        counts: Counter[str] = Counter()
        for part in [text] if isinstance(text, str) else text:
            counts.update(_text(part))
        if not counts:
            raise ValueError("text is empty: nothing to fit an alphabet on")
        kept = [c for c, n in counts.most_common() if n >= min_count and c != unk]
        if max_vocab is not None:
            kept = kept[: max_vocab - (unk is not None)]
        chars = sorted(kept) + ([unk] if unk is not None else [])
        return cls(chars, unk=unk)

    def encode_array(self, text: str) -> np.ndarray:
        codes = np.frombuffer(_text(text).encode("utf-32-le", errors="surrogatepass"), dtype=np.uint32)
        codes = codes.astype(np.int64)
        ids = np.full(codes.shape, -1, dtype=np.int64)
        inside = codes < len(self._lut)
        ids[inside] = self._lut[codes[inside]]
        missing = ids < 0
        if missing.any():
            if self.unk is None:
                bad = chr(int(codes[np.argmax(missing)]))
                raise ValueError(f"character {bad!r} is not in the alphabet and unk is None")
            ids[missing] = self._index[self.unk]
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self.chars[i] for i in _ids(ids, self.vocab_size))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "char", "alphabet": "".join(self.chars), "unk": self.unk}

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size}, unk={self.unk!r})"


class WordTokenizer(Tokenizer):
    """Whitespace-separated words of a closed vocabulary, ids in the vocabulary's order.

    ``encode`` takes a string (split on whitespace) or a sequence of words; ``decode`` joins with spaces.
    """

    def __init__(self, words: Sequence[str], unk: str | None = None) -> None:
        words = list(words)
        if not words:
            raise ValueError("words must not be empty")
        for w in words:
            if not isinstance(w, str) or not w or any(c.isspace() for c in w):
                raise ValueError(f"every word must be a non-empty string without whitespace, got {w!r}")
        if len(set(words)) != len(words):
            raise ValueError("words has repeats")
        if unk is not None and unk not in words:
            raise ValueError(f"unk {unk!r} must be one of the words")
        self.words = words
        self.unk = unk
        self.vocab_size = len(words)
        self._index = {w: i for i, w in enumerate(words)}

    @classmethod
    def from_texts(cls, texts: Iterable[str], unk: str | None = None) -> WordTokenizer:
        """Vocabulary of every word in ``texts`` in first-seen order (plus ``unk`` when given)."""
        seen: dict[str, None] = {}
        for t in texts:
            for w in _text(t).split():
                seen.setdefault(w)
        if unk is not None:
            seen.setdefault(unk)
        return cls(list(seen), unk=unk)

    def encode_array(self, text: str | Sequence[str]) -> np.ndarray:
        words = _text(text).split() if isinstance(text, str) else list(text)
        out = np.empty(len(words), dtype=np.int64)
        for i, w in enumerate(words):
            j = self._index.get(w)
            if j is None:
                if self.unk is None:
                    raise ValueError(f"word {w!r} is not in the vocabulary and unk is None")
                j = self._index[self.unk]
            out[i] = j
        return out

    def encode(self, text: str | Sequence[str]) -> list[int]:  # type: ignore[override]
        return self.encode_array(text).tolist()

    def decode(self, ids: Sequence[int]) -> str:
        return " ".join(self.words[i] for i in _ids(ids, self.vocab_size))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "word", "words": list(self.words), "unk": self.unk}

    def __repr__(self) -> str:
        return f"WordTokenizer(vocab_size={self.vocab_size})"


def tokenizer_from_dict(data: Mapping[str, Any]) -> Tokenizer:
    """Rebuild a tokenizer from its ``to_dict()``."""
    kind = data.get("kind")
    if kind == "byte":
        return ByteTokenizer(errors=data.get("errors", "strict"))
    if kind == "char":
        return CharTokenizer(data["alphabet"], unk=data.get("unk"))
    if kind == "word":
        return WordTokenizer(data["words"], unk=data.get("unk"))
    raise ValueError(f"kind must be 'byte', 'char' or 'word', got {kind!r}")
