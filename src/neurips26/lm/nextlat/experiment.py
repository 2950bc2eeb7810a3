"""Reproduction: next-latent prediction keeps next-token quality while making the transformer's latents a compact
world model (lower effective rank, linearly decodable true state), generalises to longer sequences, and drafts for
self-speculative decoding (digest: ``nextlat``).

World: the hidden-grid walk (6 x 6 grid, moves N/E/S/W among the legal ones, aliased row-colour observations
with probability 0.2); the true cell is the latent state. GPT (next-token only) and NextLat (horizon 1,
lambda_h = 1, lambda_KL = 0.5) share the architecture, data, batches, steps, learning rate and seed; full mode adds
the MTP-2 baseline, NextLat with horizon 4, three seeds, and path-star planning graphs.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import torch

from neurips26.harness import Run

from ..corpora import SequenceDataset
from ..training import TrainConfig, evaluate, train
from ..transformer import GPT, GPTConfig
from .metrics import effective_rank, linear_probe_accuracy
from .nextlat import MultiTokenModel, NextLatModel
from .speculative import greedy_decode, self_speculative_decode
from .worlds import grid_walk, path_star


def oracle_loss(walk, p_obs: float) -> float:
    """Mean next-token NLL of the Bayes-optimal predictor that knows the true cell (the walk's own law)."""
    size, tokens, cells = walk.size, walk.tokens, walk.cells
    n_cells = size * size
    row, col = cells // size, cells % size
    legal = (row > 0).astype(int) + (row < size - 1) + (col > 0) + (col < size - 1)
    is_obs = tokens >= n_cells + 4
    was_move = (tokens >= n_cells) & ~is_obs  # an observation can only follow a move
    # target t + 1 given the state after token t
    a, lg, nxt_obs = was_move[:, :-1], legal[:, :-1], is_obs[:, 1:]
    nll = np.where(a & nxt_obs, -np.log(p_obs), np.where(a, -np.log((1 - p_obs) / lg), np.log(lg)))
    return float(nll.mean())


def _model(kind: str, cfg: GPTConfig, p: dict):
    if kind == "GPT":
        return GPT(cfg)
    if kind.startswith("NextLat"):
        horizon = 4 if "d=4" in kind else 1
        scale = 0.25 if "lambda/4" in kind else 1.0  # a weaker latent objective (both weights / 4)
        return NextLatModel(
            cfg, horizon=horizon, lambda_h=scale * p["lambda_h"], lambda_kl=scale * p["lambda_kl"]
        )
    if kind == "MTP-2":
        return MultiTokenModel(cfg, heads=1)
    raise ValueError(kind)


@torch.no_grad()
def _latents(model, tokens: np.ndarray) -> np.ndarray:
    model.eval()
    return model.hidden_states(torch.as_tensor(tokens[:, :-1])).numpy()


def _grid_seed(run: Run, seed: int, p: dict, kinds: list[str]) -> dict[str, dict]:
    rng = np.random.default_rng([seed, 11])
    kw = {"size": p["grid"], "n_colours": p["colours"], "p_obs": p["p_obs"]}
    train_walk = grid_walk(p["train_sequences"], p["length"], rng=rng, **kw)
    test_walk = grid_walk(p["test_sequences"], p["length"], rng=rng, **kw)
    long_walk = grid_walk(p["long_sequences"], 2 * p["length"], rng=rng, **kw)
    vocab = train_walk.tokenizer.vocab_size
    cfg = GPTConfig(
        vocab_size=vocab,
        context=2 * p["length"],
        n_layer=p["n_layer"],
        n_head=4,
        d_model=p["d_model"],
        positions=p["positions"],
    )
    out = {"oracle": oracle_loss(test_walk, p["p_obs"]), "oracle_long": oracle_loss(long_walk, p["p_obs"])}
    n_probe = p["test_sequences"] // 2
    for kind in kinds:
        torch.manual_seed(seed)
        model = _model(kind, cfg, p)
        tc = TrainConfig(steps=p["steps"], batch_size=p["batch_size"], lr=p["lr"], seed=seed)
        res = train(
            model,
            SequenceDataset(train_walk.tokens),
            tc,
            val=SequenceDataset(test_walk.tokens),
            progress=False,
        )
        H = _latents(model, test_walk.tokens)
        cells = test_walk.cells[:, :-1]
        flat = H.reshape(-1, H.shape[-1])
        m = p["probe_positions"]  # first m positions of each half (split by sequence)
        probe = linear_probe_accuracy(
            H[:n_probe].reshape(-1, H.shape[-1])[:m],
            cells[:n_probe].reshape(-1)[:m],
            H[n_probe:].reshape(-1, H.shape[-1])[:m],
            cells[n_probe:].reshape(-1)[:m],
        )
        row = {
            "val_loss": res.val_loss if res.finite else math.inf,
            "long_loss": evaluate(model, SequenceDataset(long_walk.tokens))["loss"]
            if res.finite
            else math.inf,
            "effective_rank": effective_rank(flat[: p["rank_positions"]]),
            "probe_accuracy": probe,
            "latent_var": float(flat.var(axis=0).mean()),
            "tokens_per_second": res.tokens_per_second,
            "params_deployed": model.gpt.num_parameters()
            if hasattr(model, "gpt")
            else model.num_parameters(),
            "params_training": sum(q.numel() for q in model.parameters()),
        }
        if isinstance(model, NextLatModel):
            row.update(_speculative(model, test_walk.tokens, p))
        out[kind] = row
        run.log(
            f"seed {seed} {kind}: val {row['val_loss']:.4f} rank {row['effective_rank']:.1f} probe {probe:.3f}"
        )
    return out


def _speculative(model: NextLatModel, tokens: np.ndarray, p: dict) -> dict[str, float]:
    prompts = torch.as_tensor(tokens[: p["spec_prompts"], : p["spec_prompt_len"]])
    exact, accepted, saved, passes = 0, [], 0, 0
    for prompt in prompts:
        res = self_speculative_decode(model, prompt, p["spec_new_tokens"], draft=4)
        exact += int(torch.equal(res.tokens, greedy_decode(model, prompt, p["spec_new_tokens"])))
        accepted.extend(a for a, d in zip(res.accepted, res.drafted, strict=True) if d)
        saved += res.saved
        passes += res.forward_passes
    total = len(prompts) * p["spec_new_tokens"]
    return {
        "spec_exact_fraction": exact / len(prompts),
        "spec_mean_accepted": float(np.mean(accepted)) if accepted else 0.0,
        "spec_pass_saving": saved / total,
        "spec_tokens_per_pass": total / passes,
    }


def _path_star(run: Run, seed: int, p: dict) -> dict[str, float]:
    rng = np.random.default_rng([seed, 12])
    kw = {"degree": p["ps_degree"], "arm_length": p["ps_arm"], "n_nodes": p["ps_nodes"]}
    train_ps = path_star(p["ps_train"], rng=rng, **kw)
    test_ps = path_star(p["ps_test"], rng=rng, **kw)
    L = train_ps.tokens.shape[1]
    cfg = GPTConfig(
        vocab_size=p["ps_nodes"] + 3, context=L, n_layer=p["ps_layers"], n_head=4, d_model=p["ps_d_model"]
    )
    out = {}
    for kind in ("GPT", "NextLat"):
        torch.manual_seed(seed)
        model = _model(kind, cfg, p)
        tc = TrainConfig(steps=p["ps_steps"], batch_size=p["batch_size"] * 2, lr=p["lr"], seed=seed)
        train(model, SequenceDataset(train_ps.tokens, loss_mask=train_ps.answer_mask), tc, progress=False)
        model.eval()
        with torch.no_grad():
            logits = model(torch.as_tensor(test_ps.tokens[:, :-1]))
        pred = logits[:, test_ps.first_step].argmax(-1).numpy()
        out[kind] = float((pred == test_ps.tokens[:, test_ps.first_step + 1]).mean())
        run.log(f"path-star seed {seed} {kind}: first-step accuracy {out[kind]:.3f}")
    return out


def run(run: Run) -> None:
    full = not run.quick
    p = {
        "grid": run.param("grid", quick=6),
        "colours": run.param("colours", quick=3),
        "p_obs": run.param("p_obs", quick=0.2),
        "length": run.param("length", quick=64),
        "train_sequences": run.param("train_sequences", quick=8000),
        "test_sequences": run.param("test_sequences", quick=256, full=512),
        "long_sequences": run.param("long_sequences", quick=128, full=256),
        "steps": run.param("steps", quick=600, full=1000),
        "batch_size": run.param("batch_size", quick=16),
        "d_model": run.param("d_model", quick=64),
        "n_layer": run.param("n_layer", quick=1, full=2),
        "positions": run.param("positions", quick="none"),
        "lr": run.param("lr", quick=3e-3),
        "lambda_h": run.param("lambda_h", quick=1.0),
        "lambda_kl": run.param("lambda_kl", quick=0.5),
        "rank_positions": run.param("rank_positions", quick=4096),
        "probe_positions": run.param("probe_positions", quick=3000, full=8000),
        "spec_prompts": run.param("spec_prompts", quick=8, full=32),
        "spec_prompt_len": run.param("spec_prompt_len", quick=8),
        "spec_new_tokens": run.param("spec_new_tokens", quick=24, full=48),
    }
    core = ["GPT", "NextLat"]
    # context rows, first seed only (CPU budget): the MTP baseline, a longer horizon, weaker latent losses
    extras = ["MTP-2", "NextLat d=4", "NextLat lambda/4"] if full else []
    kinds = core + extras
    seeds = [run.seed] if run.quick else run.seeds(run.param("seeds", quick=1, full=3))
    results = [
        _grid_seed(run, s, p, kinds if i == 0 else core) for i, s in enumerate(run.progress(seeds, "seeds"))
    ]

    def col(kind: str, key: str) -> list[float]:
        return [r[kind][key] for r in results if kind in r]

    rows = []
    for kind in kinds:
        rows.append(
            {
                "model": kind,
                "held-out NTP loss": float(np.mean(col(kind, "val_loss"))),
                "NTP loss, 2x longer": float(np.mean(col(kind, "long_loss"))),
                "effective rank of h_t": float(np.mean(col(kind, "effective_rank"))),
                "probe accuracy (true cell)": float(np.mean(col(kind, "probe_accuracy"))),
                "latent variance": float(np.mean(col(kind, "latent_var"))),
                "params (deployed)": results[0][kind]["params_deployed"],
                "params (training)": results[0][kind]["params_training"],
                "training tokens/s": float(np.median(col(kind, "tokens_per_second"))),
            }
        )
    rows.append(
        {
            "model": "Bayes-optimal (knows the cell)",
            "held-out NTP loss": float(np.mean([r["oracle"] for r in results])),
            "NTP loss, 2x longer": float(np.mean([r["oracle_long"] for r in results])),
        }
    )
    run.table(
        rows,
        name="grid_walk",
        caption="Hidden-grid walk, means over seeds (MTP-2 and NextLat d=4: first seed only); same data, batches, steps",
    )

    gpt, nl = "GPT", "NextLat"
    ratio = [a / b for a, b in zip(col(nl, "val_loss"), col(gpt, "val_loss"), strict=True)]
    run.check("ntp_loss_ratio", ratio)
    rank_ratio = [a / b for a, b in zip(col(nl, "effective_rank"), col(gpt, "effective_rank"), strict=True)]
    run.metric("rank_gpt", float(np.mean(col(gpt, "effective_rank"))))
    run.metric("rank_nextlat", float(np.mean(col(nl, "effective_rank"))))
    run.metric("probe_gpt", float(np.mean(col(gpt, "probe_accuracy"))))
    run.metric("probe_nextlat", float(np.mean(col(nl, "probe_accuracy"))))
    run.metric("val_gpt", float(np.mean(col(gpt, "val_loss"))))
    run.metric("val_nextlat", float(np.mean(col(nl, "val_loss"))))
    run.metric("oracle_loss", float(np.mean([r["oracle"] for r in results])))
    # a lower effective rank is a more compact belief state only if the latents still carry the state
    run.check(
        "latents_keep_the_state",
        [a / b for a, b in zip(col(nl, "probe_accuracy"), col(gpt, "probe_accuracy"), strict=True)],
    )
    run.check("effective_rank_ratio", rank_ratio)
    if min(rank_ratio) <= 0.8 and np.mean(col(nl, "probe_accuracy")) < np.mean(col(gpt, "probe_accuracy")):
        run.note(
            "NextLat's lower effective rank comes with a lower probe accuracy and a smaller latent variance: "
            "compression by partial collapse of an under-trained model, not a more compact world model."
        )
    run.check(
        "probe_accuracy_gain",
        [a - b for a, b in zip(col(nl, "probe_accuracy"), col(gpt, "probe_accuracy"), strict=True)],
    )
    run.check("speculative_exact", min(col(nl, "spec_exact_fraction")))
    run.metric("spec_pass_saving", float(np.mean(col(nl, "spec_pass_saving"))))
    run.metric("spec_tokens_per_pass", float(np.mean(col(nl, "spec_tokens_per_pass"))))
    run.metric("spec_mean_accepted", float(np.mean(col(nl, "spec_mean_accepted"))))
    run.metric("latent_var_gpt", float(np.mean(col(gpt, "latent_var"))))
    run.metric("latent_var_nextlat", float(np.mean(col(nl, "latent_var"))))
    if full:
        run.check("speculative_accepted", col(nl, "spec_mean_accepted"))
        run.metric("long_gpt", float(np.mean(col(gpt, "long_loss"))))
        run.metric("long_nextlat", float(np.mean(col(nl, "long_loss"))))
        run.check(
            "long_sequence_gap",
            [a - b for a, b in zip(col(nl, "long_loss"), col(gpt, "long_loss"), strict=True)],
        )
        run.metric("rank_mtp", float(np.mean(col("MTP-2", "effective_rank"))))
        run.metric("probe_mtp", float(np.mean(col("MTP-2", "probe_accuracy"))))
        run.metric("rank_nextlat_d4", float(np.mean(col("NextLat d=4", "effective_rank"))))
        first = results[0]
        for kind, key in (("NextLat d=4", "d4"), ("NextLat lambda/4", "quarter_lambda"), ("MTP-2", "mtp")):
            run.metric(f"ntp_ratio_{key}_first_seed", first[kind]["val_loss"] / first[gpt]["val_loss"])
            run.metric(
                f"rank_ratio_{key}_first_seed", first[kind]["effective_rank"] / first[gpt]["effective_rank"]
            )
            run.metric(
                f"probe_gain_{key}_first_seed", first[kind]["probe_accuracy"] - first[gpt]["probe_accuracy"]
            )
        run.note(
            "Context rows (first seed, same data and steps as GPT): NextLat with horizon 4 and NextLat with both "
            "latent-loss weights divided by 4 show whether the digest's d = 1, lambda_h = 1, lambda_KL = 0.5 "
            "setting collapses because its latent losses are too strong at this scale (see the ntp_ratio_*, "
            "rank_ratio_* and probe_gain_* metrics)."
        )
        ps_p = {
            **p,
            "ps_degree": run.param("ps_degree", quick=3),
            "ps_arm": run.param("ps_arm", quick=5),
            "ps_nodes": run.param("ps_nodes", quick=40),
            "ps_train": run.param("ps_train", quick=20000),
            "ps_test": run.param("ps_test", quick=1000),
            "ps_steps": run.param("ps_steps", quick=1000),
            "ps_layers": run.param("ps_layers", quick=2),
            "ps_d_model": run.param("ps_d_model", quick=64),
        }
        ps = [_path_star(run, seeds[0], ps_p)]  # one seed (CPU budget)
        run.table(
            [
                {
                    "model": k,
                    "first-step accuracy": float(np.mean([r[k] for r in ps])),
                    "chance (1/degree)": 1 / ps_p["ps_degree"],
                }
                for k in ("GPT", "NextLat")
            ],
            name="path_star",
            caption="Path-star graphs, accuracy of the first step after the centre (means over seeds)",
        )
        run.metric("path_star_gpt", float(np.mean([r["GPT"] for r in ps])))
        run.metric("path_star_nextlat", float(np.mean([r["NextLat"] for r in ps])))
        run.check("path_star_gain", [r["NextLat"] - r["GPT"] for r in ps])

    fig, axes = plt.subplots(1, 3, figsize=(11, 3.3))
    for ax, key, label in zip(
        axes,
        ("val_loss", "effective_rank", "probe_accuracy"),
        ("held-out NTP loss", "effective rank", "probe accuracy"),
        strict=True,
    ):
        ax.bar(
            kinds,
            [np.mean(col(k, key)) for k in kinds],
            color=["#888", "#1f77b4", "#aaa", "#5fa2dd", "#9ecae1"][: len(kinds)],
        )
        ax.set_title(label)
        ax.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    run.figure(fig, "grid_walk_metrics", caption="GPT vs NextLat on the hidden-grid walk")
