"""The measurement of docs/SPEED.md, *Reading less* (``mempp.bench.code_bounds``): its bound never
drops a document of the exact top ``depth`` (brute force), and fewer bits leave more to rescore."""

from __future__ import annotations

import json

import numpy as np

from mempp.bench import code_bounds


def test_the_bound_keeps_every_document_of_the_exact_top_and_fewer_bits_keep_more(tmp_path, capsys):
    rng = np.random.default_rng(0)
    centres = code_bounds.unit(rng.standard_normal((8, 64)))
    docs = code_bounds.unit(centres[rng.integers(0, 8, 3000)] + 0.4 * rng.standard_normal((3000, 64)) / 8)
    questions = code_bounds.unit(centres[rng.integers(0, 8, 40)] + 0.4 * rng.standard_normal((40, 64)) / 8)
    for bits in (8, 6, 4):
        for per_dim in (False, True):
            approx, err = code_bounds.code(docs, bits, per_dim, centred=True)
            assert np.all(np.abs(np.einsum("ij,ij->i", docs - approx, docs - approx) - err ** 2) < 1e-5)
            assert np.all(np.abs((docs - approx) @ questions.T) <= err[:, None] + 1e-6)  # |q . e| <= |e|
            for q in questions:
                est = approx @ q
                got = code_bounds.kept(est, err, 50)
                assert got[np.argsort(-(docs @ q))[:50]].all()  # the exact top is never dropped
                floor = np.sort(est - err)[::-1][49]  # brute force: the 50th best lower bound
                assert np.array_equal(got, est + err >= floor)
    np.save(tmp_path / "d.npy", docs)
    np.save(tmp_path / "q.npy", questions)
    assert code_bounds.main(["--vectors", str(tmp_path / "d.npy"), "--query-vectors", str(tmp_path / "q.npy"), "--json"]) == 0
    rows = {(r["bits"], r["scale"], r["centred"]): r for r in json.loads(capsys.readouterr().out)["rows"]}
    for scale in ("per document", "per dimension"):
        assert rows[(8, scale, True)]["rescore_share"] <= rows[(6, scale, True)]["rescore_share"] <= rows[(4, scale, True)]["rescore_share"]
