"""Nexus optimizer: its inner loop against a hand-written oracle, the AdamW limit, state round trips, bad input."""

import copy

import numpy as np
import pytest
import torch

from neurips26.harness.testing import assert_quick_verdict
from neurips26.lm.nexus import Nexus
from neurips26.lm.nexus.protocol import Snapshot, TrainTrace, gradient_cosine, match_training_loss
from neurips26.lm.nexus.sources import multi_source_classification


def mlp(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))


def batches(seed=0, K=4, steps=10):
    g = torch.Generator().manual_seed(seed)
    return [
        [(torch.randn(16, 5, generator=g), torch.randn(16, 1, generator=g)) for _ in range(K)]
        for _ in range(steps)
    ]


def closures(model, step_batches):
    def make(x, y):
        def closure():
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            return loss

        return closure

    return [make(x, y) for x, y in step_batches]


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def oracle_pseudo_gradient(model, step_batches, beta, normalize):
    """The reconstruction written out literally: K sequential inner steps on a copy, then the digest's
    displacement formula (for 'step'/'none' rescaled by nu; for 'micro_batch' by the mean norm)."""
    m = copy.deepcopy(model)
    theta = flat(m)
    norms, grads = [], []
    for x, y in step_batches:
        m.zero_grad()
        ((m(x) - y) ** 2).mean().backward()
        g = torch.cat([p.grad.reshape(-1) for p in m.parameters()])
        grads.append(g)
        norms.append(g.norm())
        scale = {"step": 1 / norms[0], "none": 1.0, "micro_batch": 1 / norms[-1]}[normalize]
        with torch.no_grad():
            offset = 0
            for p in m.parameters():
                n = p.numel()
                p -= beta * scale * g[offset : offset + n].view_as(p)
                offset += n
    K = len(step_batches)
    displacement = theta - flat(m)
    if normalize == "step":
        return displacement * norms[0] / (beta * K)
    if normalize == "none":
        return displacement / (beta * K)
    return displacement / (beta * K) * (sum(norms) / K)


@pytest.mark.parametrize("normalize", ["step", "none", "micro_batch"])
def test_pseudo_gradient_matches_the_literal_inner_loop(normalize):
    model = mlp()
    step_batches = batches()[0]
    expected = oracle_pseudo_gradient(model, step_batches, beta=0.3, normalize=normalize)
    # SGD(lr=1) as the base optimizer: theta_new = theta - pseudo_grad
    opt = Nexus(
        model.parameters(), inner_lr=0.3, base=torch.optim.SGD, normalize=normalize, shuffle=False, lr=1.0
    )
    before = flat(model)
    opt.step(closures(model, step_batches))
    torch.testing.assert_close(before - flat(model), expected, rtol=1e-4, atol=1e-6)


def test_inner_lr_zero_reproduces_adamw_step_by_step():
    a, b = mlp(), mlp()
    opt_a = torch.optim.AdamW(a.parameters(), lr=1e-2, weight_decay=0.1)
    opt_b = Nexus(b.parameters(), inner_lr=0.0, lr=1e-2, weight_decay=0.1, shuffle=False)
    for step_batches in batches(steps=25):
        opt_a.zero_grad()
        for x, y in step_batches:
            ((a(x) - y) ** 2).mean().backward()
        for p in a.parameters():
            p.grad /= len(step_batches)
        opt_a.step()
        opt_b.step(closures(b, step_batches))
        torch.testing.assert_close(flat(a), flat(b), rtol=0, atol=1e-6)


def test_tiny_inner_lr_approaches_adamw():
    a, b = mlp(), mlp()
    opt_a = torch.optim.AdamW(a.parameters(), lr=1e-2)
    opt_b = Nexus(b.parameters(), inner_lr=1e-7, lr=1e-2)
    for step_batches in batches(steps=10):
        opt_a.zero_grad()
        for x, y in step_batches:
            ((a(x) - y) ** 2).mean().backward()
        for p in a.parameters():
            p.grad /= len(step_batches)
        opt_a.step()
        opt_b.step(closures(b, step_batches))
    torch.testing.assert_close(flat(a), flat(b), rtol=0, atol=1e-4)


def test_parameters_return_to_theta_before_the_base_step():
    """With lr = 0 the base step is a no-op: the inner loop must leave no trace on the parameters."""
    model = mlp()
    before = flat(model)
    opt = Nexus(model.parameters(), inner_lr=0.5, base=torch.optim.SGD, lr=0.0)
    opt.step(closures(model, batches()[0]))
    assert torch.equal(flat(model), before)


def test_state_dict_round_trip_and_schedulers():
    model = mlp()
    opt = Nexus(model.parameters(), inner_lr=0.2, lr=1e-2, weight_decay=0.05, shuffle=False)
    for step_batches in batches(steps=3):
        opt.step(closures(model, step_batches))
    state = copy.deepcopy(opt.state_dict())
    clone = copy.deepcopy(model)
    opt2 = Nexus(clone.parameters(), inner_lr=0.2, lr=1e-2, weight_decay=0.05, shuffle=False)
    opt2.load_state_dict(state)
    nxt = batches(seed=5)[0]
    opt.step(closures(model, nxt))
    opt2.step(closures(clone, nxt))
    assert torch.equal(flat(model), flat(clone))  # same base state, same data: the same next step
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    opt.step(closures(model, nxt))
    sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(5e-3) and opt.base.param_groups[0][
        "lr"
    ] == pytest.approx(5e-3)
    with pytest.raises(ValueError, match="state_dict"):
        opt.load_state_dict({"state": {}})


def test_memory_is_one_parameter_copy():
    model = mlp()
    opt = Nexus(model.parameters(), inner_lr=0.1)
    opt.step(closures(model, batches()[0]))
    assert sum(t.numel() for t in opt._theta) == sum(p.numel() for p in model.parameters())


def test_nexus_bad_input():
    params = list(mlp().parameters())
    with pytest.raises(ValueError, match="inner_lr"):
        Nexus(params, inner_lr=-0.1)
    with pytest.raises(ValueError, match="learning rate"):
        Nexus(params, lr=-1.0)  # the base optimizer's own validation
    with pytest.raises(ValueError, match="normalize"):
        Nexus(params, normalize="layer")
    with pytest.raises(TypeError, match="base"):
        Nexus(params, base=object)
    opt = Nexus(params)
    with pytest.raises(ValueError, match="K >= 1"):
        opt.step([])
    with pytest.raises(ValueError, match="K >= 1"):
        opt.step()
    with pytest.raises(TypeError, match="callable"):
        opt.step([1, 2])


def test_multi_source_data_has_source_specific_spurious_blocks():
    data = multi_source_classification(n_sources=3, core_dim=4, block=2, rng=0)
    rng = np.random.default_rng(0)
    for s in range(3):
        X, y = data.sample(s, 4000, rng)
        sign = 2 * y.numpy() - 1
        for j in range(3):
            block = X[:, 4 + 2 * j : 6 + 2 * j].numpy() @ data.directions[j]
            corr = np.corrcoef(block, sign)[0, 1]
            assert (corr > 0.8) if j == s else (abs(corr) < 0.1)
    X, y = data.sample(-1, 4000, rng)
    for j in range(3):
        assert (
            abs(np.corrcoef(X[:, 4 + 2 * j : 6 + 2 * j].numpy() @ data.directions[j], y.numpy())[0, 1]) < 0.1
        )
    with pytest.raises(ValueError, match="source"):
        data.sample(3, 10, rng)
    with pytest.raises(ValueError, match="n_sources"):
        multi_source_classification(n_sources=1)


def test_match_training_loss_and_gradient_cosine():
    def trace(losses):
        return TrainTrace([Snapshot(i * 10, v, {}) for i, v in enumerate(losses)])

    a, b = trace([1.0, 0.6, 0.4, 0.3]), trace([1.0, 0.8, 0.5, 0.45])
    sa, sb = match_training_loss(a, b)
    assert (sa.step, sb.step) == (20, 30)  # target 0.45: a's first snapshot at or below it
    model = torch.nn.Linear(2, 1, bias=False)
    x = torch.tensor([[1.0, 0.0]])
    same = [(x, torch.tensor([[1.0]])), (x, torch.tensor([[2.0]]))]

    def loss_fn(m, x, y):
        return ((m(x) - y) ** 2).mean()

    assert gradient_cosine(model, loss_fn, same) == pytest.approx(1.0)
    opposite = [(x, torch.tensor([[1.0]])), (x, torch.tensor([[-1.0]]))]
    assert gradient_cosine(model, loss_fn, opposite) == pytest.approx(-1.0)


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    assert_quick_verdict("nexus-optimizer", tmp_path)
