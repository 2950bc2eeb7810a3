"""A synthetic RL rollout harness (the digest's stand-in for GRPO training): the policy is a fixed sleep per step.

``run_rollouts(backend, ...)`` runs ``n_tasks`` GRPO groups: for each task a worker sets the task up in its
sandbox (writes a small repository of files), takes a branch point, then plays ``group_size`` rollouts that
each start from that branch point and take ``n_steps`` steps (policy sleep + one tool command). ``concurrency``
workers run side by side, each with its own sandbox. Returned: wall time, the time workers spent in sandbox
operations, and the sandbox share of worker time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

TASK_SETUP = 'mkdir -p /tmp/work && cd /tmp/work && for i in $(seq 1 32); do echo "def f$i(): return $i" > mod$i.py; done'
STEP = "cd /tmp/work && echo step {step} >> log.txt && cat mod{k}.py | wc -c && ls | wc -l"


@dataclass
class Backend:
    """How the harness drives one sandbox technology (every callable gets the handle from ``open``)."""

    name: str
    open: Callable[[], Any]
    exec: Callable[[Any, str], Any]
    branch: Callable[[Any], Any]  # take a branch point (snapshot, docker commit, copy of a work dir)
    start_from: Callable[[Any, Any], None]  # start a rollout from a branch point
    reset: Callable[[Any], None]
    close: Callable[[Any], None]
    drop_branch: Callable[[Any], None] = lambda token: None


def run_rollouts(
    backend: Backend,
    *,
    n_tasks: int,
    group_size: int = 4,
    n_steps: int = 8,
    concurrency: int = 1,
    policy_seconds: float = 0.02,
) -> dict:
    """Play ``n_tasks * group_size`` episodes; see the module docstring."""
    for name, v in (
        ("n_tasks", n_tasks),
        ("group_size", group_size),
        ("n_steps", n_steps),
        ("concurrency", concurrency),
    ):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if not policy_seconds >= 0:
        raise ValueError(f"policy_seconds must be >= 0, got {policy_seconds!r}")
    sandbox_time = [0.0] * concurrency
    failures = [0] * concurrency
    lock = threading.Lock()
    next_task = iter(range(n_tasks))

    def timed(worker: int, fn: Callable[..., Any], *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args)
        finally:
            sandbox_time[worker] += time.perf_counter() - t0

    def worker(w: int) -> None:
        handle = timed(w, backend.open)
        try:
            while True:
                with lock:
                    task = next(next_task, None)
                if task is None:
                    break
                r = timed(w, backend.exec, handle, TASK_SETUP)
                failures[w] += int(getattr(r, "exit_code", 0) != 0)
                token = timed(w, backend.branch, handle)
                for _ in range(group_size):
                    timed(w, backend.start_from, handle, token)
                    for step in range(n_steps):
                        time.sleep(policy_seconds)  # the policy "thinks"
                        r = timed(w, backend.exec, handle, STEP.format(step=step, k=1 + (task + step) % 32))
                        failures[w] += int(getattr(r, "exit_code", 0) != 0)
                timed(w, backend.reset, handle)
                timed(w, backend.drop_branch, token)
        finally:
            timed(w, backend.close, handle)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        list(pool.map(worker, range(concurrency)))
    wall = time.perf_counter() - t0
    busy = sum(sandbox_time)
    return {
        "backend": backend.name,
        "concurrency": concurrency,
        "episodes": n_tasks * group_size,
        "steps": n_tasks * group_size * n_steps,
        "wall_s": wall,
        "sandbox_s": busy,
        "sandbox_share": busy / (concurrency * wall),
        "policy_s_per_worker": n_tasks * group_size * n_steps * policy_seconds / concurrency,
        "failed_commands": sum(failures),
    }
