"""Systems: NitroBox, a lightweight namespace + overlayfs sandbox for RL rollouts."""

from .._lazy import attach

_EXPORTS = {
    "Sandbox": ".nitrobox",
    "SandboxPool": ".nitrobox",
    "ExecResult": ".nitrobox",
    "Snapshot": ".nitrobox",
    "SandboxError": ".nitrobox",
    "build_rootfs": ".nitrobox",
    "python_binds": ".nitrobox",
    "sandbox_support": ".nitrobox",
}
__getattr__, __dir__, __all__ = attach(__name__, _EXPORTS)
