"""The analyzer's output is part of the store format: it must not depend on what else is installed."""

from mempp.storage.analyzer import Analyzer, stem


def test_stems_are_the_pure_python_snowball_release():
    # PyStemmer (an older Snowball) gives "organ", "univers", "ad"; snowballstemmer 3 gives these.
    assert [stem(w) for w in ("organization", "university", "added", "painting")] == ["organiz", "universiti", "add", "paint"]


def test_terms_fold_case_possessives_and_stop_words():
    assert Analyzer().terms("Caroline's painted THE 99.9% SLA") == ["carolin", "paint", "99.9", "sla"]
    assert Analyzer(stem=False, stopwords=False).terms("The w12 w7") == ["the", "w12", "w7"]
