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


def test_memory_is_two_parameter_copies():
    """The start point and the running sum of the inner loop (kept apart from .grad, which closures may zero)."""
    model = mlp()
    opt = Nexus(model.parameters(), inner_lr=0.1)
    opt.step(closures(model, batches()[0]))
    n = sum(p.numel() for p in model.parameters())
    assert sum(t.numel() for t in opt._theta) == n and sum(t.numel() for t in opt._acc) == n


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
    with pytest.raises(TypeError, match="callable"):
        opt.step([1, 2])
    with pytest.raises(TypeError, match="closure"):
        opt.step(3)
    with pytest.raises(ValueError, match="inner_steps"):
        Nexus(params, inner_steps=0)
    with pytest.raises(ValueError, match="inner_steps"):
        Nexus(params, inner_steps=2.0)
    with pytest.raises(ValueError, match="inner_lr"):
        Nexus([{"params": params, "inner_lr": float("nan")}])
    with pytest.raises(TypeError, match="generator"):
        Nexus(params, generator=0)
    with pytest.raises(TypeError, match="shuffle"):
        Nexus(params, shuffle="yes")
    with pytest.raises(ValueError, match="state_dict"):
        opt.load_state_dict({"state": {}})
    with pytest.raises(ValueError, match="state_dict"):
        opt.load_state_dict([])
    # a list of closures is a whole outer step: refused while a step() micro-batch is pending
    model = mlp()
    opt = Nexus(model.parameters(), inner_steps=2)
    x, y = batches()[0][0]
    ((model(x) - y) ** 2).mean().backward()
    opt.step()
    with pytest.raises(ValueError, match="pending"):
        opt.step(closures(model, batches()[0]))


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


# --- torch.optim conventions ---------------------------------------------------------------------------------
def zeroing_closures(model, opt, step_batches):
    """The usual torch idiom: each closure zeroes the gradients itself."""

    def make(x, y):
        def closure():
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            return loss

        return closure

    return [make(x, y) for x, y in step_batches]


def test_is_a_torch_optimizer_with_shared_param_groups():
    model = mlp()
    w, b = [p for p in model.parameters() if p.ndim == 2], [p for p in model.parameters() if p.ndim == 1]
    opt = Nexus([{"params": w, "inner_lr": 0.3}, {"params": b, "weight_decay": 0.0}], inner_lr=0.1, lr=1e-2)
    assert isinstance(opt, torch.optim.Optimizer)
    assert opt.param_groups is opt.base.param_groups and opt.state is opt.base.state
    assert [g["inner_lr"] for g in opt.param_groups] == [0.3, 0.1]
    assert [g["weight_decay"] for g in opt.param_groups] == [0.01, 0.0]
    sd = opt.state_dict()
    assert {"state", "param_groups"} <= set(sd) and sd["param_groups"][0]["params"] == [0, 1]
    # torch's own format: a plain AdamW loads it
    other = mlp()
    ow = [p for p in other.parameters() if p.ndim == 2]
    ob = [p for p in other.parameters() if p.ndim == 1]
    torch.optim.AdamW([{"params": ow}, {"params": ob}], lr=1e-2).load_state_dict(sd)


@pytest.mark.parametrize("normalize", ["step", "none", "micro_batch"])
def test_zero_grad_closures_equal_the_no_closure_path(normalize):
    """Three drivers of the same outer steps (shuffle off): a list of closures that never zero, a list of
    closures that call zero_grad themselves, and the training-loop form zero_grad(); backward(); step()."""
    models = [mlp(), mlp(), mlp(), mlp()]
    opts = [
        Nexus(m.parameters(), inner_lr=0.3, normalize=normalize, shuffle=False, inner_steps=4, lr=1e-2)
        for m in models
    ]
    for step_batches in batches(steps=4):
        opts[0].step(closures(models[0], step_batches))
        opts[1].step(zeroing_closures(models[1], opts[1], step_batches))
        for x, y in step_batches:  # no closure
            opts[2].zero_grad()
            ((models[2](x) - y) ** 2).mean().backward()
            opts[2].step()
        for c in zeroing_closures(models[3], opts[3], step_batches):  # one closure per call
            opts[3].step(c)
    for m in models[1:]:
        assert torch.equal(flat(m), flat(models[0]))


def test_no_closure_path_without_zeroing_in_between():
    """step() reads .grad as it is (torch convention): forgetting zero_grad accumulates, as with AdamW."""
    a, b = mlp(), mlp()
    oa = Nexus(a.parameters(), inner_lr=0.0, inner_steps=1, lr=1e-2)
    ob = torch.optim.AdamW(b.parameters(), lr=1e-2)
    for step_batches in batches(steps=3):
        for m, o in ((a, oa), (b, ob)):
            for x, y in step_batches:
                ((m(x) - y) ** 2).mean().backward()
                o.step()
    assert torch.equal(flat(a), flat(b))


@pytest.mark.parametrize("mid_step", [False, True])
def test_state_dict_round_trip_continues_bit_exactly(mid_step):
    """Save, build a fresh optimizer, load_state_dict(other.state_dict()), continue 5 outer steps: identical
    parameters (the default shuffles, so the generator must travel in the state dict)."""
    data = batches(seed=3, steps=9)
    model = mlp()
    opt = Nexus(model.parameters(), inner_lr=0.3, lr=1e-2, weight_decay=0.05, inner_steps=4)
    for step_batches in data[:3]:
        opt.step(closures(model, step_batches))
    if mid_step:  # two of four micro-batches of the next outer step, training-loop form
        for x, y in data[3][:2]:
            opt.zero_grad()
            ((model(x) - y) ** 2).mean().backward()
            opt.step()
    saved = copy.deepcopy(opt.state_dict())
    clone = copy.deepcopy(model)
    other = Nexus(clone.parameters(), inner_lr=0.3, lr=1e-2, weight_decay=0.05, inner_steps=4)
    other.load_state_dict(saved)

    def finish(m, o):
        if mid_step:
            for x, y in data[3][2:]:
                o.zero_grad()
                ((m(x) - y) ** 2).mean().backward()
                o.step()
        for step_batches in data[4:]:
            o.step(closures(m, step_batches))

    finish(model, opt)
    finish(clone, other)
    assert torch.equal(flat(model), flat(clone))


def test_state_dict_survives_a_weights_only_checkpoint(tmp_path):
    model = mlp()
    opt = Nexus(model.parameters(), inner_lr=0.3)
    opt.step(closures(model, batches()[0]))
    torch.save(opt.state_dict(), tmp_path / "opt.pt")
    loaded = torch.load(tmp_path / "opt.pt", weights_only=True)
    other = Nexus(copy.deepcopy(model).parameters(), inner_lr=0.3)
    other.load_state_dict(loaded)
    assert torch.equal(other.generator.get_state(), opt.generator.get_state())


def test_works_inside_the_stacks_training_loop():
    """lm.training.train steps the optimizer the torch way (zero_grad, backward, clip, step())."""
    from neurips26.lm.corpora import TokenStream
    from neurips26.lm.training import TrainConfig, train
    from neurips26.lm.transformer import GPT, GPTConfig

    tokens = TokenStream(torch.randint(0, 11, (4000,), generator=torch.Generator().manual_seed(0)))
    cfg = TrainConfig(steps=24, batch_size=4, context=16, lr=3e-3, seed=0, log_every=1)

    def gpt():
        torch.manual_seed(0)
        return GPT(GPTConfig(vocab_size=11, context=16, n_layer=1, n_head=2, d_model=16))

    a, b, c = gpt(), gpt(), gpt()
    res_a = train(a, tokens, cfg, optimizer=torch.optim.AdamW(a.parameters(), lr=3e-3))
    res_b = train(b, tokens, cfg, optimizer=Nexus(b.parameters(), inner_lr=0.0, inner_steps=1, lr=3e-3))
    assert torch.equal(flat(a), flat(b)) and res_a.train_loss == res_b.train_loss  # K = 1: the base optimizer
    res_c = train(c, tokens, cfg, optimizer=Nexus(c.parameters(), inner_lr=0.2, inner_steps=4, lr=3e-3))
    assert res_c.finite and res_c.steps == 24 and not torch.equal(flat(c), flat(a))


# --- an independent oracle: the paper's formula in numpy, closed-form gradients, AdamW written out ---------------
def _ls_grad(theta, X, y):
    return 2.0 / len(y) * X.T @ (X @ theta - y)


def _oracle_run(theta, data, beta, normalize, lr, wd, betas=(0.9, 0.999), eps=1e-8):
    """Least squares per micro-batch, K sequential inner steps, pseudo-gradient, then AdamW (decoupled decay)."""
    m = np.zeros_like(theta)
    v = np.zeros_like(theta)
    for t, step_batches in enumerate(data, start=1):
        tilde = theta.copy()
        grads = []
        for X, y in step_batches:
            g = _ls_grad(tilde, X, y)
            grads.append(g)
            nu = {"step": np.linalg.norm(grads[0]), "none": 1.0, "micro_batch": np.linalg.norm(g)}[normalize]
            tilde = tilde - beta * g / nu
        if normalize == "micro_batch":  # mean unit direction times the mean norm
            norms = [np.linalg.norm(g) for g in grads]
            pseudo = np.mean([g / n for g, n in zip(grads, norms)], axis=0) * np.mean(norms)
        else:
            pseudo = np.mean(grads, axis=0)
        theta = theta * (1 - lr * wd)
        m = betas[0] * m + (1 - betas[0]) * pseudo
        v = betas[1] * v + (1 - betas[1]) * pseudo**2
        mhat, vhat = m / (1 - betas[0] ** t), v / (1 - betas[1] ** t)
        theta = theta - lr * mhat / (np.sqrt(vhat) + eps)
    return theta


@pytest.mark.parametrize("normalize", ["step", "none", "micro_batch"])
@pytest.mark.parametrize("closure_style", ["plain", "zero_grad", "no_closure"])
def test_update_matches_an_independent_numpy_oracle(normalize, closure_style):
    rng = np.random.default_rng(7)
    n, K, steps = 6, 3, 5
    data = [[(rng.normal(size=(10, n)), rng.normal(size=10)) for _ in range(K)] for _ in range(steps)]
    theta0 = rng.normal(size=n)
    beta, lr, wd = 0.2, 0.05, 0.1
    expected = _oracle_run(theta0.copy(), data, beta, normalize, lr, wd)

    w = torch.nn.Parameter(torch.tensor(theta0))
    opt = Nexus([w], inner_lr=beta, normalize=normalize, shuffle=False, inner_steps=K, lr=lr, weight_decay=wd)

    def loss_of(X, y):
        return ((torch.as_tensor(X) @ w - torch.as_tensor(y)) ** 2).mean()

    for step_batches in data:
        if closure_style == "no_closure":
            for X, y in step_batches:
                opt.zero_grad()
                loss_of(X, y).backward()
                opt.step()
            continue

        def make(X, y):
            def closure():
                if closure_style == "zero_grad":
                    opt.zero_grad()
                loss = loss_of(X, y)
                loss.backward()
                return loss

            return closure

        opt.step([make(X, y) for X, y in step_batches])
    np.testing.assert_allclose(w.detach().numpy(), expected, rtol=1e-10, atol=1e-12)


def test_second_order_coefficient_is_one_half():
    """Averaged over all K! orders, (pseudo-gradient - mean gradient) / beta -> -(1/(2K)) grad sum_{j<k}<g_j, g_k>
    as beta -> 0 (normalize="none", quadratics: closed-form Hessians)."""
    import itertools

    rng = np.random.default_rng(0)
    n, K, beta = 4, 3, 1e-6
    A = [rng.normal(size=(n, n)) for _ in range(K)]
    H = [a @ a.T / n + np.eye(n) for a in A]
    b = [rng.normal(size=n) for _ in range(K)]
    theta0 = rng.normal(size=n)
    g = [h @ theta0 - c for h, c in zip(H, b)]
    # grad of sum_{j<k} <H_j th - b_j, H_k th - b_k> = sum_{j<k} (H_j g_k + H_k g_j)
    grad_pairs = sum(H[j] @ g[k] + H[k] @ g[j] for j in range(K) for k in range(j + 1, K))
    pseudos = []
    for order in itertools.permutations(range(K)):
        w = torch.nn.Parameter(torch.tensor(theta0))
        opt = Nexus([w], inner_lr=beta, normalize="none", shuffle=False, base=torch.optim.SGD, lr=1.0)

        def make(k, w=w):
            def closure():
                loss = 0.5 * w @ torch.tensor(H[k]) @ w - torch.tensor(b[k]) @ w
                loss.backward()
                return loss

            return closure

        opt.step([make(k) for k in order])
        pseudos.append(theta0 - w.detach().numpy())  # SGD(lr=1): theta - pseudo-gradient
    coefficient_term = (np.mean(pseudos, axis=0) - np.mean(g, axis=0)) / beta
    np.testing.assert_allclose(coefficient_term, -grad_pairs / (2 * K), rtol=1e-4, atol=1e-6)


@pytest.mark.experiment
def test_quick_reproduction(tmp_path):
    assert_quick_verdict("nexus-optimizer", tmp_path)
