"""Reproduction (small scale): SMFSR's one-step noise-started SR on scikit-learn's 8x8 digits, 4x4 -> 8x8.

Digest ``smfsr``: the one-step SplitMeanFlow student's Digits-FID is <= 1.3x the 50-step teacher's and <= 0.5x the
teacher's 1-step Euler FID, below direct regression's with diversity > 0.02; stage 2 (GAN) lowers FID by >= 5%
at a PSNR cost <= 1 dB. Digits-FID is the Frechet distance in the penultimate features of a digit classifier
trained in the run on HR training images (no downloaded perceptual network); the reference set is the HR
training images. Each stochastic system's FID is the mean over ``draws`` noise draws of the whole test set.

Two preconditions gate every claim: the 50-step teacher closing all but 2% of the FID gap from bicubic down to the
floor FID(HR test, HR train),
and the student's FID moving by at most 10% between half and the whole distillation budget (a second student is
distilled for half the epochs, in full mode only). Full mode trains teacher and regression 300 epochs and distils
the student 600 (at 300 one seed's student still moved 11% from half its budget); at quick's 30 epochs the teacher
precondition is unmet and the student one is not measured (NaN: inconclusive).
"""

from __future__ import annotations

import math
import time

import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.datasets import load_digits

from neurips26.harness import Run

from ..modules import CNNClassifier, psnr, ssim, train_classifier
from .degradation import degrade, degrade_mean, frechet_distance
from .flows import (
    IntervalVelocityNet,
    euler_sample,
    train_flow_matching,
    train_gan_refinement,
    train_regression,
    train_splitmeanflow,
    upsample_condition,
)


def _one_seed(run: Run, seed: int, p: dict) -> tuple[dict, list[dict], dict]:
    X, y = load_digits(return_X_y=True)
    X = (X / 8.0 - 1.0).reshape(-1, 1, 8, 8).astype(np.float32)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(X))
    X, y = X[perm], y[perm]
    LR = degrade(X, rng)
    n_tr = p["n_train"]
    xtr, ctr, ytr = torch.tensor(X[:n_tr]), torch.tensor(LR[:n_tr]), y[:n_tr]
    xte, cte, yte = torch.tensor(X[n_tr:]), torch.tensor(LR[n_tr:]), y[n_tr:]
    torch.manual_seed(seed)

    clf = train_classifier(
        CNNClassifier(1, 10, widths=(16, 32)), xtr, ytr, epochs=15, batch_size=64, lr=3e-3, seed=seed
    )
    with torch.no_grad():
        ref = clf.features(xtr).numpy()
        floor = frechet_distance(clf.features(xte).numpy(), ref)  # the HR test images themselves

    def evaluate(images: list[torch.Tensor]) -> dict:
        """Metrics of one system from its ``draws`` outputs on the test set (one tensor per noise draw)."""
        with torch.no_grad():
            outs = [im.clamp(-1, 1) for im in images]
            fids = [frechet_distance(clf.features(o).numpy(), ref) for o in outs]
            acc = np.mean([(clf(o).argmax(1).numpy() == yte).mean() for o in outs])
        o = outs[0]
        stack = torch.stack(outs)
        return {
            "Digits-FID": float(np.mean(fids)),
            "PSNR": float(np.mean([psnr(q, xte, 2.0).mean().item() for q in outs])),
            "SSIM": float(np.mean([ssim(q, xte, 2.0).mean().item() for q in outs])),
            "classifier acc": float(acc),
            "diversity": float(stack.std(0, unbiased=False).mean()) if len(outs) > 1 else 0.0,
            "LR-consistency RMSE": float(np.sqrt(np.mean((degrade_mean(o.numpy()) - cte.numpy()) ** 2))),
        }

    draws = p["draws"]
    gen = torch.Generator().manual_seed(seed + 7)
    noises = [torch.randn(xte.shape, generator=gen) for _ in range(draws)]
    ones, zeros = torch.ones(len(xte)), torch.zeros(len(xte))
    results, secs = {}, {}

    results["bicubic"] = evaluate([upsample_condition(cte, 8)])
    secs["bicubic"] = 0.0
    teacher = IntervalVelocityNet(8)
    with run.timer(f"teacher s{seed}", clock="cpu"):
        train_flow_matching(teacher, xtr, ctr, epochs=p["teacher_epochs"], seed=seed)
    regression = IntervalVelocityNet(8)
    with run.timer(f"regression s{seed}", clock="cpu"):
        train_regression(regression, xtr, ctr, epochs=p["teacher_epochs"], seed=seed)

    def distil(epochs: int) -> IntervalVelocityNet:
        student = IntervalVelocityNet(8)
        student.load_state_dict(teacher.state_dict())
        return train_splitmeanflow(
            student, teacher, xtr, ctr, epochs=epochs, seed=seed, boundary_fraction=p["boundary_fraction"]
        )

    with run.timer(f"splitmeanflow s{seed}", clock="cpu"):
        student = distil(p["student_epochs"])
    half = None
    if p["plateau_check"]:
        with run.timer(f"splitmeanflow half budget s{seed}", clock="cpu"):
            half = distil(max(1, p["student_epochs"] // 2))

    def timed(fn) -> tuple[list[torch.Tensor], float]:
        t0 = time.process_time()
        with torch.no_grad():
            out = [fn(e) for e in noises]
        return out, (time.process_time() - t0) / (draws * len(xte))

    with torch.no_grad():
        reg_out, secs["direct regression"] = timed(
            lambda e: regression(torch.zeros_like(e), zeros, ones, cte)
        )
    results["direct regression"] = evaluate(reg_out[:1])
    for steps in (50, 1):
        out, secs[f"teacher {steps} NFE"] = timed(lambda e, s=steps: euler_sample(teacher, e, cte, s))
        results[f"teacher {steps} NFE"] = evaluate(out)
    out, secs["SMFSR stage 1"] = timed(lambda e: e + student(e, zeros, ones, cte))
    results["SMFSR stage 1"] = evaluate(out)
    fid_half = math.nan  # quick: not measured
    if half is not None:
        with torch.no_grad():
            fid_half = evaluate([e + half(e, zeros, ones, cte) for e in noises])["Digits-FID"]
    training = {"fid_floor": floor, "fid_student_half_budget": fid_half}
    samples = {
        "LR (bicubic)": upsample_condition(cte, 8)[:6],
        "SMFSR stage 1": torch.stack([o[:6] for o in out[:3]]),
    }
    if p["gan_epochs"]:
        with run.timer(f"gan s{seed}", clock="cpu"):
            train_gan_refinement(
                student,
                teacher,
                xtr,
                ctr,
                epochs=p["gan_epochs"],
                lr=p["gan_lr"],
                fidelity_weight=p["fidelity_weight"],
                seed=seed,
            )
        out, secs["SMFSR stage 1+2"] = timed(lambda e: e + student(e, zeros, ones, cte))
        results["SMFSR stage 1+2"] = evaluate(out)
    nfe = {
        "bicubic": 0,
        "direct regression": 1,
        "teacher 50 NFE": 50,
        "teacher 1 NFE": 1,
        "SMFSR stage 1": 1,
        "SMFSR stage 1+2": 1,
    }
    rows = [
        {"system": k, "seed": seed, "NFE": nfe[k], **v, "ms/image": 1000 * secs[k]}
        for k, v in results.items()
    ]
    samples["HR"] = xte[:6]
    return results, rows, samples, training


def run(run: Run) -> None:
    torch.set_num_threads(1)
    p = {
        "n_train": run.param("n_train", 1400),
        "teacher_epochs": run.param("teacher_epochs", quick=30, full=300),
        "student_epochs": run.param("student_epochs", quick=30, full=600),
        "boundary_fraction": run.param("boundary_fraction", 0.25),
        "draws": run.param("draws", 8),
        "gan_epochs": run.param("gan_epochs", quick=0, full=10),
        "plateau_check": run.param("plateau_check", quick=False, full=True),
        "gan_lr": run.param("gan_lr", 5e-5),
        "fidelity_weight": run.param("fidelity_weight", 3.0),
    }
    n_seeds = run.param("n_seeds", quick=1, full=5)
    seeds = [run.seed] if n_seeds == 1 else run.seeds(n_seeds)
    per_seed, rows, trained = [], [], []
    for s in seeds:
        res, r, samples, tr = _one_seed(run, s, p)
        per_seed.append(res)
        rows += r
        trained.append(tr)

    def vals(system: str, key: str = "Digits-FID") -> list[float]:
        return [res[system][key] for res in per_seed]

    def mean(system: str, key: str = "Digits-FID") -> float:
        return float(np.mean(vals(system, key)))

    for system in per_seed[0]:
        tag = system.lower().replace(" ", "_").replace("+", "").replace("__", "_")
        run.metric(f"fid_{tag}", mean(system))
        run.metric(f"psnr_{tag}", mean(system, "PSNR"))
    ours = vals("SMFSR stage 1")
    floors = [t["fid_floor"] for t in trained]
    halves = [t["fid_student_half_budget"] for t in trained]
    # the share of the FID gap from the trivial upsampler (bicubic) down to the floor that the teacher leaves open
    teacher_gap_left = [(a - f) / (b - f) for a, b, f in zip(vals("teacher 50 NFE"), vals("bicubic"), floors)]
    student_change = [abs(a - b) / a for a, b in zip(ours, halves)]
    r50 = [a / b for a, b in zip(ours, vals("teacher 50 NFE"))]
    r1 = [a / b for a, b in zip(ours, vals("teacher 1 NFE"))]
    diversity = vals("SMFSR stage 1", "diversity")
    # the digest's one criterion "FID below regression's, with diversity > 0.02": a seed whose samples do not
    # differ (diversity <= 0.02) counts as failing whatever its FID
    gap_reg = [a - b if d > 0.02 else math.inf for a, b, d in zip(ours, vals("direct regression"), diversity)]
    run.metric("fid_floor_hr_test", float(np.mean(floors)))
    run.metric("teacher50_gap_left_mean", float(np.mean(teacher_gap_left)))
    run.metric("fid_smfsr_stage_1_half_budget", float(np.mean(halves)))
    run.metric("student_fid_change_mean", float(np.mean(student_change)))
    run.metric("fid_ratio_vs_teacher50_mean", float(np.mean(r50)))
    run.metric("diversity_smfsr", mean("SMFSR stage 1", "diversity"))
    run.metric("diversity_teacher50", mean("teacher 50 NFE", "diversity"))
    run.metric("best_psnr_system", max(per_seed[0], key=lambda k: per_seed[0][k]["PSNR"]))
    run.check("teacher_trained", teacher_gap_left)
    run.check("student_at_plateau", student_change)
    run.check("fid_ratio_vs_teacher50", r50)
    run.check("fid_ratio_vs_teacher1", r1)
    run.check("fid_gap_vs_regression", gap_reg)
    if p["gan_epochs"]:
        run.check("stage2_fid_ratio", [a / b for a, b in zip(vals("SMFSR stage 1+2"), ours)])
        run.check(
            "stage2_psnr_drop",
            [a - b for a, b in zip(vals("SMFSR stage 1", "PSNR"), vals("SMFSR stage 1+2", "PSNR"))],
        )

    run.table(
        rows,
        name="results",
        caption="Digits 4x4 -> 8x8; FID, PSNR, SSIM, accuracy and diversity over noise draws",
    )
    fig, axes = plt.subplots(5, 6, figsize=(6, 5.2))
    grid = [samples["LR (bicubic)"], *samples["SMFSR stage 1"], samples["HR"]]
    names = ["bicubic LR", "SMFSR draw 1", "SMFSR draw 2", "SMFSR draw 3", "HR"]
    for r, (imgs, name) in enumerate(zip(grid, names)):
        for c in range(6):
            axes[r, c].imshow(imgs[c, 0].numpy(), cmap="gray", vmin=-1, vmax=1)
            axes[r, c].set_xticks([])
            axes[r, c].set_yticks([])
        axes[r, 0].set_ylabel(name, fontsize=7)
    fig.tight_layout()
    run.figure(fig, "samples", caption="One-step SMFSR samples (three noise draws) against bicubic and HR")
