"""The MaxScore kernels (``kernels.maxscore``) against a brute-force model that scores every document.

The model sums each document's terms in the kernels' documented order (terms by decreasing
bound ``idf * (k1 + 1)``, ties by query position, last first), so scores are compared bit for
bit and rankings exactly: higher score first, equal scores -> higher id first.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mempp.kernels import bm25_idf, bm25_norms
from mempp.kernels.maxscore import (
    DENSE_SHARE, WINDOW, dense_index, lex_idf, lex_lookup, lex_query, lex_score_docs, lex_topk, scratch_size, segment_table,
)

from test_kernels import B, K1, SETTINGS, bm25_cases, build_postings


def make_table(docs, n_terms, drop_absent=True, bitsets=True):
    """The segment table of ``docs`` (segments of documents of term ids), as the store lays postings out."""
    flat = [toks for seg in docs for toks in seg]
    avgdl = sum(len(t) for t in flat) / max(len(flat), 1)
    segs, lengths = [], []
    base = 0
    for seg in docs:
        p_docs, p_tfs, term_starts = build_postings(seg, n_terms)
        starts = np.array(term_starts[:-1], dtype=np.int64)
        dfs = np.diff(np.array(term_starts, dtype=np.int64)).astype(np.int32)
        terms = np.arange(len(starts), dtype=np.int32)
        if drop_absent:  # the store lists only the terms a segment holds
            keep = dfs > 0
            terms, starts, dfs = terms[keep], starts[keep], dfs[keep]
        lens = np.array([len(t) for t in seg], dtype=np.float32)
        norms = np.empty(len(seg), dtype=np.float64)
        bm25_norms(lens, avgdl, K1, B, norms)
        dense = dense_index(p_docs, starts, dfs, len(seg)) if bitsets else None
        segs.append((p_docs, p_tfs, norms, terms, starts, dfs, base, dense))
        lengths.append(lens)
        base += len(seg)
    table, index, keep = segment_table(segs)
    return (table, index), keep, segs


def model_scores(docs, query, segs):
    """Every document's score (float64, summed in the kernels' order) and each term's df; None where no term."""
    flat = [toks for seg in docs for toks in seg]
    n = len(flat)
    df = np.array([sum(1 for toks in flat if t in toks) for t in query], dtype=np.int64)
    idf = np.empty(len(query))
    lex_idf(n, df, idf)  # the kernels' own weights: Lucene's idf, to the last bit or two of numpy's
    assert np.allclose(idf, bm25_idf(n, df), rtol=1e-14, atol=0)
    ub = idf * (K1 + 1.0)
    order = sorted(range(len(query)), key=lambda t: ub[t])  # stable: ties by query position
    norms = np.concatenate([s[2] for s in segs]) if segs else np.zeros(0)
    out = {}
    for g, toks in enumerate(flat):
        score = 0.0
        hit = False
        for t in reversed(order):
            tf = toks.count(query[t])
            if tf:
                hit = True
                tf = float(tf)
                score += idf[t] * tf * (K1 + 1.0) / (tf + norms[g])
        if hit:
            out[g] = score
    return out, df, idf


def run_topk(tables, query, n_seg, idf, mask, k):
    table, index = tables
    q = np.array(query, dtype=np.int64)
    starts = np.empty((len(q), n_seg), dtype=np.int64)
    ends = np.empty((len(q), n_seg), dtype=np.int64)
    df = np.empty(len(q), dtype=np.int64)
    slots = np.empty((len(q), n_seg), dtype=np.int64)
    lex_lookup(*index, q, starts, ends, df, slots)
    ids = np.empty(max(k, 0), dtype=np.int64)
    scores = np.empty(max(k, 0), dtype=np.float64)
    stats = np.zeros(3, dtype=np.int64)
    fs = np.zeros(scratch_size())
    got = lex_topk(table, starts, ends, slots, idf, K1, mask, k, ids, scores, stats, fs, np.empty(scratch_size(), dtype=np.int64))
    assert not fs[: 2 * WINDOW].any()  # left clean for the next query
    # lex_query: lookup, weights and ranking in one call, the same answer
    ids2 = np.empty(max(k, 0), dtype=np.int64)
    stats2 = np.zeros(4, dtype=np.int64)
    n_docs = int(table[:, 8].sum())  # N_ROWS
    got2 = lex_query(table, *index, q, n_docs, K1, mask, k, ids2, np.empty(max(k, 0)), stats2, fs, np.empty(scratch_size(), dtype=np.int64))
    assert ids2[:got2].tolist() == ids[:got].tolist() and stats2[3] == df.sum()
    return ids[:got], scores[:got], starts, ends, df, stats


def check(docs, query, mask_list, k, mask_dtype=np.uint8, drop_absent=True, bitsets=True):
    n_terms = max([max(t) for seg in docs for t in seg if t] + list(query) + [0]) + 1
    table, keep, segs = make_table(docs, n_terms, drop_absent, bitsets)
    model, df_want, idf = model_scores(docs, query, segs)
    mask = np.array(mask_list, dtype=mask_dtype)
    ids, scores, starts, ends, df, stats = run_topk(table, query, len(docs), idf, mask, k)
    # lookup: each term's run in each segment holds exactly the rows that contain it
    assert df.tolist() == df_want.tolist()
    base = 0
    for s, seg in enumerate(docs):
        for t, term in enumerate(query):
            rows = segs[s][0][starts[t, s] : ends[t, s]].tolist()
            assert rows == [r for r, toks in enumerate(seg) if term in toks]
        base += len(seg)
    # top k: the best k masked documents of the model, bit for bit
    ranked = sorted((g for g in model if mask_list[g]), key=lambda g: (-model[g], -g))[: max(k, 0)]
    assert ids.tolist() == ranked
    assert scores.tolist() == [model[g] for g in ranked]
    assert stats[1] <= stats[0]
    # score_docs: any sorted documents (candidates or not, repeats allowed)
    n = len(mask_list)
    some = np.sort(np.array([g for g in range(n) if g % 3 != 1] + ([0] if n else []), dtype=np.int64))
    out = np.full(len(some), -1.0)
    lex_score_docs(table[0], starts, ends, idf, K1, some, out)
    assert out.tolist() == [model.get(g, 0.0) for g in some.tolist()]
    return stats


@SETTINGS
@given(bm25_cases(), st.sampled_from([np.uint8, np.bool_]), st.booleans(), st.booleans())
def test_lex_topk_equals_full_scoring(case, mask_dtype, drop_absent, bitsets):
    docs, query, mask_list, k = case
    check(docs, query, mask_list, k, mask_dtype, drop_absent, bitsets)


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.sampled_from([1, 3, 10, 40]), st.integers(1, 5), st.floats(0.05, 1.0), st.booleans())
def test_lex_topk_prunes_and_stays_exact(seed, k, n_query, share, bitsets):
    """Zipf documents over several segments: common terms become non-essential, ranking unchanged."""
    rng = np.random.default_rng(seed)
    vocab = 60
    p = 1.0 / np.arange(1, vocab + 1) ** 1.1
    p /= p.sum()
    sizes = rng.integers(0, 120, size=rng.integers(1, 5))
    docs = [[rng.choice(vocab, size=rng.integers(0, 25), p=p).tolist() for _ in range(s)] for s in sizes]
    n = int(sizes.sum())
    query = rng.choice(vocab + 2, size=n_query, replace=False).tolist()  # vocab, vocab + 1: absent terms
    mask = (rng.random(n) < share).tolist()
    check(docs, query, mask, k, bitsets=bitsets)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("k", [1, 10, 50])
def test_lex_topk_two_passes_when_the_best_lack_the_rare_term(seed, k):
    """A rare term (under SEED_SHARE of the documents) and common ones: the first pass scores the
    documents holding the rare term, the second the others. Here short documents full of the
    common terms outscore most holders of the rare term, and many holders of it hold the common
    terms too (the second pass must not offer them again, with a partial score)."""
    rng = np.random.default_rng(seed)
    docs = []
    for size in (300, 220):
        seg = []
        for _ in range(size):
            toks = [0] * int(rng.integers(0, 6)) + [1] * int(rng.integers(0, 4)) + [3] * int(rng.integers(0, 30))
            if rng.random() < 0.04:  # the rare term, in long documents
                toks += [2] + [3] * 40
            seg.append(toks)
        docs.append(seg)
    n = sum(len(seg) for seg in docs)
    assert sum(2 in toks for seg in docs for toks in seg) <= n / 16
    mask = (rng.random(n) < 0.8).tolist()
    check(docs, [0, 1, 2], mask, k)
    check(docs, [2, 0], mask, k, bitsets=False)


def test_lex_topk_ties_go_to_the_later_document():
    # identical documents 0, 2, 3 (same terms, same length): exact ties, higher id first
    docs = [[[0, 1], [2, 2]], [[0, 1], [1, 0], [1]]]
    stats = check(docs, [0, 1], [True] * 5, 2)
    assert stats[0] >= 2
    table, keep, segs = make_table(docs, 3)
    _, _, idf = model_scores(docs, [0, 1], segs)
    ids, scores, *_ = run_topk(table, [0, 1], 2, idf, np.ones(5, np.uint8), 10)
    assert ids.tolist()[:3] == [3, 2, 0] and scores[0] == scores[1] == scores[2]
    ids, *_ = run_topk(table, [0, 1], 2, idf, np.array([1, 1, 1, 0, 1], np.uint8), 2)
    assert ids.tolist() == [2, 0]


def test_lex_topk_empty_cases():
    docs = [[[0, 1], [1]], []]
    check(docs, [], [True, True], 3)
    check(docs, [0, 1], [False, False], 3)
    check(docs, [5], [True, True], 3)
    check(docs, [0, 1], [True, True], 0)
    check([[]], [0], [], 2)


def test_lex_topk_skips_documents():
    """With one rare and one common term, most documents holding only the common term are never scored."""
    rng = np.random.default_rng(7)
    docs = [[rng.choice(50, size=20).tolist() + [0] for _ in range(300)] for _ in range(3)]
    for seg in docs:
        for row in rng.choice(300, size=5, replace=False):
            seg[row].append(99)  # the rare term
    stats = check(docs, [0, 99], [True] * 900, 3)
    assert stats[0] < 900 and stats[1] < 100, stats


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(0, 300), st.integers(1, 30))
def test_dense_index_locates_every_posting(seed, n_rows, n_terms):
    """A common term's bitset holds exactly its rows, and rank + popcount gives each row's posting."""
    rng = np.random.default_rng(seed)
    seg = [rng.integers(0, n_terms, size=rng.integers(0, 12)).tolist() for _ in range(n_rows)]
    p_docs, _, term_starts = build_postings(seg, n_terms)
    starts = np.array(term_starts[:-1], dtype=np.int64)
    dfs = np.diff(np.array(term_starts, dtype=np.int64)).astype(np.int32)
    slot_of, pairs = dense_index(p_docs, starts, dfs, n_rows)
    n_words = (n_rows + 63) // 64
    assert len(pairs) == 2 * n_words * int((slot_of >= 0).sum())
    bits, rank = pairs[0::2], pairs[1::2]  # per 64 rows: the word, then the rows held before it
    for t in range(len(starts)):
        rows = p_docs[starts[t] : starts[t] + dfs[t]].tolist()
        if dfs[t] < max(1.0, DENSE_SHARE * n_rows):
            assert slot_of[t] == -1
            continue
        off = int(slot_of[t]) * n_words
        held = [r for r in range(n_rows) if (int(bits[off + r // 64]) >> (r % 64)) & 1]
        assert held == rows
        for i, r in enumerate(rows):  # the posting of row r is the i-th of the term's run
            below = int(bits[off + r // 64]) & ((1 << (r % 64)) - 1)
            assert int(rank[off + r // 64]) + bin(below).count("1") == i


def test_lex_topk_refuses_short_scratch():


    (table, _), keep, segs = make_table([[[0, 1], [1]]], 2)
    z = np.zeros((1, 1), dtype=np.int64)
    with pytest.raises(ValueError):
        lex_topk(table, z, z + 1, z - 1, np.ones(1), K1, np.ones(2, np.uint8), 1, np.empty(1, np.int64), np.empty(1),
                 np.zeros(3, np.int64), np.zeros(10), np.zeros(10, np.int64))


@pytest.mark.parametrize("k", [1, 10, 50, 20_000])
@pytest.mark.parametrize("bitsets", [True, False])
def test_lex_topk_large_segments(k, bitsets):
    """Segments of many windows, a candidate buffer that fills (k = 20,000), tf above the tabulated bounds."""
    from mempp.storage.postings import Postings

    rng = np.random.default_rng(k + bitsets)
    vocab = 300
    p = 1.0 / np.arange(1, vocab + 1) ** 1.1
    p /= p.sum()
    sizes = [30_000, 11_000, 5]
    segs, lengths, all_docs = [], [], []
    for n_rows in sizes:
        doc_terms = [rng.choice(vocab, size=rng.integers(5, 40), p=p) for _ in range(n_rows)]
        doc_terms[0] = np.array([7] * 40)  # tf 40, beyond TF_TABLE
        all_docs.append(doc_terms)
        lengths.append(np.array([len(t) for t in doc_terms], dtype=np.float32))
    avgdl = float(np.concatenate(lengths).mean())
    base = 0
    posts = []
    for doc_terms, lens in zip(all_docs, lengths):
        post = Postings.build(doc_terms)
        norms = np.empty(len(lens))
        bm25_norms(lens, avgdl, K1, B, norms)
        dense = dense_index(post.docs, post.starts, post.dfs, len(lens)) if bitsets else None
        segs.append((post.docs, post.tfs, norms, post.terms, post.starts, post.dfs, base, dense))
        posts.append((post, norms, base))
        base += len(lens)
    n = base
    table, index, keep = segment_table(segs)
    query = np.array([0, 3, 7, 150, 299, 1000, -1], dtype=np.int64)  # common to rare, and one absent
    mask = (rng.random(n) < 0.6).astype(np.uint8)
    ids = np.empty(k, dtype=np.int64)
    scores = np.empty(k)
    stats = np.zeros(4, dtype=np.int64)
    fs = np.zeros(scratch_size())
    got = lex_query(table, *index, query, n, K1, mask, k, ids, scores, stats, fs, np.zeros(scratch_size(), dtype=np.int64))
    assert not fs[: 2 * WINDOW].any()
    # the model: every document scored, in the kernels' order of addition
    df = np.zeros(len(query), dtype=np.int64)
    for post, _, _ in posts:
        for t, q in enumerate(query):
            a = np.searchsorted(post.terms, q)
            if a < len(post.terms) and post.terms[a] == q:
                df[t] += post.dfs[a]
    idf = np.empty(len(query))
    lex_idf(n, df, idf)
    order = sorted(range(len(query)), key=lambda t: idf[t] * (K1 + 1.0))
    full = np.zeros(n)
    for t in reversed(order):
        for post, norms, b in posts:
            a = np.searchsorted(post.terms, query[t])
            if a < len(post.terms) and post.terms[a] == query[t]:
                rows = post.docs[post.starts[a] : post.starts[a] + post.dfs[a]].astype(np.int64)
                tf = post.tfs[post.starts[a] : post.starts[a] + post.dfs[a]].astype(np.float64)
                full[b + rows] += idf[t] * tf * (K1 + 1.0) / (tf + norms[rows])
    cand = np.flatnonzero((full > 0) & (mask > 0))
    want = cand[np.lexsort((-cand, -full[cand]))][:k]
    assert ids[:got].tolist() == want.tolist()
    assert scores[:got].tolist() == full[want].tolist()
