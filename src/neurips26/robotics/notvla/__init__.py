"""NoTVLA: Semantics-Preserving Robot Adaptation via Narrative Action Interfaces (arXiv 2510.03895).

A vision-language-action policy is asked for a few *narrative* waypoints written as ordinary tokens instead of
dense per-step action tokens; a transparent, deterministic renderer turns them into control.

1. Keyframes (RECONSTRUCTED from the paper's "kinematics-driven keyframe selection"): candidates are the
   endpoints, gripper events ``g_t != g_{t-1}``, stops (local minima of the smoothed speed below ``v_thr``) and
   turns sharper than ``theta``; nearby candidates merge; Ramer-Douglas-Peucker with tolerance ``eps`` prunes the
   candidate polyline, never dropping a gripper event (:func:`select_keyframes`, :func:`rdp`).
2. Anchor-relative tokens (RECONSTRUCTED from "anchor-based depth inference" / "anchor-conditioned token
   generation"): waypoint ``k`` -> ``anchor du dv dd gripper`` with ``(du, dv)`` its pixel offset from the anchor's
   pixel and ``dd`` its depth minus the anchor's depth in the single head camera; decoding back-projects
   ``P_world = R (d K^{-1} [u, v, 1]^T) + t`` (:class:`NarrativeCodec`, :class:`PinholeCamera`).
3. Deterministic detokenizer: durations ``max(|dp| / v, T_min)``, minimum-jerk (C2) or PCHIP (C1) in time, the
   gripper switched on arrival and held (:class:`SplineDetokenizer`).

Baselines at the same token budget: uniform subsampling + linear interpolation, FAST-style truncated DCT,
per-step 256-bin tokens (:mod:`.baselines`). Part B's tiny-LM retention proxy lives in :mod:`.retention`.
"""

from .baselines import BinnedActionCodec, DCTActionCodec, render_linear, uniform_keyframes
from .narrative import (
    GroundedNarrativeCodec,
    NarrativeActionInterface,
    NarrativeCodec,
    Plan,
    SplineDetokenizer,
    rdp,
    select_keyframes,
)
from .scene import (
    Demo,
    PickPlaceScene,
    PinholeCamera,
    default_camera,
    execute_plan,
    expert_demo,
    path_rmse,
    sample_scene,
)

__all__ = [
    "NarrativeActionInterface",
    "NarrativeCodec",
    "GroundedNarrativeCodec",
    "SplineDetokenizer",
    "select_keyframes",
    "rdp",
    "PinholeCamera",
    "DCTActionCodec",
    "BinnedActionCodec",
    "Demo",
    "PickPlaceScene",
    "Plan",
    "default_camera",
    "execute_plan",
    "expert_demo",
    "path_rmse",
    "render_linear",
    "sample_scene",
    "uniform_keyframes",
]
