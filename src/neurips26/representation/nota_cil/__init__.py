"""Normalized Tensor Adaptation (NoTA / H-NoTA) for rehearsal-free class-incremental learning.

Paper: NeurIPS 2026 submission (no public arXiv id; method reconstructed from its abstract and the prior work it
extends, SD-LoRA, arXiv 2501.13198, and MPO / tensor-train adapters).

Rehearsal-free class-incremental learning adds one low-rank update per task to a frozen pre-trained model and
sums them. The paper argues the MAGNITUDE of the accumulated update drives forgetting, and proposes:

- MPO adapters: each task's update is a tensor-train matrix dW_t[(i_1..i_K),(j_1..j_K)] = C_1[i_1,j_1] ...
  C_K[i_K,j_K] with cores C_k of shape (r_{k-1}, m_k, n_k, r_k): sum_k r_{k-1} m_k n_k r_k parameters instead of
  r (m + n) for LoRA at the same rank, last core zero-initialised so dW_t = 0 at task start;
- global normalisation of the accumulated update [R]:

      S_T = sum_{t<=T} alpha_t dW_t,        W_T = W_0 + gamma S_T / ||S_T||_F,

  so ||W_T - W_0||_F = gamma whatever the number of tasks (against SD-LoRA's task-wise normalisation
  W_T = W_0 + sum_t alpha_t dW_t / ||dW_t||_F, whose magnitude grows with the alphas of later tasks);
- H-NoTA [R]: identity-initialised r x r modulation matrices between the cores of historical adapters,
  dW_t' = C_1 M_{t,1} C_2 ... C_K, trained while later tasks are learned.

Training task T: the new adapter's cores, every alpha, the new classes' classifier block; cross-entropy with
logits masked to the task's classes; no stored data. Inference: one merged weight per layer, a classifier over
all classes seen. [R] marks parts reconstructed from the abstract: the gamma schedule (gamma = ||S_1||_F after
the first task, fixed), alpha initialisation (1) and the H-NoTA wiring.
"""

from .adapters import ADAPTERS, NORMALIZATIONS, AdaptedLinear, LoRAAdapter, MPOAdapter, factorize
from .learner import (
    ClassIncrementalLearner,
    SimpleCIL,
    StreamResult,
    mlp_backbone,
    pretrain_denoising_autoencoder,
    run_stream,
)
from .streams import digits_stream, gaussian_class_data, gaussian_stream, split_tasks

__all__ = [
    "MPOAdapter",
    "LoRAAdapter",
    "AdaptedLinear",
    "ClassIncrementalLearner",
    "SimpleCIL",
    "pretrain_denoising_autoencoder",
    "run_stream",
    "digits_stream",
    "gaussian_class_data",
    "gaussian_stream",
    "ADAPTERS",
    "NORMALIZATIONS",
    "StreamResult",
    "factorize",
    "mlp_backbone",
    "split_tasks",
]
