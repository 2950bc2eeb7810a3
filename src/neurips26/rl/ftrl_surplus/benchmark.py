"""Peer benchmark for ftrl-surplus: max-min strategies and game values against nashpy.

Our :func:`neurips26.rl.ftrl_surplus.maxmin_strategy` (HiGHS LP) is compared with nashpy's
``Game.linear_program`` (zero-sum LP) and ``Game.vertex_enumeration`` (all equilibria, exact enumeration) on
the same random Gaussian games: time ratio and the largest disagreement in the game value.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from neurips26.rl.ftrl_surplus import maxmin_strategy


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
    for r in rows:
        print(r)
    return rows


if __name__ == "__main__":
    main()
