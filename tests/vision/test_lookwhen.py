"""LookWhen: selection targets, selection rules, the selector's score grid, the top-K extractor, FLOPs and the
moving-shapes generator, each against an oracle written from the definition (loops, numpy, torch's FLOP
counter); bad input on every public entry point; the quick verdict."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from neurips26.harness.testing import assert_quick_verdict
from neurips26.vision.lookwhen import (
    LookWhen,
    LookWhenClassifier,
    compute_targets,
    frame_difference_selection,
    frame_normalise,
    make_moving_shapes,
    random_selection,
    selection_kl_loss,
    selection_overlap,
    token_uniqueness,
    uniform_temporal_selection,
)
from neurips26.vision.lookwhen.training import ImageTeacher, VideoTeacher


def test_token_uniqueness_is_the_nearest_neighbour_euclidean_distance():
    rng = np.random.default_rng(0)
    h = rng.standard_normal((2, 7, 5))
    h[1, 4] = h[1, 2]  # an exact duplicate: distance 0 for both
    ours = token_uniqueness(torch.tensor(h)).numpy()
    for b in range(2):
        for i in range(7):
            ref = min(np.linalg.norm(h[b, i] - h[b, j]) for j in range(7) if j != i)
            assert ours[b, i] == pytest.approx(ref, abs=1e-4)
    assert ours[1, 2] == pytest.approx(0.0, abs=1e-4) and ours[1, 4] == pytest.approx(0.0, abs=1e-4)


def test_token_uniqueness_cosine_is_the_nearest_neighbour_cosine_distance():
    rng = np.random.default_rng(0)
    h = rng.standard_normal((2, 7, 5))
    h[0, 3] = 2.5 * h[0, 1]  # a duplicate direction: distance 0 for both
    ours = token_uniqueness(torch.tensor(h), metric="cosine").numpy()
    for b in range(2):
        for i in range(7):
            d = [
                1 - h[b, i] @ h[b, j] / np.linalg.norm(h[b, i]) / np.linalg.norm(h[b, j])
                for j in range(7)
                if j != i
            ]
            assert ours[b, i] == pytest.approx(max(min(d), 0.0), abs=1e-5)
    assert ours[0, 1] == pytest.approx(0.0, abs=1e-5) and ours[0, 3] == pytest.approx(0.0, abs=1e-5)


def test_frame_normalise_per_location_over_frames():
    rng = np.random.default_rng(1)
    f = rng.standard_normal((2, 5, 3, 4))
    f[:, :, 0] = 7.0  # a location that never changes maps to zero
    ours = frame_normalise(torch.tensor(f)).numpy()
    ref = (f - f.mean(1, keepdims=True)) / (f.std(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(ours, ref, rtol=1e-6, atol=1e-6)
    assert np.all(ours[:, :, 0] == 0)


def test_selection_kl_loss_matches_the_definition():
    rng = np.random.default_rng(2)
    s, u = rng.standard_normal((3, 6)), rng.random((3, 6))
    z = (u - u.mean(1, keepdims=True)) / (u.std(1, ddof=1, keepdims=True) + 1e-6)
    p = np.exp(z / 0.5) / np.exp(z / 0.5).sum(1, keepdims=True)
    q = np.exp(s) / np.exp(s).sum(1, keepdims=True)
    ref = np.sum(p * np.log(p / q)) / 3
    assert selection_kl_loss(torch.tensor(s), torch.tensor(u), tau=0.5).item() == pytest.approx(ref, rel=1e-6)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 60), frac=st.floats(0.01, 1.0), seed=st.integers(0, 100))
def test_random_selection_draws_distinct_sorted_indices(n, frac, seed):
    k = max(1, int(frac * n))
    idx = random_selection(3, n, k, torch.Generator().manual_seed(seed))
    assert idx.shape == (3, k)
    for row in idx.tolist():
        assert row == sorted(set(row)) and 0 <= row[0] and row[-1] < n


def test_uniform_temporal_selection_takes_whole_evenly_spaced_frames():
    idx = uniform_temporal_selection(2, frames=8, tokens_per_frame=16, k=32)
    assert idx.shape == (2, 32)
    frames = sorted(set((idx[0] // 16).tolist()))
    assert len(frames) == 2 and frames[1] - frames[0] == 4  # two frames, 4 apart
    assert sorted((idx[0] % 16).tolist()) == sorted(list(range(16)) * 2)
    assert uniform_temporal_selection(1, 8, 16, 10).shape == (1, 10)  # partial frame: budget is exact


def test_frame_difference_selects_the_moving_patch():
    video = torch.full((1, 4, 3, 8, 8), 0.5)
    for t in range(4):  # a bright 4x4 patch moving one patch column per frame along row 0
        video[0, t, :, 0:4, 4 * (t % 2) : 4 * (t % 2) + 4] = 1.0
    idx = frame_difference_selection(video, patch=4, k=8)
    # tokens (t, 0, 0) and (t, 0, 1) change every frame: indices 4t and 4t + 1
    assert sorted(idx[0].tolist()) == sorted([4 * t + c for t in range(4) for c in (0, 1)])


def test_selection_overlap_counts_object_tokens():
    masks = np.array([[1, 0, 1, 0], [0, 0, 0, 1]], bool)
    np.testing.assert_allclose(selection_overlap([[0, 1], [2, 3]], masks), [0.5, 0.5])


def _tiny(**kw) -> LookWhen:
    torch.manual_seed(0)
    return LookWhen(frames=4, size=16, n_classes=3, dim=24, depth=2, selector_dim=24, **kw).eval()


def test_selector_scores_follow_the_high_res_token_order():
    model = _tiny()
    last = model.selector.head[-1]
    torch.nn.init.zeros_(last.weight)
    with torch.no_grad():
        last.bias.copy_(
            torch.tensor([0.0, 1.0, 2.0, 3.0])
        )  # sub-grid cell (i, j) of each low-res token -> 2i + j
        s = model.scores(torch.rand(1, 4, 3, 16, 16))[0].view(4, 4, 4)  # (frame, row, column) of the 4x4 grid
    rows, cols = np.meshgrid(np.arange(4), np.arange(4), indexing="ij")
    for t in range(4):
        np.testing.assert_array_equal(s[t].numpy(), 2 * (rows % 2) + cols % 2)


def test_extractor_positions_travel_with_their_tokens():
    model = _tiny()
    video = torch.rand(2, 4, 3, 16, 16)
    idx = torch.tensor([[0, 5, 17, 40, 63], [1, 2, 30, 31, 50]])
    perm = torch.tensor([3, 0, 4, 1, 2])
    with torch.no_grad():
        cls, feats, _ = model.extract(video, idx)
        cls_p, feats_p, _ = model.extract(video, idx[:, perm])
        other = video.clone()
        # invert the pixels of token 63 (frame 3, row 3, column 3)
        other[:, 3, :, 12:, 12:] = 1.0 - other[:, 3, :, 12:, 12:]
        cls_o, feats_o, _ = model.extract(other, torch.tensor([[0, 5, 17, 40, 62], [1, 2, 30, 31, 50]]))
        cls_s, _, _ = model.extract(video, torch.tensor([[0, 5, 17, 40, 62], [1, 2, 30, 31, 50]]))
    torch.testing.assert_close(cls, cls_p, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(feats[:, perm], feats_p, atol=1e-5, rtol=1e-5)
    # an unselected token reaches the extractor only through the selector's low-res CLS
    assert not torch.allclose(cls_o, cls_s)
    assert model.select(video).shape == (2, model.k)


def test_analytic_flops_match_torch_counter_and_scale_with_k():
    model = _tiny(k_ratio=0.25)
    video = torch.rand(1, 4, 3, 16, 16)
    for k in (8, 32, 64):
        idx = torch.arange(k)[None]
        with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as fc, torch.no_grad():
            model(video, idx)
        assert fc.get_total_flops() == model.flops(k=k)["total"]
    assert model.flops(k=64, with_selector=False)["selector"] == 0
    assert model.flops(k=8)["extractor"] < model.flops(k=32)["extractor"] < model.flops(k=64)["extractor"]


def test_direction_task_labels_the_direction_of_travel():
    data = make_moving_shapes(60, frames=6, size=24, patch=4, seed=5, task="direction")
    assert set(np.unique(data.labels)) <= set(range(4)) and np.all(data.motion == 0)
    yy, xx = np.mgrid[0:24, 0:24]
    m = data.object_masks.astype(float)
    area = m.sum((2, 3))
    cx, cy = (m * xx).sum((2, 3)) / area, (m * yy).sum((2, 3)) / area  # object centroid per frame
    dx, dy = cx[:, -1] - cx[:, 0], cy[:, -1] - cy[:, 0]
    expected = np.where(
        np.abs(dx) >= np.abs(dy), np.where(dx > 0, 0, 2), np.where(dy > 0, 1, 3)
    )  # right, down, left, up in image axes
    np.testing.assert_array_equal(data.labels, expected)
    assert np.all(data.shape != data.distractor)


def test_moving_shapes_masks_and_labels():
    data = make_moving_shapes(40, frames=8, size=32, patch=4, seed=3)
    assert data.videos.shape == (40, 8, 3, 32, 32) and data.videos.dtype == np.float32
    assert set(np.unique(data.labels)) <= set(range(6))
    np.testing.assert_array_equal(data.labels, 3 * data.shape + data.motion)
    assert np.all(data.shape != data.distractor)
    # token masks: a 4x4 patch is marked iff one of its pixels belongs to the object
    m = data.object_masks.reshape(40, 8, 8, 4, 8, 4).any(axis=(3, 5)).reshape(40, -1)
    np.testing.assert_array_equal(m, data.token_masks)
    assert data.token_masks.mean() < 0.15  # the object covers under 15% of the tokens (digest)
    lin = data.motion == 0
    assert np.all((data.object_masks[lin, 0] != data.object_masks[lin, -1]).any(axis=(1, 2)))
    u8 = make_moving_shapes(5, seed=3, dtype="uint8")
    assert u8.videos.dtype == np.uint8
    assert len(data.subset(slice(0, 7))) == 7


def test_every_selection_rule_is_charged_the_selector_it_runs():
    """The FLOPs the experiment charges each rule equal what torch counts when the model runs that rule's tokens
    (the selector runs whatever the rule, since its CLS is the extractor's prefix token)."""
    from neurips26.vision.lookwhen.experiment import method_flops

    model = _tiny(k_ratio=0.25)
    video = torch.rand(2, 4, 3, 16, 16)
    N, k = model.n_tokens, model.k
    selector_alone = FlopCounterMode(display=False)
    with sdpa_kernel(SDPBackend.MATH), selector_alone, torch.no_grad():
        model.selector(video[:1])
    assert selector_alone.get_total_flops() > 0
    rules = {
        "random-K": random_selection(2, N, k, torch.Generator().manual_seed(0)),
        "uniform temporal": uniform_temporal_selection(2, 4, N // 4, k),
        "frame difference": frame_difference_selection(video, 4, k),
        "all tokens": torch.arange(N)[None].expand(2, N),
        None: None,
    }
    for name, idx in rules.items():
        with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as fc, torch.no_grad():
            model(video[:1], None if idx is None else idx[:1])
        charged = method_flops(model, name)
        assert charged["total"] == fc.get_total_flops(), name
        assert charged["selector"] >= selector_alone.get_total_flops(), name  # + the CLS projection


@pytest.mark.slow
def test_classifier_end_to_end_on_a_small_set():
    data = make_moving_shapes(96, frames=5, size=24, patch=4, seed=0)
    clf = LookWhenClassifier(
        k_ratio=0.25,
        dim=24,
        depth=1,
        selector_dim=24,
        teacher_dim=16,
        teacher_epochs=1,
        pretrain_epochs=1,
        finetune_epochs=1,
        batch_size=32,
    )
    clf.fit(data.videos, data.labels, frame_labels=data.shape)
    pred = clf.predict(data.videos[:10])
    assert pred.shape == (10,) and set(pred) <= set(data.labels)
    assert clf.select(data.videos[:3]).shape == (3, 45)  # 25% of 5 x 6 x 6 tokens
    assert 0.0 <= clf.score(data.videos, data.labels) <= 1.0


def test_teacher_targets_shapes():
    torch.manual_seed(0)
    video = torch.rand(3, 4, 3, 16, 16)
    tg = compute_targets(VideoTeacher(4, 16, 3, dim=12), ImageTeacher(16, 2, dim=12), video)
    assert tg.cls.shape == (3, 12) and tg.tokens.shape == (3, 64, 12) and tg.uniqueness.shape == (3, 64)
    assert tg.image.shape == (3, 64, 12)


def test_bad_input_names_the_parameter():
    model = _tiny()
    with pytest.raises(ValueError, match="video must be"):
        model(torch.rand(1, 3, 3, 16, 16))
    with pytest.raises(ValueError, match="NaN"):
        model(torch.full((1, 4, 3, 16, 16), float("nan")))
    with pytest.raises(ValueError, match="video must have 5"):
        model.select(torch.rand(4, 3, 16, 16))
    with pytest.raises(ValueError, match="indices must lie"):
        model.extract(torch.rand(1, 4, 3, 16, 16), torch.tensor([[0, 64]]))
    with pytest.raises(ValueError, match="k must be"):
        model.select(torch.rand(1, 4, 3, 16, 16), k=65)
    with pytest.raises(ValueError, match="k_ratio"):
        LookWhen(4, 16, 3, k_ratio=0.0)
    with pytest.raises(ValueError, match="size"):
        LookWhen(4, 18, 3)
    with pytest.raises(ValueError, match="n_classes"):
        LookWhen(4, 16, 1)
    with pytest.raises(ValueError, match="features"):
        token_uniqueness(torch.rand(2, 1, 3))
    with pytest.raises(ValueError, match="features"):
        frame_normalise(torch.rand(2, 1, 3, 4))
    with pytest.raises(ValueError, match="tau"):
        selection_kl_loss(torch.rand(2, 3), torch.rand(2, 3), tau=0)
    with pytest.raises(ValueError, match="k must be"):
        random_selection(2, 5, 6)
    with pytest.raises(ValueError, match="frames"):
        uniform_temporal_selection(2, 0, 4, 2)
    with pytest.raises(ValueError, match="indices"):
        selection_overlap([0, 1], np.zeros((1, 4), bool))
    with pytest.raises(ValueError, match="noise"):
        make_moving_shapes(4, noise=0.5)
    with pytest.raises(ValueError, match="size"):
        make_moving_shapes(4, size=30, patch=4)
    with pytest.raises(ValueError, match="k_ratio"):
        LookWhenClassifier(k_ratio=2.0)
    with pytest.raises(ValueError, match="dim"):
        LookWhenClassifier(dim=0)
    clf = LookWhenClassifier()
    with pytest.raises(RuntimeError, match="not fitted"):
        clf.predict(np.zeros((1, 4, 3, 16, 16), np.float32))
    with pytest.raises(ValueError, match="labels"):
        clf.fit(np.zeros((2, 4, 3, 16, 16), np.float32), [0.5, 1.5])
    with pytest.raises(TypeError, match="video"):
        clf.fit("clips", [0, 1])
    with pytest.raises(ValueError, match="frame_labels"):
        clf.fit(np.zeros((2, 4, 3, 16, 16), np.float32), [0, 1], frame_labels=[0, -1])
    with pytest.raises(ValueError, match="frame_labels"):
        clf.fit(np.zeros((2, 4, 3, 16, 16), np.float32), [0, 1], frame_labels=[0])
    with pytest.raises(ValueError, match=r"video must hold float values in \[0, 1\]"):
        model(torch.full((1, 4, 3, 16, 16), 200.0))
    with pytest.raises(ValueError, match="metric"):
        token_uniqueness(torch.rand(2, 3, 4), metric="l1")
    with pytest.raises(ValueError, match="task"):
        make_moving_shapes(4, task="colour")


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    assert_quick_verdict("lookwhen", tmp_path)
