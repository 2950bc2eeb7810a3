"""A pool of warm sandboxes for a rollout harness: acquire one, use it, give it back; the pool resets it in the
background so the next ``acquire`` does not wait for a reset."""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from .sandbox import Sandbox, SandboxError


class SandboxPool:
    """``size`` sandboxes on one image, started up front and kept warm.

    Parameters
    ----------
    image_dir : the root file system shared by every sandbox.
    size : how many sandboxes (the harness's concurrency).
    background_reset : reset returned sandboxes in a worker thread (True) or in ``release`` itself.
    **sandbox_kwargs : passed to :class:`Sandbox` (``network``, ``binds``, ``env``, ...).

    ``with pool.sandbox() as sbx: ...`` acquires a pristine sandbox and gives it back afterwards. A sandbox that
    broke (its shell could not be restarted) is replaced by a new one.
    """

    def __init__(
        self,
        image_dir: str | os.PathLike[str],
        size: int = 4,
        *,
        background_reset: bool = True,
        **sandbox_kwargs: Any,
    ) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= 1024:
            raise ValueError(f"size must be an integer in [1, 1024], got {size!r}")
        if not isinstance(background_reset, bool):
            raise TypeError(f"background_reset must be a bool, got {type(background_reset).__name__}")
        self.image_dir = image_dir
        self.size = size
        self.background_reset = background_reset
        self.sandbox_kwargs = sandbox_kwargs
        self._ready: queue.Queue[Sandbox] = queue.Queue()
        self._all: list[Sandbox] = []
        self._lock = threading.Lock()
        self._closed = False
        self._workers = ThreadPoolExecutor(max_workers=size, thread_name_prefix="nitrobox-pool")
        try:
            for sbx in self._workers.map(lambda _: self._new(), range(size)):
                self._ready.put(sbx)
        except BaseException:
            self.close()
            raise

    def _new(self) -> Sandbox:
        sbx = Sandbox(self.image_dir, **self.sandbox_kwargs)
        with self._lock:
            self._all.append(sbx)
        return sbx

    @property
    def available(self) -> int:
        """Sandboxes ready to be acquired right now."""
        return self._ready.qsize()

    def acquire(self, timeout: float | None = None) -> Sandbox:
        """A pristine sandbox; waits up to ``timeout`` seconds (None: forever) for one to come back."""
        if self._closed:
            raise SandboxError("pool is closed")
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0
        ):
            raise ValueError(f"timeout must be a non-negative number of seconds or None, got {timeout!r}")
        try:
            return self._ready.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no sandbox came back within {timeout} s") from None

    def release(self, sbx: Sandbox) -> None:
        """Give ``sbx`` back; it is reset (in the background unless ``background_reset=False``)."""
        if not isinstance(sbx, Sandbox):
            raise TypeError(f"sbx must be a Sandbox, got {type(sbx).__name__}")
        with self._lock:
            if not any(s is sbx for s in self._all):
                raise ValueError("sbx does not belong to this pool")
        if self._closed:
            sbx.close()
            return
        if self.background_reset:
            try:
                self._workers.submit(self._recycle, sbx)
            except RuntimeError:  # closed meanwhile
                sbx.close()
        else:
            self._recycle(sbx)

    def _recycle(self, sbx: Sandbox) -> None:
        try:
            sbx.reset()
        except SandboxError:
            with self._lock:
                self._all = [s for s in self._all if s is not sbx]
            sbx.close()
            if self._closed:
                return
            sbx = self._new()
        if self._closed:
            sbx.close()
        else:
            self._ready.put(sbx)

    @contextmanager
    def sandbox(self, timeout: float | None = None) -> Iterator[Sandbox]:
        """``with pool.sandbox() as sbx:`` acquire, then release (and reset) on the way out."""
        sbx = self.acquire(timeout)
        try:
            yield sbx
        finally:
            self.release(sbx)

    def close(self) -> None:
        """Close every sandbox of the pool (waits for background resets first)."""
        if self._closed:
            return
        self._closed = True
        self._workers.shutdown(wait=True)
        with self._lock:
            sandboxes, self._all = self._all, []
        for sbx in sandboxes:
            sbx.close()

    def __enter__(self) -> SandboxPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SandboxPool({str(self.image_dir)!r}, size={self.size}, available={self.available})"
