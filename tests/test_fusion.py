"""Weighted reciprocal-rank fusion and the latest-date reserve (docs/DESIGN.md §3.4, §3.8).

``rrf``: score(d) = Σ_leg w_leg / (60 + rank_leg(d)), rank from 0, a leg of weight 0 skipped.
``select``: first k − 3 slots by fused score (ties -> higher doc id), the last 3 to the
latest-dated matched documents not already chosen (undated never count), the rest by fused order.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import numpy as np

from mempp.fusion import fuse, rrf, select

SETTINGS = settings(max_examples=60, deadline=None)
LEGS = ("lexical", "tag", "vector")


# --- an independent plain-Python model ------------------------------------------------------------
def model_rrf(rankings, weights):
    docs = set()
    for leg, ranked in rankings.items():
        if weights.get(leg, 0):
            docs.update(ranked)
    out = {}
    for d in docs:
        total = 0.0
        for leg, ranked in rankings.items():
            w = weights.get(leg, 0)
            if w and d in ranked:
                total += w / (60 + ranked.index(d))
        out[d] = total
    return out


def model_select(scores, dates, k, reserve=True):
    """List of (doc, reserved) — written from the design text, not from the library."""
    by_score = sorted(scores, key=lambda d: (-scores[d], -d))
    if k <= 0:
        return []
    if not reserve:
        return [(d, False) for d in by_score[:k]]
    head_len = max(0, k - 3)
    head = by_score[:head_len]
    result = [(d, False) for d in head]
    left = [d for d in by_score if d not in head]
    dated = [d for d in left if dates.get(d) is not None]
    latest = sorted(dated, key=lambda d: (-dates[d], -d))  # later date first; equal date -> later ingested
    reserved = latest[: k - len(head)]
    result += [(d, True) for d in reserved]
    for d in left:
        if len(result) == k:
            break
        if d not in reserved:
            result.append((d, False))
    return result


# --- strategies -----------------------------------------------------------------------------------
doc_ids = st.integers(0, 25)
rankings_st = st.dictionaries(
    st.sampled_from(LEGS), st.lists(doc_ids, min_size=0, max_size=12, unique=True), min_size=0, max_size=3
)
weights_st = st.fixed_dictionaries({leg: st.sampled_from([0, 0.5, 1, 1, 2, 4]) for leg in LEGS})


@st.composite
def fused_cases(draw):
    rankings = draw(rankings_st)
    weights = draw(weights_st)
    docs = sorted({d for r in rankings.values() for d in r})
    # Dates: few distinct values (ties), some undated (None), some missing from the mapping.
    dates = {}
    for d in docs:
        choice = draw(st.integers(0, 5))
        if choice == 0:
            dates[d] = None
        elif choice == 1:
            continue
        else:
            dates[d] = draw(st.integers(0, 4)) * 86_400_000_000
    k = draw(st.one_of(st.integers(0, 5), st.integers(0, len(docs) + 4)))
    return rankings, weights, dates, k


# --- rrf ------------------------------------------------------------------------------------------
def test_rrf_formula():
    scores = rrf({"lexical": [1, 2, 3], "vector": [3, 1]}, {"lexical": 1, "tag": 1, "vector": 4})
    assert scores == pytest.approx({1: 1 / 60 + 4 / 61, 2: 1 / 61, 3: 1 / 62 + 4 / 60})


def test_rrf_zero_weight_leg_is_skipped():
    scores = rrf({"lexical": [1, 2], "tag": [7, 1]}, {"lexical": 1, "tag": 0, "vector": 4})
    assert scores == pytest.approx({1: 1 / 60, 2: 1 / 61})
    assert 7 not in scores  # only the skipped leg named it


def test_rrf_leg_without_weight_is_skipped():
    assert rrf({"other": [1]}, {"lexical": 1}) == {}


def test_rrf_custom_constant():
    assert rrf({"lexical": [4, 5]}, {"lexical": 2}, c=10) == pytest.approx({4: 2 / 10, 5: 2 / 11})


@SETTINGS
@given(rankings_st, weights_st)
def test_rrf_matches_model(rankings, weights):
    got = rrf(rankings, weights)
    want = model_rrf(rankings, weights)
    assert set(got) == set(want)
    for d in want:
        assert math.isclose(got[d], want[d], rel_tol=1e-12)


# --- select ---------------------------------------------------------------------------------------
def test_select_ties_go_to_later_ingested():
    scores = {2: 0.5, 5: 0.5, 3: 0.7, 1: 0.5}
    assert select(scores, {}, 4, reserve=False) == [(3, False), (5, False), (2, False), (1, False)]


def test_select_reserve_takes_latest_dated_for_last_three():
    # Fused order: 0 > 1 > 2 > ... > 9 (higher score to lower id here).
    scores = {d: 1.0 / (60 + d) for d in range(10)}
    dates = {d: d * 100 for d in range(10)}  # the highest ids are the latest
    dates[9] = None  # undated: never "latest-dated"
    got = select(scores, dates, 5)
    assert got == [(0, False), (1, False), (8, True), (7, True), (6, True)]


def test_select_reserve_skips_already_chosen():
    scores = {d: 1.0 / (60 + d) for d in range(6)}
    dates = {0: 900, 1: 800, 2: 10, 3: 20, 4: 30, 5: 40}
    # First k-3 = 2 slots: 0, 1 (also the latest-dated, but already chosen); reserve: 5, 4, 3.
    assert select(scores, dates, 5) == [(0, False), (1, False), (5, True), (4, True), (3, True)]


def test_select_fewer_than_three_dated_fills_by_fused_order():
    scores = {d: 1.0 / (60 + d) for d in range(8)}
    dates = {7: 5, 6: None}  # one dated document outside the head; the rest undated or unknown
    got = select(scores, dates, 5)
    assert got == [(0, False), (1, False), (7, True), (2, False), (3, False)]


def test_select_equal_dates_prefer_later_ingested():
    scores = {d: 1.0 / (60 + d) for d in range(6)}
    dates = {2: 7, 3: 7, 4: 7, 5: 7}
    assert select(scores, dates, 4) == [(0, False), (5, True), (4, True), (3, True)]


def test_select_no_reserve_is_plain_fused_order():
    scores = {d: 1.0 / (60 + d) for d in range(6)}
    dates = {d: 100 - d for d in range(6)}
    assert select(scores, dates, 4, reserve=False) == [(d, False) for d in range(4)]
    assert select(scores, {d: 1000 * d for d in range(6)}, 4, reserve=False) == [(d, False) for d in range(4)]


@pytest.mark.parametrize("k", [1, 2, 3])
def test_select_k_at_most_three_is_all_reserve(k):
    scores = {d: 1.0 / (60 + d) for d in range(6)}
    dates = {d: d for d in range(6)}
    got = select(scores, dates, k)
    assert got == [(d, True) for d in [5, 4, 3][:k]]


def test_select_k_zero_and_more_than_available():
    scores = {1: 0.3, 2: 0.2}
    assert select(scores, {1: 5}, 0) == []
    # k − 3 ≥ number of matched documents: every one goes by fused score.
    assert select(scores, {1: 5, 2: 6}, 10) == [(1, False), (2, False)]
    # k = 4: one fused slot, then the reserve (only one document left, undated here -> fill).
    assert select(scores, {1: 5, 2: 6}, 4) == [(1, False), (2, True)]
    assert select(scores, {1: 5}, 4) == [(1, False), (2, False)]
    assert select(scores, {1: 5, 2: 6}, 3) == [(2, True), (1, True)]
    assert select({}, {}, 5) == []


@SETTINGS
@given(fused_cases(), st.booleans())
def test_select_matches_model(case, reserve):
    rankings, weights, dates, k = case
    scores = rrf(rankings, weights)
    got = select(scores, dates, k, reserve)
    want = model_select(scores, dates, k, reserve)
    assert got == want
    # Invariants a user relies on, independent of the model's details.
    docs = [d for d, _ in got]
    assert len(docs) == len(set(docs)) == min(max(k, 0), len(scores))
    assert set(docs) <= set(scores)
    if not reserve or k <= 0:
        assert not any(r for _, r in got)
    else:
        assert sum(r for _, r in got) <= min(3, k)
        assert all(dates.get(d) is not None for d, r in got if r)


@SETTINGS
@given(fused_cases())
def test_end_to_end_fusion_matches_model(case):
    rankings, weights, dates, k = case
    want = model_select(model_rrf(rankings, weights), dates, k)
    assert select(rrf(rankings, weights), dates, k) == want


@settings(max_examples=300, deadline=None)
@given(fused_cases(), st.booleans())
def test_fuse_on_arrays_equals_rrf_then_select(case, reserve):
    """The array path of the read path (``fuse``) against ``select(rrf(...))``: the same choice,
    and the same fused floats for every document."""
    rankings, weights, dates, k = case
    undated = -(2**63)
    arr = np.full(30, undated, dtype=np.int64)
    for d, v in dates.items():
        if v is not None:
            arr[d] = v
    # `select` reads a missing date as undated, as the array does
    chosen, fused = fuse(rankings, weights, arr, undated, k, reserve)
    want_scores = rrf(rankings, weights)
    assert chosen == select(want_scores, {d: (None if arr[d] == undated else int(arr[d])) for d in want_scores}, k, reserve)
    assert fused == want_scores
    assert all(type(d) is int for d, _ in chosen) and all(type(v) is float for v in fused.values())


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 300), min_size=24, max_size=90, unique=True), st.data())
def test_long_lists_take_the_array_paths_and_match_the_model(docs, data):
    """From ``SMALL`` documents on, the fused order and the reserve's choice are made on arrays; both
    equal the plain model (few distinct scores and dates: ties everywhere), and with a rule for
    the reserve (``qualifies``) the array path equals the Python one."""
    from mempp.fusion import SMALL, fused_order, select_ranked

    assert len(docs) >= SMALL
    scores = {d: data.draw(st.sampled_from([1 / 60, 1 / 61, 2 / 61, 1 / 62, 0.5])) for d in docs}
    order = fused_order(scores)
    assert order == sorted(scores, key=lambda d: (-scores[d], -d))
    undated = -(2**63)
    arr = np.full(301, undated, dtype=np.int64)
    for d in docs:
        if data.draw(st.integers(0, 4)):
            arr[d] = data.draw(st.integers(0, 5)) * 86_400_000_000
    k = data.draw(st.integers(0, len(docs) + 4))
    reserve = data.draw(st.booleans())
    as_dict = {d: (None if arr[d] == undated else int(arr[d])) for d in docs}
    assert select_ranked(order, arr, undated, k, reserve) == model_select(scores, as_dict, k, reserve)
    banned = set(data.draw(st.lists(st.sampled_from(docs), unique=True))) if docs else set()
    cut = data.draw(st.integers(0, len(docs) + 1))

    def qualifies(d, place):
        return place < cut and d not in banned

    python_path = select_ranked(order, {d: int(arr[d]) for d in docs}, undated, k, reserve, qualifies)
    assert select_ranked(order, arr, undated, k, reserve, qualifies) == python_path


def test_member_is_isin_on_a_sorted_set():
    from mempp.chain import member

    rng = np.random.default_rng(3)
    for _ in range(200):
        s = np.unique(rng.integers(-5, 40, rng.integers(0, 12)))
        v = rng.integers(-8, 45, rng.integers(0, 30))
        assert np.array_equal(member(v, s), np.isin(v, s))
