"""Trace readers and writers for the formats cache researchers have: CSV and libCacheSim's oracleGeneral.

- CSV with a ``timestamp, id, size`` row per request (header optional; columns found by name or position).
  Ids may be integers of any size or arbitrary strings (hashes, URLs).
- libCacheSim's *oracleGeneral* binary format: little-endian packed records of 24 bytes,
  ``uint32 clock_time, uint64 obj_id, uint32 obj_size, int64 next_access_vtime`` (the 1-based index of the
  object's next request, -1 if none). ``.zst`` files need the ``zstandard`` package.

Both return a :class:`~.traces.Trace` whose ids are encoded once (``trace.items`` holds the original ids) and
whose object sizes are per item: an object keeps the size of its first request (a warning says how many
objects changed size). Timestamps are kept but not used: the delayed-hit model counts time in requests
(one request per slot), so fetch latencies are in requests too.
"""

from __future__ import annotations

import csv
import warnings
from pathlib import Path

import numpy as np

from .traces import Trace, encode_ids, per_item

__all__ = ["ORACLE_GENERAL_DTYPE", "read_csv_trace", "read_oracle_general", "write_oracle_general"]

ORACLE_GENERAL_DTYPE = np.dtype(
    [("clock_time", "<u4"), ("obj_id", "<u8"), ("obj_size", "<u4"), ("next_access_vtime", "<i8")]
)
_TIME_NAMES = ("timestamp", "time", "clock_time", "ts")
_ID_NAMES = ("id", "obj_id", "object_id", "key", "item", "item_id")
_SIZE_NAMES = ("size", "obj_size", "object_size", "bytes")


def _path(path: str | Path, what: str) -> Path:
    if not isinstance(path, (str, Path)):
        raise TypeError(f"path must be a str or Path to a {what} file, got {type(path).__name__}")
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no {what} file at {p}")
    return p


def _finish(
    name: str,
    ids: np.ndarray,
    sizes: np.ndarray | None,
    timestamps: np.ndarray | None,
    fetch_latency: object | None,
    drop_zero_size: bool,
) -> Trace:
    if sizes is not None:
        zero = sizes <= 0
        if zero.any():
            if not drop_zero_size:
                raise ValueError(
                    f"{int(zero.sum())} request(s) have size <= 0; pass drop_zero_size=True to skip them"
                )
            keep = ~zero
            ids, sizes = ids[keep], sizes[keep]
            timestamps = None if timestamps is None else timestamps[keep]
    if ids.size == 0:
        raise ValueError("the trace holds no requests")
    codes, items = encode_ids(ids)
    item_sizes = None
    if sizes is not None:
        first = np.full(len(items), -1, dtype=np.int64)
        order = np.arange(len(codes))[::-1]
        first[codes[order]] = order  # the last write per code is its first request
        item_sizes = sizes[first].astype(np.int64)
        changed = np.unique(codes[sizes != item_sizes[codes]]).size
        if changed:
            warnings.warn(
                f"{changed} object(s) change size within the trace; each keeps the size of its first request",
                stacklevel=3,
            )
    z = None if fetch_latency is None else per_item(fetch_latency, items, "fetch_latency", minimum=0)
    return Trace(name, codes, z, items=items, sizes=item_sizes, timestamps=timestamps)


def _column(
    header: list[str], names: tuple[str, ...], given: int | str | None, default: int | None, what: str
):
    if isinstance(given, int) and not isinstance(given, bool):
        return given
    lowered = [h.strip().lower() for h in header]
    if isinstance(given, str):
        if given.strip().lower() not in lowered:
            raise ValueError(f"{what} column {given!r} not in the header {header}")
        return lowered.index(given.strip().lower())
    if given is not None:
        raise TypeError(f"{what} column must be an int position, a header name or None, got {given!r}")
    for n in names:
        if n in lowered:
            return lowered.index(n)
    return default


def read_csv_trace(
    path: str | Path,
    *,
    time_column: int | str | None = None,
    id_column: int | str | None = None,
    size_column: int | str | None = None,
    delimiter: str = ",",
    header: bool | None = None,
    fetch_latency: object | None = None,
    drop_zero_size: bool = False,
) -> Trace:
    """Read a CSV trace with one ``timestamp, id, size`` row per request.

    Columns are found by header name (``timestamp|time|clock_time``, ``id|obj_id|key``, ``size|obj_size``) or
    given by position or name; without a header the order is timestamp, id, size. ``header=None`` detects a
    header (a first row whose id field is not a number). A two-column file is read as ``timestamp, id``
    (unit-sized objects). Integer ids keep their values (any 64-bit value); other ids are kept as strings.
    ``fetch_latency`` (optional here): a scalar or ``{id: slots}`` mapping stored in the trace.
    """
    p = _path(path, "CSV trace")
    if not isinstance(delimiter, str) or len(delimiter) != 1:
        raise ValueError(f"delimiter must be a single character, got {delimiter!r}")
    with open(p, newline="") as fh:
        rows = list(csv.reader(fh, delimiter=delimiter))
    rows = [r for r in rows if r and any(f.strip() for f in r)]
    if not rows:
        raise ValueError(f"{p} holds no rows")
    first = rows[0]
    if header is None:
        probe = _column(first, _ID_NAMES, id_column, 1 if len(first) > 1 else 0, "id")
        header = any(
            h.strip().lower() in _ID_NAMES + _TIME_NAMES + _SIZE_NAMES for h in first
        ) or not _is_int(first[probe] if probe < len(first) else "")
    names = first if header else []
    body = rows[1:] if header else rows
    width = len(first)
    t_col = _column(names, _TIME_NAMES, time_column, 0 if width >= 2 else None, "time")
    i_col = _column(names, _ID_NAMES, id_column, 1 if width >= 2 else 0, "id")
    s_col = _column(names, _SIZE_NAMES, size_column, 2 if width >= 3 else None, "size")
    for c, what in ((t_col, "time"), (i_col, "id"), (s_col, "size")):
        if c is not None and not 0 <= c < width:
            raise ValueError(f"{what} column {c} is outside the {width} columns of {p}")
    bad = next((k for k, r in enumerate(body) if len(r) != width), None)
    if bad is not None:
        raise ValueError(
            f"{p}: row {bad + 1 + int(bool(header))} has {len(body[bad])} fields, expected {width}"
        )
    if not body:
        raise ValueError(f"{p} holds a header but no requests")
    raw_ids = [r[i_col].strip() for r in body]
    ids: np.ndarray
    if all(_is_int(x) for x in raw_ids):
        vals = [int(x) for x in raw_ids]
        ids = np.asarray(vals, dtype=np.uint64 if max(vals) >= 2**63 else np.int64)
    else:
        ids = np.asarray(raw_ids)
    sizes = None
    if s_col is not None:
        try:
            sizes = np.asarray([int(r[s_col]) for r in body], dtype=np.int64)
        except ValueError as err:
            raise ValueError(f"{p}: size column {s_col} must hold integers ({err})") from None
    ts = None
    if t_col is not None:
        try:
            ts = np.asarray([float(r[t_col]) for r in body])
        except ValueError as err:
            raise ValueError(f"{p}: time column {t_col} must hold numbers ({err})") from None
    return _finish(p.name, ids, sizes, ts, fetch_latency, drop_zero_size)


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def read_oracle_general(
    path: str | Path, *, fetch_latency: object | None = None, drop_zero_size: bool = False
) -> Trace:
    """Read a libCacheSim oracleGeneral binary trace (``.zst`` compressed files need ``zstandard``)."""
    p = _path(path, "oracleGeneral trace")
    if p.suffix == ".zst":
        try:
            import zstandard
        except ImportError:
            raise ImportError("reading .zst traces needs zstandard: pip install zstandard") from None
        with open(p, "rb") as fh:
            data = zstandard.ZstdDecompressor().stream_reader(fh).read()
    else:
        data = p.read_bytes()
    if len(data) % ORACLE_GENERAL_DTYPE.itemsize:
        raise ValueError(
            f"{p}: {len(data)} bytes is not a whole number of {ORACLE_GENERAL_DTYPE.itemsize}-byte "
            "oracleGeneral records (truncated, or another format)"
        )
    rec = np.frombuffer(data, dtype=ORACLE_GENERAL_DTYPE)
    ids = rec["obj_id"]
    ids = ids.astype(np.int64) if ids.size and ids.max() < 2**63 else ids.copy()
    return _finish(
        p.name,
        ids,
        rec["obj_size"].astype(np.int64),
        rec["clock_time"].astype(np.int64),
        fetch_latency,
        drop_zero_size,
    )


def write_oracle_general(trace: Trace, path: str | Path) -> Path:
    """Write ``trace`` as oracleGeneral records (ids must be non-negative integers < 2**64; unit size 1 byte
    when the trace has no sizes; timestamps default to the request index)."""
    if not isinstance(trace, Trace):
        raise TypeError(f"trace must be a Trace, got {type(trace).__name__}")
    ids = trace.ids()
    if not np.issubdtype(ids.dtype, np.integer) or (ids.size and ids.min() < 0):
        raise ValueError("oracleGeneral stores non-negative integer object ids; this trace's ids are not")
    n = len(ids)
    rec = np.zeros(n, dtype=ORACLE_GENERAL_DTYPE)
    rec["obj_id"] = ids.astype(np.uint64)
    sizes = np.ones(trace.n_items, dtype=np.int64) if trace.sizes is None else trace.sizes
    if sizes.max(initial=0) >= 2**32:
        raise ValueError("oracleGeneral stores sizes as uint32; an object is larger than 4 GiB")
    rec["obj_size"] = sizes[trace.requests]
    ts = np.arange(n) if trace.timestamps is None else np.asarray(trace.timestamps)
    if ts.size and (ts.min() < 0 or ts.max() >= 2**32):
        raise ValueError("oracleGeneral stores timestamps as uint32; they must lie in [0, 2**32)")
    rec["clock_time"] = ts.astype(np.uint32)
    # next access: 1-based index of the object's next request, -1 when there is none
    nxt = np.full(n, -1, dtype=np.int64)
    order = np.lexsort((np.arange(n), trace.requests))
    same = trace.requests[order[1:]] == trace.requests[order[:-1]]
    nxt[order[:-1][same]] = order[1:][same] + 1
    rec["next_access_vtime"] = nxt
    out = Path(path)
    with open(out, "wb") as fh:
        fh.write(rec.tobytes())
    return out
