"""MedVTok tokenizer: causal slice mixing, 2-D/3-D token equality, the quantiser against a brute-force nearest
code, the slice-differential term and the multi-expert alignment loss against their definitions, a round trip
on its training distribution, and bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.ndimage import gaussian_filter

from neurips26.multimodal.medvtok import (
    CausalSliceConv,
    MedVTokenizer,
    MultiExpertAlignment,
    VectorQuantizer,
    inter_slice_difference_error,
    slice_differential_loss,
    train_tokenizer,
)
from neurips26.vision.modules import psnr


def _tokenizer(seed: int = 0) -> MedVTokenizer:
    torch.manual_seed(seed)
    tok = MedVTokenizer(widths=(8, 16), n_codes=32, code_dim=4, n_codebooks=2)
    for conv in (tok.enc_slices.conv, tok.dec_slices.conv):  # non-zero slice mixing, so causality is tested
        torch.nn.init.normal_(conv.weight, std=0.3)
    return tok.eval()


def test_slice_mixing_is_causal():
    tok = _tokenizer()
    v = torch.rand(2, 1, 6, 16, 16)
    w = v.clone()
    w[:, :, 4:] = torch.rand(2, 1, 2, 16, 16)  # change slices 4 and 5 only
    with torch.no_grad():
        qa, ia, _, _ = tok.encode(v)
        qb, ib, _, _ = tok.encode(w)
        ra, rb = tok.decode(qa), tok.decode(qb)
    assert torch.equal(ia[:, :4], ib[:, :4]) and not torch.equal(ia[:, 4:], ib[:, 4:])
    torch.testing.assert_close(ra[:, :, :4], rb[:, :, :4])
    conv = CausalSliceConv(3, kernel=3)
    torch.nn.init.normal_(conv.conv.weight)
    h = torch.randn(1, 3, 5, 2, 2)
    h2 = h.clone()
    h2[:, :, 3:] += 1.0
    torch.testing.assert_close(conv(h)[:, :, :3], conv(h2)[:, :, :3])


def test_an_image_tokenizes_like_the_first_slice_of_a_volume():
    tok = _tokenizer()
    img = torch.rand(3, 1, 16, 16)
    vol = torch.cat([img[:, :, None], torch.rand(3, 1, 4, 16, 16)], dim=2)
    assert torch.equal(tok.tokenize(img)[:, 0], tok.tokenize(vol)[:, 0])
    rec, idx, _ = tok(img)
    assert rec.shape == img.shape and idx.shape == (3, 1, 8, 8, 2)


def test_quantiser_picks_the_nearest_code_per_sub_codebook():
    torch.manual_seed(1)
    vq = VectorQuantizer(n_codes=7, code_dim=3, n_codebooks=2).eval()
    z = torch.randn(5, 4, 6, requires_grad=True)
    q, idx, loss, perplexity = vq(z)
    books = vq.codebooks.numpy()
    zn = z.detach().numpy().reshape(-1, 2, 3)
    for n in range(len(zn)):
        for g in range(2):
            best = np.argmin([np.sum((zn[n, g] - c) ** 2) for c in books[g]])
            assert idx.reshape(-1, 2)[n, g].item() == best
            np.testing.assert_allclose(q.detach().numpy().reshape(-1, 2, 3)[n, g], books[g][best], atol=1e-6)
    assert loss.item() == pytest.approx(
        0.25 * np.mean((z.detach().numpy() - q.detach().numpy()) ** 2), rel=1e-5
    )
    q.sum().backward()  # straight-through: d q / d z = identity
    torch.testing.assert_close(z.grad, torch.ones_like(z))
    assert perplexity.shape == (2,) and torch.all(perplexity >= 1)


def test_unused_codes_restart_at_encoder_outputs():
    torch.manual_seed(2)
    vq = VectorQuantizer(n_codes=16, code_dim=2, n_codebooks=1, decay=0.5, restart_threshold=0.2).train()
    z = 50.0 + torch.randn(64, 2)  # far from every initial code: one code wins, the rest decay and restart
    for _ in range(4):
        vq(z)
    near = (vq.codebooks[0] - 50.0).abs().max(-1).values < 5
    assert near.sum() >= 8


def test_restarts_fire_at_the_defaults_within_a_few_calls():
    # the defaults used to need 688 idle calls before a restart (quick mode makes 96): a shifted, spread-out
    # cloud must take most of the codebook within ten calls
    torch.manual_seed(0)
    vq = VectorQuantizer(n_codes=64, code_dim=4, n_codebooks=2).train()
    gen = torch.Generator().manual_seed(1)
    for _ in range(10):
        vq(20.0 + 3.0 * torch.randn(2048, 8, generator=gen))
    vq.eval()
    _, idx, _, _ = vq(20.0 + 3.0 * torch.randn(4096, 8, generator=gen))
    used = [len(torch.unique(idx[:, g])) for g in range(2)]
    assert min(used) >= 32, used  # without restarts, one or two initial codes take every vector
    with pytest.raises(ValueError, match="restart_threshold"):
        VectorQuantizer(restart_threshold=1.5)


def _calls_until_restart(n: int, far_code: int = 3, max_calls: int = 200) -> int:
    """Calls (after the data-dependent initialisation) until a code moved far from every vector is restarted."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(n)
    vq = VectorQuantizer(n_codes=16, code_dim=2, n_codebooks=1).train()
    vq(torch.randn(n, 2, generator=gen))  # first call: every code drawn from the batch
    vq.codebooks[0, far_code] = 1e3  # never the nearest code again, from its fair share of usage
    vq.ema_sum[0, far_code] = 1e3 * vq.ema_count[0, far_code]
    vq.ema_usage[0, far_code] = 1 / 16
    for call in range(1, max_calls + 1):
        vq(torch.randn(n, 2, generator=gen))
        if vq.codebooks[0, far_code].abs().max() < 100:  # moved onto an encoder output of this batch
            return call
    return max_calls + 1


def test_a_code_never_selected_restarts_within_a_bounded_number_of_calls():
    # usage starts at the fair share 1/K and decays by usage_decay per call without a vector: below the bar
    # restart_threshold / K after ceil(ln(0.1) / ln(0.9)) = 22 calls, whatever the batch size or the run's length
    bound = math.ceil(math.log(0.1) / math.log(0.9))
    assert [_calls_until_restart(n) for n in (64, 512, 4096)] == [bound] * 3
    # the old absolute bar (1e-3 with decay 0.99) needed 688 idle calls: quick mode made 96 and restarted nothing


def test_a_restarted_code_that_wins_nothing_restarts_at_the_next_call():
    torch.manual_seed(0)
    vq = VectorQuantizer(n_codes=8, code_dim=2, n_codebooks=1).train()
    vq(torch.randn(256, 2))
    vq.ema_usage[0, 5] = 0.0  # dead and winning nothing: restarted by the next call, then exactly at the bar
    vq.codebooks[0, 5] = 1e3
    vq.ema_sum[0, 5] = 1e3 * vq.ema_count[0, 5]
    before = int(vq.restarts[0])
    z = torch.randn(256, 2)
    vq(z)
    assert int(vq.restarts[0]) >= before + 1
    assert vq.ema_usage[0, 5].item() == pytest.approx(0.1 / 8)
    assert torch.cdist(vq.codebooks[0, 5:6], z).min() < 1e-5  # it is one of the batch's vectors
    vq.codebooks[0, 5] = (
        1e3  # it wins nothing in the following call: usage falls below the bar, restart again
    )
    vq.ema_sum[0, 5] = 1e3 * vq.ema_count[0, 5]
    vq(torch.randn(256, 2))
    assert vq.codebooks[0, 5].abs().max() < 100
    vq.eval()
    frozen = vq.codebooks.clone()
    vq(torch.randn(256, 2) + 50)  # no updates and no restarts outside training
    assert torch.equal(frozen, vq.codebooks)


def test_usage_is_a_share_per_call_so_small_batches_keep_their_codes():
    # a unified tokenizer alternates large volume batches and small image batches that use other codes: usage is
    # each code's EMA share of the vectors per call, so the image codes are not restarted by the volume calls
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    vq = VectorQuantizer(n_codes=32, code_dim=2, n_codebooks=1).train()
    centres = torch.tensor([[-20.0, 0.0], [20.0, 0.0]])
    big = lambda: centres[0] + torch.randn(4096, 2, generator=gen)  # noqa: E731
    small = lambda: centres[1] + torch.randn(64, 2, generator=gen)  # noqa: E731
    vq(torch.cat([big()[:64], small()]))  # initialised with about half the codes on each cluster
    on_small = lambda: int((vq.codebooks[0, :, 0] > 0).sum())  # noqa: E731
    start = on_small()
    for _ in range(100):
        vq(big())
        vq(small())
    # a per-call count against a bar of a tenth of the large batch's fair share (the previous rule) restarted
    # the image codes onto the volume cluster at the volume calls
    assert start >= 8 and on_small() >= start - 2, (start, on_small())
    vq.eval()
    assert len(torch.unique(vq(small())[1])) >= start - 2


def test_quantiser_arguments_are_validated():
    for kw, name in [
        ({"decay": 1.0}, "decay"),
        ({"usage_decay": -0.1}, "usage_decay"),
        ({"restart_threshold": 1.5}, "restart_threshold"),
        ({"beta": -1.0}, "beta"),
        ({"code_dim": 0}, "code_dim"),
        ({"n_codebooks": 0}, "n_codebooks"),
    ]:
        with pytest.raises(ValueError, match=name):
            VectorQuantizer(**kw)


def test_slice_differential_loss_definition():
    rng = np.random.default_rng(0)
    x, xh = rng.random((2, 1, 5, 4, 4)), rng.random((2, 1, 5, 4, 4))
    ref = np.mean(
        [np.mean(np.abs((xh[:, :, k + 1] - xh[:, :, k]) - (x[:, :, k + 1] - x[:, :, k]))) for k in range(4)]
    )
    assert slice_differential_loss(torch.tensor(xh), torch.tensor(x)).item() == pytest.approx(ref, rel=1e-9)
    shifted = torch.tensor(x) + 0.3  # a constant error leaves every inter-slice difference intact
    assert slice_differential_loss(shifted, torch.tensor(x)).item() == pytest.approx(0.0, abs=1e-12)
    assert inter_slice_difference_error(xh, x) == pytest.approx(ref, rel=1e-6)


def test_multi_expert_alignment_loss_with_masks():
    torch.manual_seed(3)
    align = MultiExpertAlignment(6, {"digits": 4, "texture": 3}, weights={"texture": 0.5})
    f = torch.randn(5, 6)
    t = {"digits": torch.randn(5, 4), "texture": torch.randn(5, 3)}
    m = {"digits": torch.tensor([1, 1, 0, 0, 0]).bool(), "texture": torch.tensor([0, 0, 1, 1, 0]).bool()}
    with torch.no_grad():
        pd, pt = align.heads["digits"](f), align.heads["texture"](f)

    def cos(a, b):
        return (a * b).sum(-1) / a.norm(dim=-1) / b.norm(dim=-1)

    ref = (1 - cos(pd[:2], t["digits"][:2])).mean() + 0.5 * (1 - cos(pt[2:4], t["texture"][2:4])).mean()
    assert align(f, t, m).item() == pytest.approx(ref.item(), rel=1e-5)
    avg = MultiExpertAlignment(6, {"digits": 4, "texture": 3}, mode="averaged")
    m2 = {"digits": torch.tensor([1, 1, 1, 0, 0]).bool(), "texture": torch.tensor([1, 0, 0, 1, 0]).bool()}
    with torch.no_grad():
        p = avg.heads["averaged"](f)
    tgt0 = (
        t["digits"][0] / t["digits"][0].norm()
        + torch.cat([t["texture"][0] / t["texture"][0].norm(), torch.zeros(1)])
    ) / 2
    tgts = [tgt0, t["digits"][1], t["digits"][2], torch.cat([t["texture"][3], torch.zeros(1)])]
    ref_avg = torch.stack([1 - cos(p[i], tgts[i]) for i in range(4)]).mean()
    assert avg(f, t, m2).item() == pytest.approx(ref_avg.item(), rel=1e-5)
    linear = MultiExpertAlignment(6, {"digits": 4}, hidden=None)
    assert isinstance(linear.heads["digits"], torch.nn.Linear)
    with torch.no_grad():
        ref_lin = (1 - cos(linear.heads["digits"](f[:2]), t["digits"][:2])).mean()
    assert linear(f, {"digits": t["digits"]}, {"digits": m["digits"]}).item() == pytest.approx(
        ref_lin.item(), rel=1e-5
    )


def _smooth_volumes(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = gaussian_filter(rng.standard_normal((n, 1, 6, 16, 16)), sigma=(0, 0, 1.5, 2.0, 2.0))
    return (v / np.abs(v).max(axis=(1, 2, 3, 4), keepdims=True)).astype(np.float32)


@pytest.mark.slow
def test_round_trip_reconstructs_its_training_distribution():
    train, test = _smooth_volumes(96, 0), _smooth_volumes(32, 1)
    torch.manual_seed(0)
    tok = MedVTokenizer(widths=(16, 32), n_codes=64, code_dim=8, n_codebooks=2)
    train_tokenizer(tok, train, epochs=6, batch_size=16, lr=3e-3, sdr_weight=1.0)
    with torch.no_grad():
        rec, _, _ = tok(torch.tensor(test))
    flat = lambda a: torch.as_tensor(a).reshape(-1, 1, 16, 16)  # noqa: E731
    value = psnr(flat(rec), flat(test), data_range=2.0).mean().item()
    assert value > 22.0  # measured 24.8 dB; the constant (mean) reconstruction scores 17.4 dB here


def test_bad_input_names_the_parameter():
    tok = _tokenizer()
    with pytest.raises(ValueError, match="x must have 4 or 5"):
        tok(torch.rand(16, 16))
    with pytest.raises(ValueError, match="NaN"):
        tok(torch.full((1, 1, 16, 16), float("nan")))
    with pytest.raises(ValueError, match="channel"):
        tok(torch.rand(1, 3, 16, 16))
    with pytest.raises(ValueError, match="multiples"):
        tok(torch.rand(1, 1, 15, 15))
    with pytest.raises(ValueError, match="n_codes"):
        VectorQuantizer(n_codes=1)
    with pytest.raises(ValueError, match="z must end"):
        VectorQuantizer(8, 3, 2)(torch.rand(4, 5))
    with pytest.raises(ValueError, match="x_hat and x"):
        slice_differential_loss(torch.rand(1, 1, 3, 4, 4), torch.rand(1, 1, 2, 4, 4))
    with pytest.raises(ValueError, match="expert_dims"):
        MultiExpertAlignment(4, {})
    with pytest.raises(ValueError, match="mode"):
        MultiExpertAlignment(4, {"a": 2}, mode="mean")
    with pytest.raises(ValueError, match="hidden"):
        MultiExpertAlignment(4, {"a": 2}, hidden=0)
    with pytest.raises(ValueError, match="targets and masks"):
        MultiExpertAlignment(4, {"a": 2})(torch.rand(2, 4), {"b": torch.rand(2, 2)}, {"b": torch.ones(2)})
    with pytest.raises(ValueError, match="volumes"):
        train_tokenizer(tok, torch.rand(4, 1, 16, 16), sdr_weight=1.0)
    with pytest.raises(ValueError, match="sdr_weight"):
        train_tokenizer(tok, torch.rand(4, 1, 3, 16, 16), sdr_weight=-1)


def test_phantoms_labels_and_noise():
    from neurips26.multimodal.medvtok.phantoms import make_phantoms

    ph = make_phantoms(12, slices=6, size=16, noise=0.05, seed=0)
    assert ph.volumes.shape == ph.clean.shape == (12, 1, 6, 16, 16)
    assert set(np.unique(ph.lesion)) <= {0, 1} and set(np.unique(ph.organs)) <= {1, 2, 3, 4}
    assert np.all(ph.clean[ph.lesion == 1].max(axis=(1, 2, 3, 4)) == pytest.approx(0.95))
    assert 0.02 < np.std(ph.volumes - ph.clean) < 0.06
    with pytest.raises(ValueError, match="noise"):
        make_phantoms(2, noise=1.0)


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    from neurips26.harness.testing import assert_quick_verdict

    assert_quick_verdict("medvtok", tmp_path)


def test_textured_disks_labels_are_grating_orientations():
    from neurips26.multimodal.medvtok import make_textured_disks

    x, y = make_textured_disks(64, size=16, n_textures=4, noise=0.0, seed=1)
    assert x.shape == (64, 1, 16, 16) and set(np.unique(y)) <= {0, 1, 2, 3}
    assert x.min() >= -1 and x.max() <= 1 and np.all(x[:, 0, 0, 0] == -1.0)  # the corner is background
    # independent oracle: the structure tensor of the disk's interior (the boundary left out) points along the
    # grating's wave vector
    from scipy.ndimage import binary_erosion

    for img, label in zip(x[:, 0], y):
        inner = binary_erosion(img > -1.0, iterations=2)
        gy, gx = np.gradient(img)
        J = np.array([[(gx * gx)[inner].sum(), (gx * gy)[inner].sum()], [0, (gy * gy)[inner].sum()]])
        J[1, 0] = J[0, 1]
        w, V = np.linalg.eigh(J)
        angle = np.arctan2(V[1, -1], V[0, -1]) % np.pi
        nearest = np.argmin([min(abs(angle - a), np.pi - abs(angle - a)) for a in np.pi * np.arange(4) / 4])
        assert nearest == label
    with pytest.raises(ValueError, match="n_textures"):
        make_textured_disks(4, n_textures=1)


def test_texture_features_peak_at_the_grating_orientation():
    from neurips26.multimodal.medvtok import make_textured_disks, texture_features

    x, y = make_textured_disks(48, size=16, noise=0.0, seed=2)
    f = texture_features(x, orientations=4, frequencies=(0.15, 0.25))
    n_hog = 9 * (16 // 8) ** 2
    assert f.shape == (48, n_hog + 2 * 8) and f.dtype == np.float32
    energy = f[:, n_hog : n_hog + 4] + f[:, n_hog + 4 : n_hog + 8]  # mean Gabor energy per orientation
    assert (energy.argmax(1) == y).mean() >= 0.9
    assert np.allclose(texture_features(x[:3]), f[:3], atol=1e-5)  # per image: independent of the batch
    with pytest.raises(ValueError, match="frequencies"):
        texture_features(x, frequencies=(0.7,))
    with pytest.raises(ValueError, match="images must have 4"):
        texture_features(x[:, 0])


def test_cnn_expert_learns_its_label_and_is_frozen():
    from neurips26.multimodal.medvtok import CNNExpert, fit_expert

    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 128)
    x = rng.normal(0, 0.3, (128, 1, 8, 8)).astype(np.float32)
    x[y == 1, :, :4] += 1.0  # a bright top half
    expert = fit_expert(CNNExpert(2, widths=(8, 16)), x, y, epochs=15, seed=0)
    assert (expert(torch.tensor(x)).argmax(1).numpy() == y).mean() > 0.95
    assert not any(p.requires_grad for p in expert.parameters()) and not expert.training
    feats = expert.features(x)
    assert feats.shape == (128, 16)
    assert np.allclose(expert.features(x[:5]), feats[:5], atol=1e-6)
    vol = CNNExpert(3, widths=(4, 8), dims=3)
    assert vol.features(np.zeros((2, 1, 4, 8, 8), np.float32)).shape == (2, 8)
    with pytest.raises(ValueError, match="y must"):
        fit_expert(CNNExpert(2, widths=(8,)), x, y + 5)
    with pytest.raises(ValueError, match="x must have 4"):
        expert(torch.rand(2, 1, 4, 8, 8))


def test_alignment_targets_that_never_apply_leave_training_unchanged():
    vols = _smooth_volumes(16, 0)
    images = vols[:, :, 0]

    def fit(**kw):
        torch.manual_seed(0)
        tok = MedVTokenizer(widths=(8, 16), n_codes=16, code_dim=4, n_codebooks=2)
        return train_tokenizer(tok, vols, images=images, epochs=2, batch_size=8, seed=0, **kw)

    plain = fit()
    align = MultiExpertAlignment(8, {"a": 3, "b": 2})
    masked = fit(
        alignment=align,
        volume_targets={"a": np.full((16, 3), np.nan)},
        image_targets={"b": np.full((16, 2), np.nan)},
    )
    for p, q in zip(plain.parameters(), masked.parameters()):
        assert torch.equal(p, q)  # every sample masked out: no alignment gradient reaches the tokenizer


def test_alignment_training_lowers_the_alignment_loss():
    vols = _smooth_volumes(48, 1)
    rng = np.random.default_rng(0)
    targets = rng.standard_normal((48, 4)).astype(np.float32)
    targets[:, 0] = vols.mean(axis=(1, 2, 3, 4)) * 10  # a target the features can carry
    torch.manual_seed(0)
    tok = MedVTokenizer(widths=(8, 16), n_codes=16, code_dim=4, n_codebooks=2)
    align = MultiExpertAlignment(tok.quant_dim, {"e": 4})
    feats = lambda: tok.encode(torch.tensor(vols))[0].flatten(2).mean(-1)  # noqa: E731
    m = {"e": torch.ones(48, dtype=torch.bool)}
    with torch.no_grad():
        before = align(feats(), {"e": torch.tensor(targets)}, m).item()
    train_tokenizer(tok, vols, epochs=8, batch_size=16, alignment=align, volume_targets={"e": targets})
    with torch.no_grad():
        after = align(feats(), {"e": torch.tensor(targets)}, m).item()
    assert after < before - 0.1


def test_alignment_arguments_are_validated():
    vols = _smooth_volumes(4, 0)
    tok = _tokenizer()
    align = MultiExpertAlignment(8, {"a": 3})
    with pytest.raises(ValueError, match="need an alignment"):
        train_tokenizer(tok, vols, volume_targets={"a": np.zeros((4, 3))})
    with pytest.raises(ValueError, match="does not know"):
        train_tokenizer(tok, vols, alignment=align, volume_targets={"z": np.zeros((4, 3))})
    with pytest.raises(ValueError, match="must have shape"):
        train_tokenizer(tok, vols, alignment=align, volume_targets={"a": np.zeros((3, 3))})
    with pytest.raises(ValueError, match="without images"):
        train_tokenizer(tok, vols, alignment=align, image_targets={"a": np.zeros((4, 3))})
    with pytest.raises(ValueError, match="align_weight"):
        train_tokenizer(tok, vols, alignment=align, align_weight=-1.0)
