"""Peer benchmark for ftrl-surplus: max-min strategies and game values against nashpy.

Our :func:`neurips26.rl.ftrl_surplus.maxmin_strategy` (HiGHS LP) is compared with nashpy's
``Game.linear_program`` (zero-sum LP) and ``Game.vertex_enumeration`` (all equilibria, exact enumeration) on
the same random Gaussian games: time ratio and the largest disagreement in the game value. Also
:func:`repeated_play` with a fixed strategy (all rounds at once) against the same play round by round.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from neurips26.rl.ftrl_surplus import maxmin_strategy


def repeated_play_all_rounds_vs_loop(T: int = 4000, repeat: int = 5) -> list[dict]:
    """``repeated_play`` with a fixed strategy (every round at once) against the same play round by round (a
    callable returning that strategy, the loop a user would write), per regulariser: interleaved, best CPU time
    over ``repeat``, and the largest surplus difference."""
    from neurips26.rl.ftrl_surplus import REGULARIZERS, repeated_play

    rng = np.random.default_rng(1)
    A = rng.normal(size=(4, 5))
    x = maxmin_strategy(A)[0]
    rows = []
    for reg in REGULARIZERS:
        t_fast, t_loop = [], []
        for _ in range(repeat):
            t0 = time.process_time()
            fast = repeated_play(A, x, 0.05, T, reg)
            t_fast.append(time.process_time() - t0)
            t0 = time.process_time()
            loop = repeated_play(A, lambda t, y, L: x, 0.05, T, reg)
            t_loop.append(time.process_time() - t0)
        rows.append(
            {
                "case": f"repeated_play, fixed strategy, 4x5 game, T={T}, {reg}",
                "cpu s (all rounds at once)": min(t_fast),
                "cpu s (round by round)": min(t_loop),
                "speedup": min(t_loop) / min(t_fast),
                "max |surplus difference|": float(
                    np.abs(fast.cumulative_surplus - loop.cumulative_surplus).max()
                ),
            }
        )
    return rows


def main(quick: bool = True) -> list[dict]:
    import nashpy as nash

    rng = np.random.default_rng(0)
    sizes = [(3, 3), (5, 5), (8, 8)] if quick else [(3, 3), (5, 5), (8, 8), (10, 12)]
    n_games = 20 if quick else 100
    rows = []
    for n, m in sizes:
        games = [rng.normal(size=(n, m)) for _ in range(n_games)]
        t0 = time.perf_counter()
        ours = [maxmin_strategy(A)[1] for A in games]
        t_ours = time.perf_counter() - t0
        t0 = time.perf_counter()
        lp = []
        for A in games:
            row, col = nash.Game(A).linear_program()
            lp.append(float(row @ A @ col))
        t_lp = time.perf_counter() - t0
        row = {
            "n x m": f"{n}x{m}",
            "games": n_games,
            "ours s": t_ours,
            "nashpy LP s": t_lp,
            "time ratio (nashpy LP / ours)": t_lp / t_ours,
            "max |v_ours - v_nashpy LP|": float(np.max(np.abs(np.subtract(ours, lp)))),
        }
        if n * m <= 25:  # vertex enumeration is exponential in the size
            t0 = time.perf_counter()
            ve = []
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for A in games:
                    r, c = next(iter(nash.Game(A).vertex_enumeration()))
                    ve.append(float(r @ A @ c))
            t_ve = time.perf_counter() - t0
            row["time ratio (nashpy vertex enum / ours)"] = t_ve / t_ours
            row["max |v_ours - v_vertex enum|"] = float(np.max(np.abs(np.subtract(ours, ve))))
        rows.append(row)
    rows += repeated_play_all_rounds_vs_loop()
    for r in rows:
        print(r)
    return rows


if __name__ == "__main__":
    main()
