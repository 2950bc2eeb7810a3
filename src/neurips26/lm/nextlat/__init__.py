"""Next-Latent prediction (Teoh et al., "Next-Latent Prediction Transformers Learn Compact World Models",
arXiv 2511.05963): a transformer LM that also learns latent dynamics ``h_{t+1} ~ p_psi(h_t, x_{t+1})`` over its
own hidden states, with self-speculative decoding from those dynamics.

Usage on your own token sequences (``tokens``: an (N, L) integer array)::

    from neurips26.lm import GPTConfig, SequenceDataset, TrainConfig, train
    from neurips26.lm.nextlat import NextLatModel, self_speculative_decode

    model = NextLatModel(GPTConfig(vocab_size=V, context=L, n_layer=2, d_model=64), lambda_h=1.0, lambda_kl=0.5)
    train(model, SequenceDataset(tokens), TrainConfig(steps=1000, batch_size=16, lr=3e-3))
    out = self_speculative_decode(model, prompt, max_new_tokens=32, draft=4)  # exactly greedy decoding
    out.tokens, out.forward_passes, out.saved                                  # passes saved vs greedy

The deployed model is ``model.gpt`` (a plain :class:`~neurips26.lm.GPT`); the dynamics MLP is training-only.
"""

from .metrics import effective_rank, linear_probe_accuracy
from .nextlat import LatentDynamics, MultiTokenModel, NextLatModel
from .speculative import SpeculativeResult, greedy_decode, self_speculative_decode
from .worlds import GridWalk, PathStar, grid_walk, path_star

__all__ = [
    "NextLatModel",
    "LatentDynamics",
    "MultiTokenModel",
    "SpeculativeResult",
    "self_speculative_decode",
    "greedy_decode",
    "grid_walk",
    "path_star",
    "effective_rank",
    "linear_probe_accuracy",
    "GridWalk",
    "PathStar",
]
