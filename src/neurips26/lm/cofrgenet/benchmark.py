"""Peer benchmark: the stack's GPT against the same model built from ``torch.nn.TransformerEncoderLayer``.

Same size (2 layers, d_model 64/96, 4 heads, 4x GELU MLP, learned positions, tied head), same weights (copied),
same batches of stdlib source characters, one process: training tokens/s of each (forward, backward, AdamW step),
interleaved, minimum over repeats, timed in process CPU time on one thread. The stack's row must reach >= 0.9x the
PyTorch reference. The CoFrGeNet blocks in the stack's FFN slot are timed beside them.
"""

from __future__ import annotations

import time

import torch

from neurips26.lm import GPT, GPTConfig, stdlib_corpus
from neurips26.lm.reference import TorchEncoderLM, copy_weights


def _rate(
    models: dict[str, torch.nn.Module], x: torch.Tensor, y: torch.Tensor, repeats: int, steps: int
) -> dict:
    opts = {k: torch.optim.AdamW(m.parameters(), lr=1e-4) for k, m in models.items()}

    def step(k: str) -> None:
        loss = torch.nn.functional.cross_entropy(models[k](x).flatten(0, 1), y.flatten())
        loss.backward()
        opts[k].step()
        opts[k].zero_grad(set_to_none=True)

    best = {k: float("inf") for k in models}
    for k in models:
        step(k)
    for _ in range(repeats):
        for k in models:
            t0 = time.process_time()
            for _ in range(steps):
                step(k)
            best[k] = min(best[k], (time.process_time() - t0) / steps)
    return {k: x.numel() / v for k, v in best.items()}


def main(quick: bool = True) -> list[dict]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        corpus = stdlib_corpus(max_chars=300_000)
        rows = []
        shapes = [(64, 64, 16)] if quick else [(64, 64, 16), (96, 128, 32), (128, 128, 32)]
        for d_model, context, batch in shapes:
            config = GPTConfig(
                vocab_size=corpus.vocab_size, context=context, n_layer=2, n_head=4, d_model=d_model
            )
            torch.manual_seed(0)
            ours = GPT(config)
            models: dict[str, torch.nn.Module] = {
                "neurips26.lm GPT (MLP)": ours,
                "torch TransformerEncoderLayer": copy_weights(ours, TorchEncoderLM(config)),
            }
            for name, ffn, kw in [
                ("neurips26.lm GPT (Cffn d=5)", "cffn", {"depth": 5}),
                ("neurips26.lm GPT (gated CF log/exp d=5)", "gated_cf", {"depth": 5}),
            ]:
                torch.manual_seed(0)
                models[name] = GPT(GPTConfig(**{**config.to_dict(), "ffn": ffn, "ffn_kwargs": kw}))
            g = torch.Generator().manual_seed(0)
            x, y = corpus.train.sample(batch, context, g)
            rates = _rate(models, x, y, repeats=5 if quick else 7, steps=3)
            ref = rates["torch TransformerEncoderLayer"]
            for name, rate in rates.items():
                rows.append(
                    {
                        "d_model": d_model,
                        "context": context,
                        "batch": batch,
                        "model": name,
                        "params": sum(p.numel() for p in models[name].parameters()),
                        "training tokens/s": rate,
                        "ratio to TransformerEncoderLayer": rate / ref,
                    }
                )
        return rows
    finally:
        torch.set_num_threads(threads)


if __name__ == "__main__":
    for row in main():
        print(row)
