"""NitroBox: lightweight sandboxes for RL rollouts (OpenReview Fg7IC3UM4g; see sandbox.py for the design)."""

from .pool import SandboxPool
from .rootfs import build_rootfs, python_binds
from .sandbox import ExecResult, Sandbox, SandboxError, Snapshot, sandbox_support

__all__ = [
    "Sandbox",
    "SandboxPool",
    "ExecResult",
    "Snapshot",
    "SandboxError",
    "build_rootfs",
    "python_binds",
    "sandbox_support",
]
