"""The analyzer's output is part of the store format: it must not depend on what else is installed."""

from mempp.storage.analyzer import Analyzer, stem


def test_stems_are_the_pure_python_snowball_release():
    # PyStemmer (an older Snowball) gives "organ", "univers", "ad"; snowballstemmer 3 gives these.
    assert [stem(w) for w in ("organization", "university", "added", "painting")] == ["organiz", "universiti", "add", "paint"]


def test_terms_fold_case_possessives_and_stop_words():
    assert Analyzer().terms("Caroline's painted THE 99.9% SLA") == ["carolin", "paint", "99.9", "sla"]
    assert Analyzer(stem=False, stopwords=False).terms("The w12 w7") == ["the", "w12", "w7"]


from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np

# Text that exercises the rules: apostrophes, possessives, numbers, combining marks, ligatures, NUL.
_ALPHABET = st.sampled_from(list("ab zZ'’s.,1 9_-\u0301\ufb01ß\u00e9\u0130\x00\n"))
_TEXTS = st.lists(st.text(_ALPHABET, max_size=25) | st.sampled_from(["Caroline's", "don't", "12.5kg", "1,000", "THE w12"]), max_size=8)


@settings(max_examples=300, deadline=None)
@given(_TEXTS, st.booleans(), st.booleans())
def test_batch_terms_equal_per_text_terms(texts, stopwords, stemmed):
    a = Analyzer(stopwords=stopwords, stem=stemmed)
    ids: dict[str, int] = {}
    flat, lengths = a.term_ids(texts, lambda t: ids.setdefault(t, len(ids)))
    names = {i: t for t, i in ids.items()}
    got = np.split(flat, np.cumsum(lengths)[:-1]) if len(texts) else []
    assert [[names[i] for i in part] for part in got] == [a.terms(t) for t in texts]
    # ids are handed out in first-seen order, as the per-text path would
    seen = list(dict.fromkeys(t for x in texts for t in a.terms(x)))
    assert list(ids) == seen


@settings(max_examples=400, deadline=None)
@given(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyzéüßy", min_size=0, max_size=12),  # tokens hold no apostrophe
    st.text(alphabet="0123456789٣", min_size=1, max_size=4),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyzy", min_size=1, max_size=2),
)
def test_stem_shortcuts_agree_with_the_stemmer(letters, digits, short):
    """Tokens ending in a digit, and tokens of one or two characters, are their own stem.

    (Not so with a leading apostrophe, which the stemmer drops; the tokenizer never yields one.)
    """
    from snowballstemmer.english_stemmer import EnglishStemmer

    stemmer = EnglishStemmer()
    for word in (letters + digits, short, digits + letters + digits):
        assert stemmer.stemWord(word) == word == stem(word)
