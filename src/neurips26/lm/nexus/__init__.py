"""Nexus (Chen et al., "Nexus: Same Pretraining Loss, Better Downstream Generalization via Common Minima", arXiv
2604.09258): an optimizer wrapper whose inner loop over the sources' micro-batches ascends their gradient
similarity, so training ends near a common minimum of the sources. The update is the digest's reconstruction.
"""

from .optimizer import Nexus

__all__ = ["Nexus"]
