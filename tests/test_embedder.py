"""The real ONNX embedders (regression against known vectors, hash checks) and the hash embedder."""

from __future__ import annotations

import shutil

from pathlib import Path

import numpy as np
import pytest

import mempp
from mempp.embedder import (
    BGE_SMALL, DEFAULT_MODEL, DEFAULT_MODEL_ID, DEFAULT_MODEL_SHA256, DEFAULT_TOKENIZER_SHA256, MINILM, MODELS, embed_queries, model_spec,
)
from mempp.storage.fsutil import sha256_file

KNOWN = {
    "The uptime SLA was raised to 99.95% in October.":
        [-0.033901, -0.064367, -0.033047, 0.01046, -0.007464, -0.009512, -0.046045, 0.057811],
    "Hey Mel! Good to see you! How have you been?":
        [-0.025427, 0.016132, 0.127154, 0.04994, 0.004736, 0.060526, 0.053583, -0.005538],
}


@pytest.fixture(scope="module")
def onnx():
    return mempp.OnnxEmbedder(model="all-MiniLM-L6-v2")


@pytest.mark.model
def test_known_vectors(onnx):
    vecs = onnx.embed(list(KNOWN))
    assert vecs.shape == (2, 384) and vecs.dtype == np.float32
    np.testing.assert_allclose(vecs[:, :8], np.array(list(KNOWN.values())), atol=1e-3)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert onnx.model_id == MINILM.model_id and onnx.dim == 384 and onnx.max_tokens == 256


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


# bge-small-en-v1.5 (int8 ONNX from compartment 4.13.0): documents bare, queries behind the
# instruction; first 8 dimensions, computed once with this code (each text alone).
BGE_DOCS = {
    "The uptime SLA was raised to 99.95% in October.":
        [-0.048436, 0.043943, 0.004444, -0.010142, 0.005348, 0.034038, 0.005127, 0.015993],
    "Hey Mel! Good to see you! How have you been?":
        [-0.030768, -0.061582, 0.058307, -0.011741, 0.012008, -0.008635, 0.101216, 0.067892],
    "who approved the service level agreement?":
        [-0.052577, -0.004171, 0.02482, -0.10132, -0.061294, -0.005907, 0.025308, 0.052321],
}
BGE_QUERIES = {
    "The uptime SLA was raised to 99.95% in October.":
        [-0.070731, 0.006232, 0.010415, -0.003461, 0.010868, 0.032202, -0.020555, 0.001678],
    "who approved the service level agreement?":
        [-0.047331, 0.001251, 0.006117, -0.086236, -0.04897, -0.001051, 0.019695, 0.050839],
}


@pytest.fixture(scope="module")
def bge():
    return mempp.OnnxEmbedder(model="bge-small-en-v1.5")


@pytest.mark.model
def test_bge_known_vectors(bge):
    assert (bge.model_id, bge.dim, bge.max_tokens, bge.pooling) == (BGE_SMALL.model_id, 384, 512, "cls")
    assert bge.model_sha256 == BGE_SMALL.model_sha256
    # The values were recorded where ONNX Runtime's int8 matrix products use VNNI. Without it (AVX2
    # only, e.g. AMD EPYC) ONNX Runtime multiplies u8 by s8 with vpmaddubsw, whose 16-bit pair sums
    # saturate: components move by up to 1.4e-3 there (seen on this project's AVX2 machine).
    atol = 1e-3 if _cpu_has_vnni() else 2e-3
    docs = bge.embed(list(BGE_DOCS))
    np.testing.assert_allclose(docs[:, :8], np.array(list(BGE_DOCS.values())), atol=atol)
    np.testing.assert_allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    queries = bge.embed_queries(list(BGE_QUERIES))
    np.testing.assert_allclose(queries[:, :8], np.array(list(BGE_QUERIES.values())), atol=atol)


def _cpu_has_vnni() -> bool:
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return "avx512_vnni" in flags or "avx_vnni" in flags


@pytest.mark.model
def test_bge_prefix_goes_on_queries_only(bge):
    q = "who approved the service level agreement?"
    prefix = "Represent this sentence for searching relevant passages: "
    assert bge.query_prefix == prefix
    np.testing.assert_allclose(bge.embed_queries([q]), bge.embed([prefix + q]), atol=1e-6)
    assert not np.allclose(bge.embed_queries([q]), bge.embed([q]), atol=1e-3)
    np.testing.assert_allclose(embed_queries(bge, [q]), bge.embed_queries([q]))
    # an embedder without embed_queries embeds queries as documents
    h = mempp.HashEmbedder()
    np.testing.assert_array_equal(embed_queries(h, [q]), h.embed([q]))


@pytest.mark.model
def test_bge_vectors_do_not_depend_on_the_batch(bge):
    # Dynamically quantized: batched with others a text's vector would move; each text runs alone.
    assert bge.alone
    texts = ["short", "a much longer sentence about the quarterly budget review and its outcome " * 3, "mid length text here"]
    np.testing.assert_allclose(bge.embed(texts, batch_size=3), np.vstack([bge.embed([t]) for t in texts]), atol=1e-6)
    assert bge.embed([]).shape == (0, 384)


@pytest.mark.model
def test_bge_window_is_512_tokens(bge):
    assert len(bge.tokenizer.encode("word " * 1000).ids) == 512
    a = bge.embed(["alpha " * 600])[0]
    np.testing.assert_allclose(a, bge.embed(["alpha " * 600 + "omega " * 50])[0], atol=1e-6)
    assert not np.allclose(bge.embed(["alpha " * 400])[0], bge.embed(["alpha " * 400 + "omega " * 50])[0], atol=1e-3)
    vecs, owner = bge.embed_windows(["short", "word " * 1200, "alpha beta " * 300], stride=256)
    # windows of 510 tokens after the first, every 256, while the text goes on past the window
    assert owner.tolist() == [1, 1, 1, 2] and vecs.shape == (4, 384)


def test_shipped_files_match_their_hashes():
    for spec in MODELS.values():
        model, tokenizer = spec.files()
        assert sha256_file(model) == spec.model_sha256 and sha256_file(tokenizer) == spec.tokenizer_sha256
    assert BGE_SMALL.files()[0].stat().st_size == 34_014_426


def test_default_model_constants_describe_the_default_model():
    spec = MODELS[DEFAULT_MODEL]
    assert (DEFAULT_MODEL_ID, DEFAULT_MODEL_SHA256, DEFAULT_TOKENIZER_SHA256) == (spec.model_id, spec.model_sha256, spec.tokenizer_sha256)
    assert spec is BGE_SMALL and DEFAULT_MODEL_SHA256 != MINILM.model_sha256


@pytest.mark.parametrize("which", [0, 1])
def test_damaged_bge_file_is_refused(tmp_path, which):
    model, tokenizer = (tmp_path / "model.onnx", tmp_path / "tokenizer.json")
    for src, dst in zip(BGE_SMALL.files(), (model, tokenizer)):
        shutil.copyfile(src, dst)
    damaged = (model, tokenizer)[which]
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0x01
    damaged.write_bytes(bytes(data))
    with pytest.raises(mempp.EmbedderError, match="sha256"):
        mempp.OnnxEmbedder(model, tokenizer, model_sha256=BGE_SMALL.model_sha256, tokenizer_sha256=BGE_SMALL.tokenizer_sha256,
                           pooling="cls", max_tokens=512)


def test_model_names():
    assert model_spec("bge-small") is model_spec("bge-small-en-v1.5") is model_spec(BGE_SMALL.model_id) is BGE_SMALL
    assert model_spec("minilm") is MINILM and DEFAULT_MODEL in MODELS
    with pytest.raises(mempp.EmbedderError, match="bge-small"):
        model_spec("bge-large")
    with pytest.raises(mempp.EmbedderError, match="not both"):
        mempp.OnnxEmbedder("x.onnx", model="bge-small")
