"""Reproduction (digest ``nota-cil``): global normalisation of the accumulated adapter update improves
rehearsal-free class-incremental learning for LoRA and MPO adapters, keeps ||W_T - W0||_F fixed, does not let
forgetting grow faster with the number of tasks than task-wise normalisation, and NoTA needs fewer stored
parameters than LoRA at equal accuracy; H-NoTA is not worse than NoTA.

Backbone: an MLP 64 -> 128 -> 128 (GELU) pre-trained label-free as a denoising autoencoder on every digits image
(or every sample of the synthetic stream), then frozen; adapters on both layers (MPO factorisation
64 = 4 x 4 x 4, 128 = 8 x 4 x 4, bond dimension 4; LoRA rank 4). Stream A: digits, 5 tasks x 2 classes, 3 class
orders. Stream B (full mode): 40 Gaussian classes in 32-D through a fixed random net into 64-D, 2-class tasks,
T in {5, 10, 20}. Every method: cosine classifier blocks, logits masked to the task's classes, Adam.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.datasets import load_digits

from neurips26.harness import Run, time_repeats

from .learner import ClassIncrementalLearner, SimpleCIL, pretrain_denoising_autoencoder, run_stream
from .streams import digits_stream, gaussian_class_data, gaussian_stream

METHODS = {
    "LoRA-seq": dict(adapter="lora", normalization="none", shared=True),
    "LoRA-none": dict(adapter="lora", normalization="none"),
    "LoRA-task (SD-LoRA)": dict(adapter="lora", normalization="task"),
    "LoRA-global": dict(adapter="lora", normalization="global"),
    "MPO-none": dict(adapter="mpo", normalization="none"),
    "MPO-task": dict(adapter="mpo", normalization="task"),
    "NoTA (MPO-global)": dict(adapter="mpo", normalization="global"),
    "H-NoTA": dict(adapter="mpo", normalization="global", modulation=True),
}
LORA_NONE, LORA_TASK, LORA_GLOBAL = "LoRA-seq", "LoRA-task (SD-LoRA)", "LoRA-global"
MPO_NONE, MPO_TASK, NOTA, HNOTA = "MPO-none", "MPO-task", "NoTA (MPO-global)", "H-NoTA"


def _stream_results(tasks, tests, backbone, methods, epochs, lr, seed, rank=4) -> dict:
    out = {"SimpleCIL": run_stream(SimpleCIL(backbone), tasks, tests)}
    for name in methods:
        learner = ClassIncrementalLearner(
            backbone, epochs=epochs, lr=lr, rank=rank, seed=seed, **METHODS[name]
        )
        out[name] = run_stream(learner, tasks, tests)
    return out


def _row(stream: str, order: int, method: str, r) -> dict:
    return {
        "stream": stream,
        "order": order,
        "method": method,
        "A_T": r.final_accuracy,
        "avg incremental acc": r.average_incremental_accuracy,
        "forgetting F_T": r.forgetting,
        "stored adapter params": r.stored_parameters,
        "||W_T - W0||_F (layer 1) per task": [round(n[0], 4) for n in r.update_norms] or None,
    }


def lr_tag(lr: float) -> str:
    """1e-3 -> 'lr1e_3', 3e-3 -> 'lr3e_3' (check and metric names)."""
    mant, exp = f"{lr:.0e}".split("e")
    return f"lr{mant}e_{int(exp.lstrip('-+'))}" if lr < 1 else f"lr{lr:g}"


# comparisons also gated at the top learning rate alone (their "+2 points" margins there clear the seed spread;
# the "not worse than task-wise" margins at 1e-2 change sign from seed to seed and are recorded, not gated)
GATED_AT_TOP_LR = ("lora_global_vs_none_digits", "mpo_global_vs_none_digits", "hnota_vs_nota_digits")

# the comparison of every quick check, at every adapter learning rate of the declared range
GRID = [LORA_NONE, LORA_TASK, LORA_GLOBAL, MPO_TASK, NOTA]


def _cache_check(backbone, tasks, tests, seed) -> tuple[float, float]:
    """NoTA after every task: max |logit difference| cached vs uncached merged weights, and the predict-time
    ratio uncached / cached (medians over repeats)."""
    learner = ClassIncrementalLearner(backbone, epochs=1, lr=1e-2, seed=seed)
    for X, y in tasks:
        learner.fit_task(X, y)
    x = torch.from_numpy(tests[0][0])

    def logits(cache: bool) -> torch.Tensor:
        for layer in learner.adapted:
            layer.cache = cache
        with torch.no_grad():
            return learner._logits(x)

    diff = float((logits(True) - logits(False)).abs().max())
    times = {}
    for cache in (True, False):
        times[cache] = time_repeats(lambda c=cache: logits(c), repeat=15)["min"]
    for layer in learner.adapted:
        layer.cache = True
    return diff, times[False] / times[True]


def run(run: Run) -> None:
    torch.set_num_threads(1)
    epochs = run.param("epochs_per_task", quick=10, full=20)
    lrs = run.param("adapter_lrs", quick=[1e-3, 3e-3, 1e-2])
    lr = run.param("adapter_lr_long_stream", quick=1e-2)  # stream B and the rank sweep (full mode)
    n_orders = run.param("class_orders", quick=3)
    methods = run.param("methods_at_lr_1e-2", quick=GRID, full=list(METHODS))
    orders = list(
        range(n_orders)
    )  # the digest's class orders, fixed; run.seed drives initialisation and batches
    init = run.seed * 1000
    digits = (load_digits().data / 16.0).astype(np.float32)
    with run.timer("pretrain_backbone"):
        backbone = pretrain_denoising_autoencoder(
            digits, epochs=run.param("pretrain_epochs", quick=30), seed=0
        )

    rows = []
    norm_dev = 0.0
    by_lr: dict[float, list[dict]] = {}
    with run.timer("stream_A"):
        for lr_ in lrs:
            names = methods if lr_ == lr else (list(METHODS) if run.full else GRID)
            by_lr[lr_] = []
            for o in orders:
                tasks, tests = digits_stream(order_seed=o)
                res = _stream_results(tasks, tests, backbone, names, epochs, lr_, seed=init + o)
                by_lr[lr_].append(res)
                rows += [_row(f"digits, adapter lr {lr_:g}", o, m, r) for m, r in res.items()]
                for m in (LORA_GLOBAL, NOTA, HNOTA):
                    if m in res:
                        norms = np.asarray(res[m].update_norms)  # tasks x layers
                        norm_dev = max(norm_dev, float(np.max(np.abs(norms - norms[:1]) / norms[:1])))
    per_order = by_lr[lr]

    def mean_acc(name: str, results=per_order) -> float:
        return float(np.mean([r[name].final_accuracy for r in results]))

    def mean_f(name: str, results=per_order) -> float:
        return float(np.mean([r[name].forgetting for r in results]))

    def key(m: str) -> str:
        return m.split(" ")[0].lower().replace("-", "_")

    run.check("norm_constant_under_global", norm_dev)
    # precondition: every adapter method learns each task (accuracy on a task's classes right after it)
    plasticity = {
        (lr_, m): float(np.mean([r[m].plasticity for r in res])) for lr_, res in by_lr.items() for m in res[0]
    }
    adapter_plasticity = [v for (_, m), v in plasticity.items() if m != "SimpleCIL"]
    pairs = [
        ("lora_global_vs_task_digits", LORA_GLOBAL, LORA_TASK),
        ("lora_global_vs_none_digits", LORA_GLOBAL, LORA_NONE),
        ("mpo_global_vs_task_digits", NOTA, MPO_TASK),
    ]
    if run.full:
        pairs += [("mpo_global_vs_none_digits", NOTA, MPO_NONE), ("hnota_vs_nota_digits", HNOTA, NOTA)]
    best_adapter = {}
    for lr_, res in by_lr.items():
        tag = lr_tag(lr_)
        for m in res[0]:
            run.metric(f"A_T_digits_{key(m)}_{tag}", mean_acc(m, res))
            run.metric(f"F_T_digits_{key(m)}_{tag}", mean_f(m, res))
            run.metric(f"A_T_digits_{key(m)}_{tag}_std", float(np.std([r[m].final_accuracy for r in res])))
        best_adapter[lr_] = max(mean_acc(m, res) for m in res[0] if m != "SimpleCIL")
        run.metric(
            f"simplecil_minus_best_adapter_digits_{tag}", mean_acc("SimpleCIL", res) - best_adapter[lr_]
        )
        for cid, a, b in pairs:
            per = [r[a].final_accuracy - r[b].final_accuracy for r in res]
            run.metric(f"{cid}_{tag}_per_order", per)
            run.metric(f"{cid}_{tag}", float(np.mean(per)))
            if lr_ == lr and cid in GATED_AT_TOP_LR:
                run.check(f"{cid}_{tag}", float(np.mean(per)))
    # the claim over the declared range: every (learning rate, class order) margin is a replicate
    for cid, a, b in pairs:
        run.check(
            f"{cid}_lr_range",
            [r[a].final_accuracy - r[b].final_accuracy for res in by_lr.values() for r in res],
        )
    run.metric("A_T_digits_simplecil", mean_acc("SimpleCIL"))
    run.metric("A_T_digits_best_adapter", max(best_adapter.values()))
    run.metric("simplecil_minus_best_adapter_digits", mean_acc("SimpleCIL") - max(best_adapter.values()))
    if "LoRA-none" in methods:
        run.metric("lora_none_per_task_gap_digits", mean_acc(LORA_GLOBAL) - mean_acc("LoRA-none"))
    run.metric("stored_params_nota", per_order[0][NOTA].stored_parameters)
    run.metric("stored_params_lora_rank4", per_order[0][LORA_GLOBAL].stored_parameters)

    # the merged weight is cached: same logits as rebuilding it, and the predict-time gain after 5 tasks
    tasks, tests = digits_stream(order_seed=0)
    diff, speedup = _cache_check(backbone, tasks, tests, seed=init)
    run.check("cached_forward_matches_uncached", diff)
    run.metric("predict_speedup_cached_vs_uncached_5_tasks", speedup)

    if run.full:
        # --- parameter efficiency: LoRA (global) at ranks 1, 2, 4, 8 against NoTA -----------------------------
        ranks = [1, 2, 4, 8]
        lora_acc, lora_params = {}, {}
        for rk in ranks:
            accs = []
            for o in orders:
                tasks, tests = digits_stream(order_seed=o)
                learner = ClassIncrementalLearner(
                    backbone, epochs=epochs, lr=lr, rank=rk, seed=init + o, **METHODS[LORA_GLOBAL]
                )
                r = run_stream(learner, tasks, tests)
                accs.append(r.final_accuracy)
                lora_params[rk] = r.stored_parameters
            lora_acc[rk] = float(np.mean(accs))
            rows.append(
                {
                    "stream": "digits",
                    "method": f"LoRA-global rank {rk}",
                    "A_T": lora_acc[rk],
                    "stored adapter params": lora_params[rk],
                }
            )
        nota_acc, nota_params = mean_acc(NOTA), per_order[0][NOTA].stored_parameters
        ok = [rk for rk in ranks if lora_acc[rk] >= nota_acc - 1.0]
        rank_needed = min(ok) if ok else max(ranks)
        run.metric("lora_rank_within_1pt_of_nota", rank_needed if ok else None)
        run.metric("lora_params_at_matching_rank", lora_params[rank_needed])
        run.metric("lora_rank1_A_T_digits", lora_acc[1])
        run.check("nota_param_ratio_vs_lora", nota_params / lora_params[rank_needed])

        # --- stream B: long synthetic stream -----------------------------------------------------------------
        Xg, yg = gaussian_class_data(seed=run.seed)
        gb = pretrain_denoising_autoencoder(Xg, epochs=30, seed=0)
        trend = {}
        for T in run.param("stream_B_tasks", quick=[5, 10, 20]):
            res_T = []
            for o in orders:
                tasks, tests = gaussian_stream(T, Xg, yg, order_seed=o)
                names = methods if T == 10 else [LORA_TASK, LORA_GLOBAL, MPO_TASK, NOTA]
                res = _stream_results(tasks, tests, gb, names, epochs, lr, seed=init + o)
                res_T.append(res)
                rows += [_row(f"gaussian T={T}", o, m, r) for m, r in res.items()]
            trend[T] = res_T
            adapter_plasticity += [float(np.mean([r[m].plasticity for r in res_T])) for m in names]
            for m in res_T[0]:
                run.metric(f"A_T_gauss{T}_{key(m)}", mean_acc(m, res_T))
                run.metric(f"F_T_gauss{T}_{key(m)}", mean_f(m, res_T))
        r10 = trend[10]
        run.check("lora_global_vs_task_gauss10", mean_acc(LORA_GLOBAL, r10) - mean_acc(LORA_TASK, r10))
        run.check("lora_global_vs_none_gauss10", mean_acc(LORA_GLOBAL, r10) - mean_acc(LORA_NONE, r10))
        run.check("mpo_global_vs_task_gauss10", mean_acc(NOTA, r10) - mean_acc(MPO_TASK, r10))
        run.check("mpo_global_vs_none_gauss10", mean_acc(NOTA, r10) - mean_acc(MPO_NONE, r10))
        run.check("hnota_vs_nota_gauss10", mean_acc(HNOTA, r10) - mean_acc(NOTA, r10))
        growth = {
            m: mean_f(m, trend[20]) - mean_f(m, trend[5]) for m in (NOTA, MPO_TASK, LORA_GLOBAL, LORA_TASK)
        }
        run.metric("forgetting_growth_nota", growth[NOTA])
        run.metric("forgetting_growth_mpo_task", growth[MPO_TASK])
        run.metric("forgetting_growth_lora_global", growth[LORA_GLOBAL])
        run.metric("forgetting_growth_lora_task", growth[LORA_TASK])
        run.check("trend_global_minus_task_mpo", growth[NOTA] - growth[MPO_TASK])
        run.check("trend_global_minus_task_lora", growth[LORA_GLOBAL] - growth[LORA_TASK])

    run.metric("min_new_task_accuracy_adapters", min(adapter_plasticity))
    run.check("adapters_learn_each_task", min(adapter_plasticity))
    run.table(
        rows,
        name="results",
        caption="Final average accuracy A_T (%), average incremental accuracy, "
        "forgetting F_T (mean drop from best, points), stored adapter parameters, per class order.",
    )
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    names = [m for m in METHODS if m in by_lr[lrs[0]][0]]
    width = 0.8 / len(lrs)
    for i, lr_ in enumerate(lrs):
        axes[0].bar(
            np.arange(len(names)) + i * width,
            [mean_acc(m, by_lr[lr_]) for m in names],
            width,
            yerr=[np.std([r[m].final_accuracy for r in by_lr[lr_]]) for m in names],
            label=f"adapter lr {lr_:g}",
        )
    axes[0].axhline(mean_acc("SimpleCIL"), color="k", ls="--", lw=1, label="SimpleCIL (no training)")
    axes[0].set_xticks(np.arange(len(names)) + 0.4 - width / 2, names, rotation=45, ha="right", fontsize=7)
    axes[0].set_ylabel("A_T on digits (%)")
    axes[0].legend(fontsize=7)
    for m in (LORA_NONE, LORA_TASK, LORA_GLOBAL, MPO_NONE, MPO_TASK, NOTA):
        if m not in per_order[0]:
            continue
        norms = np.mean([[n[1] for n in r[m].update_norms] for r in per_order], axis=0)
        axes[1].plot(range(1, len(norms) + 1), norms, marker="o", label=m)
    axes[1].set_xlabel("task")
    axes[1].set_ylabel(f"||W_t - W0||_F, layer 2, adapter lr {lr:g}")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    run.figure(
        fig,
        "accuracy_and_update_norm",
        caption="Left: final accuracy over 3 class orders (std bars) at each adapter learning rate of the declared "
        "range, against the training-free SimpleCIL (dashed). Right: the accumulated update's magnitude after "
        "each task: it grows with T without normalisation or with task-wise normalisation and stays at gamma "
        "under global normalisation.",
    )
