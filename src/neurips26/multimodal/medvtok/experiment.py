"""Reproduction (small scale): MedVTok's slice-differential regularisation, its unified 2-D/3-D codebook and its
multi-expert representation alignment on synthetic phantoms, upsampled digits and textured disks.

Digest ``medvtok``: SDR lowers the inter-slice difference error (ISDE) by >= 15% against the base tokenizer with a
3-D PSNR drop <= 0.5 dB; one tokenizer's 2-D PSNR is within 1 dB of a 2-D-only tokenizer of equal size; MERA's
mean linear-probe accuracy over three tasks beats single-expert alignment by >= 3 points and averaged-target
alignment by >= 1 point, with no task more than 2 points below its best variant (full mode).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch
from scipy.ndimage import zoom
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from neurips26.harness import Run

from ...vision.modules import psnr
from .experts import CNNExpert, fit_expert, texture_features
from .phantoms import make_phantoms, make_textured_disks
from .tokenizer import (
    MedVTokenizer,
    MultiExpertAlignment,
    codebook_usage,
    inter_slice_difference_error,
    train_tokenizer,
)


def _slices(a) -> torch.Tensor:
    t = torch.as_tensor(a)
    return t.transpose(1, 2).reshape(-1, t.shape[1], *t.shape[-2:]) if t.ndim == 5 else t


def _digits(size: int) -> tuple[np.ndarray, np.ndarray]:
    d = load_digits()
    x = zoom(d.images.astype(np.float32) / 8.0 - 1.0, (1, size / 8, size / 8), order=1)[:, None]
    return x.astype(np.float32), d.target


MERA_VARIANTS = ("no alignment", "single expert", "averaged target", "averaged target (masked)", "MERA")
EXPLORED = ("MERA (linear heads)",)  # recorded beside the declared variants, never gated
PROBE_TASKS = ("digit", "lesion", "texture")


def _probe(train_x: np.ndarray, train_y, test_x: np.ndarray, test_y) -> float:
    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    return float(clf.fit(train_x, train_y).score(test_x, test_y))


def _zscore(a: np.ndarray) -> np.ndarray:
    return ((a - a.mean(0)) / (a.std(0) + 1e-6)).astype(np.float32)


def _mera_replicate(seed: int, P: dict) -> dict:
    """One replicate of the alignment study: three modalities, three frozen experts, one tokenizer per variant
    trained on all three modalities, and linear probes on its frozen pooled features."""
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    S, nv, nt, ni = P["size"], P["mera_volumes_train"], P["mera_volumes_test"], P["mera_images_train"]
    ph = make_phantoms(nv + nt, P["slices"], S, seed=seed)
    dx, dy = _digits(S)
    perm = rng.permutation(len(dx))
    d_tr, d_te = perm[:ni], perm[ni : ni + P["mera_images_test"]]
    tx, ty = make_textured_disks(ni + P["mera_images_test"], S, seed=seed + 1)
    data = {  # task: (train x, train y, test x, test y)
        "digit": (dx[d_tr], dy[d_tr], dx[d_te], dy[d_te]),
        "lesion": (ph.volumes[:nv], ph.lesion[:nv], ph.volumes[nv:], ph.lesion[nv:]),
        "texture": (tx[:ni], ty[:ni], tx[ni:], ty[ni:]),
    }
    # frozen experts, genuinely different: 2-D label semantics, 3-D label semantics, a hand-made texture extractor
    e_digit = fit_expert(CNNExpert(10), dx[d_tr], dy[d_tr], epochs=P["expert_epochs"], seed=seed)
    e_lesion = fit_expert(
        CNNExpert(2, widths=(8, 16), dims=3), *data["lesion"][:2], epochs=P["expert_epochs"], seed=seed
    )

    def accuracy(expert: CNNExpert, x, y) -> float:
        with torch.no_grad():
            return float((expert(torch.tensor(x)).argmax(1).numpy() == y).mean())

    out: dict = {
        "expert_accuracy": {
            "digit": accuracy(e_digit, *data["digit"][2:]),
            "lesion": accuracy(e_lesion, *data["lesion"][2:]),
        }
    }

    # every expert computed on every modality (volumes slice by slice, images as 1-slice volumes), then z-scored
    # per expert and modality on the training samples
    def per_slice(fn, v: np.ndarray) -> np.ndarray:
        n, c, d = v.shape[:3]
        return fn(v.transpose(0, 2, 1, 3, 4).reshape(n * d, c, S, S)).reshape(n, d, -1).mean(1)

    experts = {  # named by the task (and modality) each one was made for: that is its mask
        "digit": lambda x: e_digit.features(x) if x.ndim == 4 else per_slice(e_digit.features, x),
        "lesion": lambda x: e_lesion.features(x[:, :, None] if x.ndim == 4 else x),
        "texture": lambda x: texture_features(x) if x.ndim == 4 else per_slice(texture_features, x),
    }
    images = np.concatenate([data["digit"][0], data["texture"][0]])  # the two 2-D modalities, digits first
    modality_of_image = np.array(["digit"] * ni + ["texture"] * ni)
    vols = data["lesion"][0]
    all_img, all_vol = {}, {}
    for e, fn in experts.items():
        f_img = fn(images)
        for m in ("digit", "texture"):
            f_img[modality_of_image == m] = _zscore(f_img[modality_of_image == m])
        all_img[e], all_vol[e] = f_img.astype(np.float32), _zscore(fn(vols))
    masked_img = {e: np.where((modality_of_image == e)[:, None], t, np.nan) for e, t in all_img.items()}
    masked_vol = {e: t if e == "lesion" else np.full_like(t, np.nan) for e, t in all_vol.items()}
    dims = {e: t.shape[1] for e, t in all_img.items()}

    for name in MERA_VARIANTS + EXPLORED:
        torch.manual_seed(seed)
        tok = MedVTokenizer(widths=(16, 32), n_codes=P["n_codes"], code_dim=16, n_codebooks=2)
        kw: dict = {}
        if name == "single expert":  # the 2-D label expert only, on its own modality
            kw = dict(
                alignment=MultiExpertAlignment(tok.quant_dim, {"digit": dims["digit"]}),
                image_targets={"digit": masked_img["digit"]},
            )
        elif name == "averaged target":  # the digest's baseline: one head to the mean of all expert targets
            kw = dict(
                alignment=MultiExpertAlignment(tok.quant_dim, dims, mode="averaged"),
                image_targets=all_img,
                volume_targets=all_vol,
            )
        elif name != "no alignment":  # MERA, and the averaged head restricted to the applicable experts
            mode = "averaged" if name.startswith("averaged") else "per_expert"
            hidden = None if name == "MERA (linear heads)" else 128
            kw = dict(
                alignment=MultiExpertAlignment(tok.quant_dim, dims, mode=mode, hidden=hidden),
                image_targets=masked_img,
                volume_targets=masked_vol,
            )
        train_tokenizer(
            tok, vols, images=images, epochs=P["mera_epochs"], seed=seed, align_weight=P["align_weight"], **kw
        )
        row = {
            task: _probe(tok.pooled_features(xtr).numpy(), ytr, tok.pooled_features(xte).numpy(), yte)
            for task, (xtr, ytr, xte, yte) in data.items()
        }
        with torch.no_grad():
            rec_d = tok(torch.tensor(data["digit"][2]))[0]
            rec_v = tok(torch.tensor(data["lesion"][2]))[0]
        row["2-D PSNR"] = psnr(rec_d, torch.tensor(data["digit"][2]), 2.0).mean().item()
        row["3-D PSNR"] = psnr(_slices(rec_v), _slices(data["lesion"][2]), 2.0).mean().item()
        out[name] = row
    return out


def _alignment_study(run: Run, P: dict) -> None:
    """Multi-expert representation alignment against its baselines (full mode: quick's 30 s cannot hold five
    more tokenizers per replicate)."""
    n_rep = run.param("mera_replicates", quick=0, full=3)
    if not n_rep:
        return
    P = P | {
        "mera_volumes_train": run.param("mera_volumes_train", 512),
        "mera_volumes_test": run.param("mera_volumes_test", 512),
        "mera_images_train": run.param("mera_images_train", 600),
        "mera_images_test": run.param("mera_images_test", 900),
        "expert_epochs": run.param("expert_epochs", 20),
        "mera_epochs": run.param("mera_epochs", 10),
        "align_weight": run.param("align_weight", 1.0),
    }
    reps = []
    for i, seed in enumerate(run.seeds(n_rep)):
        with run.timer(f"alignment replicate {i}", clock="cpu"):
            reps.append(_mera_replicate(seed, P))
    mean_acc = {v: [float(np.mean([r[v][t] for t in PROBE_TASKS])) for r in reps] for v in MERA_VARIANTS}
    mean_acc |= {v: [float(np.mean([r[v][t] for t in PROBE_TASKS])) for r in reps] for v in EXPLORED}
    rows = []
    for v in MERA_VARIANTS + EXPLORED:
        row = {"variant": v} | {t: float(np.mean([r[v][t] for r in reps])) for t in PROBE_TASKS}
        row["mean probe accuracy"] = float(np.mean(mean_acc[v]))
        row |= {k: float(np.mean([r[v][k] for r in reps])) for k in ("2-D PSNR", "3-D PSNR")}
        rows.append(row)
        key = v.replace(" ", "_").replace("(", "").replace(")", "")
        run.metric(f"probe_mean_{key}", row["mean probe accuracy"])
        for t in PROBE_TASKS:
            run.metric(f"probe_{t}_{key}", row[t])
    for t in ("digit", "lesion"):
        run.metric(f"expert_accuracy_{t}", float(np.mean([r["expert_accuracy"][t] for r in reps])))
    run.table(
        rows,
        name="alignment",
        caption=f"Linear probes on frozen pooled tokens, means over {n_rep} replicates",
    )
    diff = lambda a, b: [x - y for x, y in zip(mean_acc[a], mean_acc[b])]  # noqa: E731
    run.check("mera_vs_single_expert", diff("MERA", "single expert"))
    run.check("mera_vs_averaged_target", diff("MERA", "averaged target"))
    run.metric("mera_vs_masked_averaged_target", diff("MERA", "averaged target (masked)"))
    run.metric("mera_linear_heads_vs_single_expert", diff("MERA (linear heads)", "single expert"))
    run.metric("mera_linear_heads_vs_averaged_target", diff("MERA (linear heads)", "averaged target"))
    run.check(
        "mera_task_floor",
        [min(r["MERA"][t] - max(r[v][t] for v in MERA_VARIANTS) for t in PROBE_TASKS) for r in reps],
    )


def _reconstruction_replicate(run: Run, seed: int, P: dict) -> tuple[list[dict], dict, tuple]:
    """Base, +SDR and 2-D-only tokenizers trained on one draw of the data; their test-set rows."""
    n_train, n_test, slices, size = P["n_train"], P["n_test"], P["slices"], P["size"]
    ph = make_phantoms(n_train + n_test, slices, size, seed=seed)
    vtr, vte, cte = ph.volumes[:n_train], ph.volumes[n_train:], ph.clean[n_train:]
    digits = _digits(size)[0]
    perm = np.random.default_rng(seed).permutation(len(digits))
    dtr, dte = digits[perm[: P["n_digits"]]], digits[perm[P["n_digits"] : P["n_digits"] + 300]]
    rows, models = [], {}
    plan = [("base (L1 + VQ)", 0.0, True), ("+ SDR", P["sdr_weight"], True), ("2-D only", 0.0, False)]
    for name, w, unified in plan:
        torch.manual_seed(seed)
        tok = MedVTokenizer(widths=(16, 32), n_codes=P["n_codes"], code_dim=16, n_codebooks=2)
        with run.timer(f"train {name}", clock="cpu"):
            if unified:
                train_tokenizer(
                    tok,
                    vtr,
                    images=dtr,
                    epochs=P["epochs"],
                    batch_size=P["batch_size"],
                    sdr_weight=w,
                    clean_volumes=ph.clean[:n_train],
                    seed=seed,
                )
            else:
                # equal budget: the unified tokenizer's steps and digit draws (one batch of digits drawn with
                # replacement per volume batch): n_train * epochs draws from the training digits, one pass
                draws = np.random.default_rng(seed + 1).integers(len(dtr), size=n_train * P["epochs"])
                train_tokenizer(tok, dtr[draws], epochs=1, batch_size=P["batch_size"], seed=seed)
        with torch.no_grad():
            rec_d, idx_d, _ = tok(torch.tensor(dte))
            row = {
                "seed": seed,
                "tokenizer": name,
                "2-D PSNR": psnr(rec_d, torch.tensor(dte), 2.0).mean().item(),
            }
            idx = idx_d.reshape(-1, idx_d.shape[-1])
            if unified:
                rec_v, idx_v, _ = tok(torch.tensor(vte))
                row["3-D PSNR"] = psnr(_slices(rec_v), _slices(vte), 2.0).mean().item()
                row["3-D PSNR vs clean"] = psnr(_slices(rec_v), _slices(cte), 2.0).mean().item()
                row["ISDE (clean)"] = inter_slice_difference_error(rec_v, cte)
                idx = torch.cat([idx_v.reshape(-1, idx_v.shape[-1]), idx])
            row["codebook usage"] = float(codebook_usage(idx, P["n_codes"]).mean())
            counts = [torch.bincount(idx[:, g], minlength=P["n_codes"]).double() for g in range(idx.shape[1])]
            row["code perplexity"] = float(
                np.mean(
                    [torch.exp(-(c / c.sum() * torch.log(c / c.sum() + 1e-12)).sum()).item() for c in counts]
                )
            )
            row["restarts"] = int(tok.quantizer.restarts.sum())
        rows.append(row)
        models[name] = tok
    return rows, models, (vte, cte)


def run(run: Run) -> None:
    torch.set_num_threads(1)
    P = {
        "n_train": run.param("n_volumes_train", quick=224, full=768),
        "n_test": run.param("n_volumes_test", 64, full=256),
        "slices": run.param("slices", 8),
        "size": run.param("size", 16),
        "n_digits": run.param("n_digits_train", quick=600, full=1400),
        "epochs": run.param("epochs", quick=4, full=15),
        "batch_size": run.param("batch_size", quick=16, full=32),
        "sdr_weight": run.param("sdr_weight", 1.0),
        "n_codes": run.param("n_codes", 256),
    }
    # quick: one replicate on the run's seed; full: three replicates (data and tokenizers re-drawn per replicate)
    n_rep = run.param("replicates", quick=1, full=3)
    seeds = [run.seed] if n_rep == 1 else run.seeds(n_rep)
    per_seed, models = [], None
    for seed in seeds:
        rows, m, t = _reconstruction_replicate(run, seed, P)
        per_seed.append(rows)
        if models is None:
            models, (vte, cte) = m, t
    # per replicate: one value each (quick: a single value); a check passes only when every replicate passes
    col = lambda i, key: [rows[i][key] for rows in per_seed]  # noqa: E731  (0 base, 1 +SDR, 2 2-D only)
    one = (lambda v: v[0]) if len(seeds) == 1 else (lambda v: v)  # noqa: E731
    mean = lambda v: float(np.mean(v))  # noqa: E731
    for i, key in enumerate(("base", "sdr", "2d_only")):
        run.metric(f"codebook_usage_{key}", mean(col(i, "codebook usage")))
        run.metric(f"code_perplexity_{key}", mean(col(i, "code perplexity")))
        run.metric(f"restarts_{key}", mean(col(i, "restarts")))
    usage = [min(rows[i]["codebook usage"] for i in range(3)) for rows in per_seed]
    run.check("codebook_in_use", min(usage))
    isde_red = [1.0 - s / b for b, s in zip(col(0, "ISDE (clean)"), col(1, "ISDE (clean)"))]
    drop = [b - s for b, s in zip(col(0, "3-D PSNR"), col(1, "3-D PSNR"))]
    gap = [o - u for o, u in zip(col(2, "2-D PSNR"), col(1, "2-D PSNR"))]
    run.metric("isde_base", mean(col(0, "ISDE (clean)")))
    run.metric("isde_sdr", mean(col(1, "ISDE (clean)")))
    run.metric("psnr3d_base", mean(col(0, "3-D PSNR")))
    run.metric("psnr3d_sdr", mean(col(1, "3-D PSNR")))
    run.metric("psnr2d_unified", mean(col(1, "2-D PSNR")))
    run.metric("psnr2d_2d_only", mean(col(2, "2-D PSNR")))
    run.metric("psnr2d_base", mean(col(0, "2-D PSNR")))
    run.metric("isde_input_noise", inter_slice_difference_error(vte, cte))
    run.metric("isde_reduction_sdr", mean(isde_red))
    run.metric("psnr3d_drop_sdr", mean(drop))
    run.metric("unified_gap_mean", mean(gap))
    run.check("isde_reduction", one(isde_red))
    run.check("sdr_psnr_drop", one(drop))
    run.check("unified_2d_psnr_gap", one(gap))
    run.table(
        [r for rows in per_seed for r in rows],
        name="results",
        caption="Test-set reconstruction of one tokenizer per row",
    )
    _alignment_study(run, {"size": P["size"], "slices": P["slices"], "n_codes": P["n_codes"]})
    slices = P["slices"]

    with torch.no_grad():
        rec_b = models["base (L1 + VQ)"](torch.tensor(vte[:1]))[0][0, 0]
        rec_s = models["+ SDR"](torch.tensor(vte[:1]))[0][0, 0]
    fig, axes = plt.subplots(3, slices, figsize=(1.2 * slices, 3.8))
    for r, (vol, label) in enumerate(
        [(cte[0, 0], "clean"), (rec_b.numpy(), "base"), (rec_s.numpy(), "+ SDR")]
    ):
        for k in range(slices):
            axes[r, k].imshow(vol[k], cmap="gray", vmin=-1, vmax=1)
            axes[r, k].set_xticks([])
            axes[r, k].set_yticks([])
        axes[r, 0].set_ylabel(label, fontsize=7)
    fig.tight_layout()
    run.figure(fig, "phantom_slices", caption="A test phantom's slices and two reconstructions")
