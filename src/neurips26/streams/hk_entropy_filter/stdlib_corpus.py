"""Real English text that ships with Python: stdlib docstrings and the pydoc help topics.

The corpus is generated deterministically from the running interpreter (sorted module names, a fixed subset of
pure-Python modules and their submodules, duplicates removed), so no data is downloaded. Values change a
little between Python versions, never between runs.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import warnings
from functools import lru_cache

__all__ = ["STDLIB_MODULES", "stdlib_docstrings"]

# Fixed subset of stdlib modules whose import has no side effects (no GUI, no browser, no printing).
STDLIB_MODULES = (
    "abc", "argparse", "ast", "asyncio", "base64", "bisect", "calendar", "cmd", "codecs", "collections",
    "concurrent", "configparser", "contextlib", "copy", "csv", "dataclasses", "datetime", "decimal",
    "difflib", "email", "enum", "fractions", "ftplib", "functools", "getopt", "gettext", "glob", "gzip",
    "hashlib", "heapq", "hmac", "html", "http", "imaplib", "importlib", "inspect", "io", "ipaddress",
    "itertools", "json", "logging", "lzma", "mailbox", "math", "mimetypes", "multiprocessing", "netrc",
    "numbers", "operator", "optparse", "os", "pathlib", "pickle", "pickletools", "platform", "plistlib",
    "poplib", "pprint", "pydoc_data", "queue", "random", "re", "sched", "secrets", "selectors",
    "shelve", "shlex", "shutil", "signal", "smtplib", "socket", "socketserver", "sqlite3", "ssl",
    "statistics", "string", "struct", "subprocess", "tarfile", "tempfile", "textwrap", "threading",
    "timeit", "tokenize", "trace", "traceback", "types", "typing", "unittest", "urllib", "uuid",
    "warnings", "wave", "weakref", "xml", "zipfile", "zipimport", "zlib",
)  # fmt: skip


def _module_names() -> list[str]:
    names = set()
    for name in STDLIB_MODULES:
        try:
            mod = importlib.import_module(name)
        except ImportError:  # pragma: no cover - a stripped-down interpreter
            continue
        names.add(name)
        if hasattr(mod, "__path__"):
            for info in pkgutil.walk_packages(mod.__path__, prefix=name + "."):
                if any(
                    part.startswith("_") or part in ("test", "tests", "__main__")
                    for part in info.name.split(".")
                ):
                    continue
                names.add(info.name)
    return sorted(names)


def _docs_of(mod: object) -> list[str]:
    docs = [inspect.getdoc(mod) or ""]
    for attr in sorted(vars(mod)):
        if attr.startswith("_"):
            continue
        obj = vars(mod)[attr]
        if getattr(obj, "__module__", None) != getattr(mod, "__name__", None):
            continue
        if inspect.isclass(obj) or inspect.isfunction(obj) or inspect.isbuiltin(obj):
            docs.append(obj.__doc__ or "")
            if inspect.isclass(obj):
                for meth in sorted(vars(obj)):
                    member = vars(obj)[meth]
                    if not meth.startswith("_") and callable(member):
                        docs.append(getattr(member, "__doc__", None) or "")
    return docs


@lru_cache(maxsize=2)
def stdlib_docstrings(max_chars: int | None = None) -> tuple[str, ...]:
    """Docstrings of the fixed stdlib subset (sorted modules) followed by the pydoc help topics.

    Parameters
    ----------
    max_chars : stop once this many characters are collected (None: everything, about 1.2 MB on Python 3.11).
    """
    if max_chars is not None and max_chars < 1:
        raise ValueError(f"max_chars must be a positive integer or None, got {max_chars}")
    seen: set[str] = set()
    out: list[str] = []
    total = 0

    def add(text: str) -> bool:
        nonlocal total
        text = inspect.cleandoc(text).strip()
        if len(text) < 40 or text in seen:
            return False
        seen.add(text)
        out.append(text)
        total += len(text)
        return max_chars is not None and total >= max_chars

    for name in _module_names():
        try:
            mod = importlib.import_module(name)
        except Exception:  # noqa: BLE001 - optional platform modules (e.g. msvcrt helpers) may fail
            continue
        with warnings.catch_warnings():  # reading deprecated aliases (typing.io, typing.re) is harmless
            warnings.simplefilter("ignore", DeprecationWarning)
            docs = _docs_of(mod)
        for doc in docs:
            if add(doc):
                return tuple(out)
    try:
        from pydoc_data.topics import topics
    except ImportError:  # pragma: no cover
        topics = {}
    for key in sorted(topics):
        if add(topics[key]):
            break
    return tuple(out)
