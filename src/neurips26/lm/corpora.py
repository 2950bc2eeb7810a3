"""Text corpora built from what every Python installation ships, and the batch sources the training loop reads.

Nothing is downloaded: the documents are read from the running interpreter's standard library, located with
``sysconfig.get_paths()["stdlib"]``:

- ``"source"``: the stdlib's ``.py`` files (without its test suites, ``site-packages``, ``encodings`` tables and
  ``pydoc_data``), one document per file;
- ``"docstrings"``: the module, class and function docstrings of those files (parsed with :mod:`ast`, never
  imported), one document per file;
- ``"docs"``: the reference documentation that ships as ``pydoc_data.topics`` (reST-derived text of the language
  reference, one document per topic) and the stdlib's ``.rst`` / ``.txt`` files.

:func:`split_by_document` assigns whole documents to train or validation by a hash of their name, so the two
splits never share a file and the split does not depend on the order files are listed in. The stdlib differs
between Python versions, so corpora (and the numbers measured on them) differ slightly between interpreters.

Batch sources (what :func:`neurips26.lm.train` samples from):

- :class:`TokenStream`: one long token sequence; random windows for training, contiguous windows for evaluation;
- :class:`SequenceDataset`: fixed-length sequences (synthetic tasks), with an optional loss mask.
"""

from __future__ import annotations

import ast
import hashlib
import math
import os
import sysconfig
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from .tokenizers import ByteTokenizer, CharTokenizer, Tokenizer

__all__ = [
    "Document",
    "LMCorpus",
    "SequenceDataset",
    "TokenStream",
    "split_by_document",
    "stdlib_corpus",
    "stdlib_documents",
]

KINDS = ("source", "docstrings", "docs")
_SKIP_DIRS = {"test", "tests", "site-packages", "encodings", "pydoc_data", "__pycache__", "idle_test"}


@dataclass(frozen=True)
class Document:
    """One unit of a corpus: ``name`` (e.g. ``source:json/decoder.py``) and its text."""

    name: str
    text: str


def _stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _stdlib_files(root: Path, suffixes: tuple[str, ...]) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        # prune in place: os.walk then never descends into test suites or site-packages
        dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("config-")]
        out.extend(Path(dirpath) / f for f in filenames if f.endswith(suffixes))
    return sorted(out)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None


def _docstrings(text: str) -> str:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):  # lib2to3 fixtures and the like
        return ""
    parts = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=True)
            if doc:
                parts.append(doc)
    return "\n\n".join(parts)


def stdlib_documents(kind: str = "source", root: str | Path | None = None) -> list[Document]:
    """The documents of one ``kind`` (``"source"``, ``"docstrings"`` or ``"docs"``), sorted by name.

    ``root`` defaults to this interpreter's stdlib directory. Read once per process and kind (cached).
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    base = Path(root) if root is not None else _stdlib_root()
    if not base.is_dir():
        raise ValueError(f"root {str(base)!r} is not a directory")
    return list(_documents(kind, str(base.resolve())))


@lru_cache(maxsize=8)
def _documents(kind: str, root: str) -> tuple[Document, ...]:
    base = Path(root)
    docs: list[Document] = []
    if kind in ("source", "docstrings"):
        for path in _stdlib_files(base, (".py",)):
            text = _read(path)
            if text is None:
                continue
            if kind == "docstrings":
                text = _docstrings(text)
            if text.strip():
                docs.append(Document(f"{kind}:{path.relative_to(base).as_posix()}", text))
    else:
        try:
            from pydoc_data.topics import topics
        except ImportError:  # some distributions strip it
            topics = {}
        docs.extend(Document(f"docs:topic/{k}", v) for k, v in sorted(topics.items()) if v.strip())
        for path in _stdlib_files(base, (".rst", ".txt")):
            text = _read(path)
            if text and text.strip():
                docs.append(Document(f"docs:{path.relative_to(base).as_posix()}", text))
    return tuple(sorted(docs, key=lambda d: d.name))


def _unit_hash(name: str, salt: str) -> float:
    digest = hashlib.sha256(f"{salt}\0{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def split_by_document(
    documents: Sequence[Document], val_fraction: float = 0.1, salt: str = "neurips26"
) -> tuple[list[Document], list[Document]]:
    """(train, val): each document goes to val when the hash of (salt, name) falls below ``val_fraction``.

    Whole documents go to one side, so the splits never share a file. When the hash would leave a side empty the
    document with the smallest (or largest) hash moves over, so both sides are non-empty for two or more
    documents.
    """
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction!r}")
    if len(documents) < 2:
        raise ValueError(f"documents must hold at least 2 documents to split, got {len(documents)}")
    names = [d.name for d in documents]
    if len(set(names)) != len(names):
        raise ValueError("documents have repeated names")
    keyed = sorted(documents, key=lambda d: _unit_hash(d.name, salt))
    hashes = [_unit_hash(d.name, salt) for d in keyed]
    n_val = sum(h < val_fraction for h in hashes)
    n_val = min(max(n_val, 1), len(keyed) - 1)
    val, train = keyed[:n_val], keyed[n_val:]
    return sorted(train, key=lambda d: d.name), sorted(val, key=lambda d: d.name)


def _take(documents: list[Document], max_chars: int | None, salt: str) -> list[Document]:
    """A deterministic subset of whole documents (in hash order) of about ``max_chars`` characters."""
    if max_chars is None:
        return documents
    out, total = [], 0
    for d in sorted(documents, key=lambda d: _unit_hash(d.name, salt + "/take")):
        if total >= max_chars:
            break
        out.append(d)
        total += len(d.text)
    return sorted(out, key=lambda d: d.name)


# --- batch sources ------------------------------------------------------------------------------------------
class TokenStream:
    """One long sequence of token ids; ``sample`` draws random windows, ``windows`` walks contiguous ones.

    Parameters
    ----------
    tokens : 1-D integer array or tensor.
    chars_per_token : characters of text per token (1 for char-level; < 1 for bytes of non-ASCII text), so that
        a loss in nats per token converts to bits per character.
    """

    def __init__(
        self, tokens: np.ndarray | torch.Tensor | Sequence[int], chars_per_token: float = 1.0
    ) -> None:
        t = torch.as_tensor(np.asarray(tokens) if not isinstance(tokens, torch.Tensor) else tokens)
        if t.ndim != 1 or t.dtype.is_floating_point or t.dtype == torch.bool:
            raise ValueError("tokens must be a 1-D integer sequence")
        if t.numel() < 2:
            raise ValueError(f"tokens must hold at least 2 ids, got {t.numel()}")
        if not (chars_per_token > 0 and math.isfinite(chars_per_token)):
            raise ValueError(f"chars_per_token must be positive, got {chars_per_token!r}")
        self.tokens = t.long()
        self.chars_per_token = float(chars_per_token)

    def __len__(self) -> int:
        return int(self.tokens.numel())

    def _check(self, context: int) -> None:
        if isinstance(context, bool) or not isinstance(context, int) or context < 1:
            raise ValueError(f"context must be a positive integer, got {context!r}")
        if context + 1 > len(self):
            raise ValueError(
                f"context {context} needs at least {context + 1} tokens, the stream has {len(self)}"
            )

    def sample(
        self, batch_size: int, context: int, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``batch_size`` random windows: inputs (B, context) and next-token targets (B, context)."""
        self._check(context)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        start = torch.randint(0, len(self) - context, (batch_size,), generator=generator)
        offsets = start[:, None] + torch.arange(context + 1)[None, :]
        chunk = self.tokens[offsets]
        return chunk[:, :-1], chunk[:, 1:]

    def windows(
        self, context: int, batch_size: int = 32, max_tokens: int | None = None
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Contiguous, non-overlapping windows covering the stream (up to ``max_tokens`` targets), in batches."""
        self._check(context)
        n = (len(self) - 1) // context
        if max_tokens is not None:
            n = max(1, min(n, max_tokens // context))
        starts = torch.arange(n) * context
        for i in range(0, n, batch_size):
            offsets = starts[i : i + batch_size, None] + torch.arange(context + 1)[None, :]
            chunk = self.tokens[offsets]
            yield chunk[:, :-1], chunk[:, 1:]


class SequenceDataset:
    """Fixed-length sequences (N, L) of token ids; a batch is rows ``x = seq[:, :-1]``, ``y = seq[:, 1:]``.

    ``loss_mask`` (N, L - 1), optional: targets where it is False are set to -100 (ignored by the loss), e.g. the
    prompt part of a task. ``context`` passed to ``sample`` / ``windows`` must be ``L - 1`` or None.
    """

    def __init__(
        self, sequences: np.ndarray | torch.Tensor, loss_mask: np.ndarray | torch.Tensor | None = None
    ) -> None:
        s = torch.as_tensor(np.asarray(sequences) if not isinstance(sequences, torch.Tensor) else sequences)
        if s.ndim != 2 or s.shape[0] < 1 or s.shape[1] < 2 or s.dtype.is_floating_point:
            raise ValueError("sequences must be an integer array of shape (N, L) with N >= 1, L >= 2")
        self.sequences = s.long()
        targets = self.sequences[:, 1:].clone()
        if loss_mask is not None:
            m = torch.as_tensor(
                np.asarray(loss_mask) if not isinstance(loss_mask, torch.Tensor) else loss_mask
            )
            if tuple(m.shape) != tuple(targets.shape):
                raise ValueError(f"loss_mask must have shape {tuple(targets.shape)}, got {tuple(m.shape)}")
            targets[~m.bool()] = -100
        self.targets = targets
        self.chars_per_token = 1.0

    def __len__(self) -> int:
        return int(self.sequences.shape[0])

    @property
    def length(self) -> int:
        """Input length of one example (L - 1)."""
        return int(self.sequences.shape[1] - 1)

    def _check(self, context: int | None) -> None:
        if context is not None and context != self.length:
            raise ValueError(
                f"context must be {self.length} (the sequences' length - 1) or None, got {context!r}"
            )

    def sample(
        self, batch_size: int, context: int | None = None, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        self._check(context)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        rows = torch.randint(0, len(self), (batch_size,), generator=generator)
        return self.sequences[rows, :-1], self.targets[rows]

    def windows(
        self, context: int | None = None, batch_size: int = 32, max_tokens: int | None = None
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        self._check(context)
        n = len(self)
        if max_tokens is not None:
            n = max(1, min(n, max_tokens // self.length))
        for i in range(0, n, batch_size):
            yield self.sequences[i : min(i + batch_size, n), :-1], self.targets[i : min(i + batch_size, n)]


@dataclass
class LMCorpus:
    """A tokenized train/validation corpus: documents of each side, the tokenizer, and their token streams."""

    train_documents: list[Document]
    val_documents: list[Document]
    tokenizer: Tokenizer
    train: TokenStream
    val: TokenStream

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size


def _stream(documents: list[Document], tokenizer: Tokenizer, separator: str) -> TokenStream:
    text = separator.join(d.text for d in documents)
    ids = tokenizer.encode_array(text)
    return TokenStream(ids, chars_per_token=len(text) / max(len(ids), 1))


def stdlib_corpus(
    kinds: str | Sequence[str] = ("source",),
    tokenizer: str | Tokenizer = "char",
    val_fraction: float = 0.1,
    max_chars: int | None = None,
    salt: str = "neurips26",
    root: str | Path | None = None,
    min_char_count: int = 20,
) -> LMCorpus:
    """A language-modelling corpus from the stdlib, split by document.

    Parameters
    ----------
    kinds : one or more of ``"source"``, ``"docstrings"``, ``"docs"``.
    tokenizer : ``"char"`` (alphabet fitted on the train split: characters seen ``min_char_count`` times, the rest
        mapped to U+FFFD), ``"byte"``, or a tokenizer instance.
    val_fraction : share of documents held out (by hash of their names; see :func:`split_by_document`).
    max_chars : keep about this many characters per split budget (``max_chars`` for train, a ``val_fraction``
        share of it for val), taking whole documents in hash order; None keeps everything.
    salt : changes which documents are held out and which are kept.
    """
    kinds = (kinds,) if isinstance(kinds, str) else tuple(kinds)
    if not kinds or any(k not in KINDS for k in kinds):
        raise ValueError(f"kinds must be a non-empty subset of {KINDS}, got {list(kinds)}")
    if max_chars is not None and (
        isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1
    ):
        raise ValueError(f"max_chars must be a positive integer or None, got {max_chars!r}")
    documents = [d for k in kinds for d in stdlib_documents(k, root=root)]
    train_docs, val_docs = split_by_document(documents, val_fraction, salt)
    if max_chars is not None:
        train_docs = _take(train_docs, max_chars, salt)
        val_docs = _take(val_docs, max(1, int(max_chars * val_fraction / (1 - val_fraction))), salt)
    if isinstance(tokenizer, str):
        if tokenizer == "char":
            tok: Tokenizer = CharTokenizer.from_text(
                (d.text for d in train_docs), min_count=min_char_count, unk="\ufffd"
            )
        elif tokenizer == "byte":
            tok = ByteTokenizer()
        else:
            raise ValueError(f"tokenizer must be 'char', 'byte' or a Tokenizer, got {tokenizer!r}")
    elif isinstance(tokenizer, Tokenizer):
        tok = tokenizer
    else:
        raise TypeError(f"tokenizer must be 'char', 'byte' or a Tokenizer, got {type(tokenizer).__name__}")
    separator = "\n\n"
    return LMCorpus(
        train_docs, val_docs, tok, _stream(train_docs, tok, separator), _stream(val_docs, tok, separator)
    )
