"""Shared vision blocks (neurips26.vision.modules) against independent references: scikit-image's metrics,
a strided convolution, torch's FLOP counter (math attention backend), and the sinusoid written out."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from skimage.metrics import peak_signal_noise_ratio, structural_similarity
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from neurips26.vision import modules as M


def _count(fn) -> int:
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as fc:
        fn()
    return fc.get_total_flops()


def test_ssim_and_psnr_match_scikit_image():
    rng = np.random.default_rng(0)
    a = rng.random((3, 2, 19, 23))
    b = np.clip(a + 0.1 * rng.standard_normal(a.shape), 0, 1)
    ours = M.ssim(a, b, data_range=1.0).numpy()
    ref = [structural_similarity(a[i], b[i], data_range=1.0, channel_axis=0) for i in range(3)]
    np.testing.assert_allclose(ours, ref, rtol=1e-9)
    ref_psnr = [peak_signal_noise_ratio(a[i], b[i], data_range=1.0) for i in range(3)]
    np.testing.assert_allclose(M.psnr(a, b, 1.0).numpy(), ref_psnr, rtol=1e-9)


def test_patchify_order_and_patch_embed_is_a_strided_conv():
    x = torch.randn(2, 3, 8, 12)
    tokens = M.patchify(x, 4)
    assert tokens.shape == (2, 6, 48)
    # inverse by hand: tokens back to (B, C, H, W)
    back = tokens.reshape(2, 2, 3, 4, 4, 3).permute(0, 5, 1, 3, 2, 4).reshape(2, 3, 8, 12)
    assert torch.equal(back, x)
    # token 1 is the patch at row 0, column 1, pixels row-major, channels innermost
    assert torch.equal(tokens[0, 1], x[0, :, 0:4, 4:8].permute(1, 2, 0).reshape(-1))
    embed = M.PatchEmbed(3, 5, 4)
    conv = torch.nn.Conv2d(3, 5, 4, stride=4)
    conv.weight.data = embed.proj.weight.data.view(5, 4, 4, 3).permute(0, 3, 1, 2).clone()
    conv.bias.data = embed.proj.bias.data.clone()
    torch.testing.assert_close(conv(x).flatten(2).transpose(1, 2), embed(x), atol=1e-5, rtol=1e-5)
    video = torch.randn(2, 3, 3, 8, 8)  # (B, T, C, H, W): tokens ordered by frame first
    vt = M.patchify(video, 4)
    assert vt.shape == (2, 12, 48)
    assert torch.equal(vt[:, 4:8], M.patchify(video[:, 1], 4))


def test_flop_counts_match_torch_flop_counter():
    enc = M.TransformerEncoder(32, 2, 4)
    assert _count(lambda: enc(torch.randn(1, 50, 32))) == enc.flops(50)
    block = M.DividedSpaceTimeBlock(32, 4)
    assert _count(lambda: block(torch.randn(1, 6, 9, 32))) == M.divided_space_time_flops(6, 9, 32)


def test_sinusoid_and_grid_positions():
    x = torch.tensor([0.0, 1.5, 7.0])
    emb = M.sinusoidal_embedding(x, 6)
    w = [10_000.0 ** (-k / 3) for k in range(3)]
    ref = [[math.cos(v * wk) for wk in w] + [math.sin(v * wk) for wk in w] for v in x.tolist()]
    torch.testing.assert_close(emb, torch.tensor(ref), atol=1e-6, rtol=1e-6)
    grid = M.grid_position_embedding((2, 3), 8)
    assert grid.shape == (6, 8)
    assert len({tuple(r) for r in grid.tolist()}) == 6  # every cell distinct
    torch.testing.assert_close(grid[4, :4], M.sinusoidal_embedding(torch.tensor(1.0), 4, max_period=100.0))


def test_cnn_classifier_learns_a_separable_problem():
    gen = torch.Generator().manual_seed(0)
    X = torch.rand(128, 1, 8, 8, generator=gen)
    y = (X[:, 0, :4].mean((1, 2)) > X[:, 0, 4:].mean((1, 2))).long()
    torch.manual_seed(0)
    model = M.train_classifier(M.CNNClassifier(1, 2, widths=(8, 16)), X, y, epochs=30, batch_size=32, lr=5e-3)
    with torch.no_grad():
        acc = (model(X).argmax(1) == y).float().mean().item()
    assert acc > 0.9


def test_bad_input_names_the_parameter():
    with pytest.raises(ValueError, match="x must have 4"):
        M.as_image_tensor(np.zeros((2, 3)), "x")
    with pytest.raises(ValueError, match="NaN"):
        M.as_image_tensor(np.full((1, 1, 2, 2), np.nan), "x")
    with pytest.raises(ValueError, match="empty"):
        M.as_image_tensor(np.zeros((0, 1, 2, 2)), "x")
    with pytest.raises(TypeError, match="x must be"):
        M.as_image_tensor([1, 2], "x")
    with pytest.raises(ValueError, match="patch"):
        M.patchify(torch.zeros(1, 1, 6, 6), 4)
    with pytest.raises(ValueError, match="dim"):
        M.sinusoidal_embedding(torch.zeros(2), 5)
    with pytest.raises(ValueError, match="data_range"):
        M.psnr(np.zeros((1, 4, 4)), np.zeros((1, 4, 4)), 0.0)
    with pytest.raises(ValueError, match="same shape"):
        M.ssim(np.zeros((1, 8, 8)), np.zeros((1, 9, 9)), 1.0)
    with pytest.raises(ValueError, match="heads"):
        M.Attention(30, 4)
    with pytest.raises(ValueError, match="y must"):
        M.train_classifier(M.CNNClassifier(1, 2), torch.zeros(4, 1, 8, 8), [0, 1])
