"""The real ONNX embedder (regression against known vectors) and the hash embedder."""

from __future__ import annotations

import numpy as np
import pytest

import mempp
from mempp.embedder import DEFAULT_MODEL_ID

KNOWN = {
    "The uptime SLA was raised to 99.95% in October.":
        [-0.033901, -0.064367, -0.033047, 0.01046, -0.007464, -0.009512, -0.046045, 0.057811],
    "Hey Mel! Good to see you! How have you been?":
        [-0.025427, 0.016132, 0.127154, 0.04994, 0.004736, 0.060526, 0.053583, -0.005538],
}


@pytest.fixture(scope="module")
def onnx():
    return mempp.OnnxEmbedder()


@pytest.mark.model
def test_known_vectors(onnx):
    vecs = onnx.embed(list(KNOWN))
    assert vecs.shape == (2, 384) and vecs.dtype == np.float32
    np.testing.assert_allclose(vecs[:, :8], np.array(list(KNOWN.values())), atol=1e-3)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert onnx.model_id == DEFAULT_MODEL_ID and onnx.dim == 384 and onnx.max_tokens == 256


@pytest.mark.model
def test_batching_and_padding_do_not_change_vectors(onnx):
    texts = ["short", "a much longer sentence about the quarterly budget review and its outcome " * 3, "mid length text here"]
    together = onnx.embed(texts, batch_size=3)
    alone = np.vstack([onnx.embed([t]) for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    assert onnx.embed([]).shape == (0, 384)


@pytest.mark.model
def test_window_is_256_tokens(onnx):
    assert len(onnx.tokenizer.encode("word " * 1000).ids) == 256
    a = onnx.embed(["alpha " * 300])[0]
    b = onnx.embed(["alpha " * 300 + "omega " * 50])[0]
    np.testing.assert_allclose(a, b, atol=1e-6)  # words past the window do not count


@pytest.mark.model
def test_semantic_neighbours(onnx):
    q, a, b = onnx.embed(["who approved the service level agreement?", "The SLA was signed off by the CTO.", "Lunch is at noon."])
    assert q @ a > q @ b


def test_model_file_hash_is_checked(tmp_path):
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not a model")
    tok = tmp_path / "tokenizer.json"
    tok.write_text("{}")
    with pytest.raises(mempp.EmbedderError, match="sha256"):
        mempp.OnnxEmbedder(fake, tok, model_sha256="0" * 64)
    with pytest.raises(mempp.EmbedderError, match="tokenizer_path"):
        mempp.OnnxEmbedder(fake)
    with pytest.raises(mempp.EmbedderError, match="no such file"):
        mempp.OnnxEmbedder(tmp_path / "missing.onnx", tok)


def test_cuda_request_warns_without_gpu():
    import onnxruntime as ort

    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("a CUDA provider is present")
    with pytest.warns(RuntimeWarning, match="CUDA"):
        emb = mempp.OnnxEmbedder(device="cuda")
    assert emb.providers == ["CPUExecutionProvider"]


def test_hash_embedder_is_deterministic_and_unit():
    e = mempp.HashEmbedder(64)
    a = e.embed(["Budget review", "budget REVIEW!", ""])
    np.testing.assert_array_equal(a[0], a[1])
    assert np.isclose(np.linalg.norm(a[0]), 1.0) and not a[2].any()
    assert isinstance(e, mempp.Embedder)
