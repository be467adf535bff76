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


def _terms_by_the_general_rules(a: Analyzer, text: str) -> list[str]:
    """The rules :meth:`Analyzer.terms` follows, without its shortcuts (ASCII folding, no apostrophe)."""
    import unicodedata

    from mempp.storage.analyzer import APOS, POSSESSIVE, TOKEN, STOPWORDS

    text = APOS.sub("", POSSESSIVE.sub("", unicodedata.normalize("NFKC", text).casefold()))
    toks = [t for t in TOKEN.findall(text) if not a.stopwords or t not in STOPWORDS]
    return [stem(t) for t in toks] if a.stem else toks


@settings(max_examples=400, deadline=None)
@given(
    st.text(st.characters(max_codepoint=127), max_size=40)
    | st.text(_ALPHABET, max_size=25)
    | st.sampled_from(["Caroline's w3", "don`t W12's", "It’s 9.5’s", "‘quoted’ ﬁle’s"])
)
def test_terms_shortcuts_give_the_general_rules_terms(text):
    for a in (Analyzer(), Analyzer(stem=False, stopwords=False)):
        assert a.terms(text) == _terms_by_the_general_rules(a, text)


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


# The compiled tokenizer against the per-text regexes: ASCII-only batches (the uint8 path) and
# batches with other text (the code point path), with what its rules hinge on: apostrophes of
# every kind next to letters, digits, "s"/"S" and underscores, decimal points and commas
# between digits, digits glued to letters, NULs, controls and non-ASCII digits and letters.
_ASCII_ALPHABET = st.sampled_from(list("aszSZ09'`_.,- \x00\t\x7f") + ["'s", "'S", "1.5", "9,9", "s'"])
_ASCII_TEXT = st.lists(_ASCII_ALPHABET, max_size=30).map("".join)
_ANY_ALPHABET = st.sampled_from(
    list("aszS09'`’‘_., \x00ßéİ\u0301ﬁ٣²Ⅻ\u00a0ſ\U0001d7d9") + ["’s", "'s", "1.5", "٣.٣", "Caroline’s"]
)
_ANY_TEXT = st.lists(_ANY_ALPHABET, max_size=30).map("".join) | st.text(max_size=20)


def _batch_terms(a: Analyzer, texts: list[str], path: str = "term_ids") -> tuple[list[list[str]], list[str]]:
    ids: dict[str, int] = {}
    flat, lengths = getattr(a, path)(texts, lambda t: ids.setdefault(t, len(ids)))
    assert flat.dtype == np.int64 and lengths.dtype == np.int64 and len(lengths) == len(texts)
    names = {i: t for t, i in ids.items()}
    got = np.split(flat, np.cumsum(lengths)[:-1]) if len(texts) else []
    return [[names[int(i)] for i in part] for part in got], list(ids)


@settings(max_examples=500, deadline=None)
@given(st.lists(_ASCII_TEXT, max_size=6), st.booleans(), st.booleans())
def test_compiled_tokenizer_on_ascii_equals_the_regexes(texts, stopwords, stemmed):
    a = Analyzer(stopwords=stopwords, stem=stemmed)
    per_text, order = _batch_terms(a, texts)
    assert per_text == [a.terms(t) for t in texts]
    assert order == list(dict.fromkeys(t for x in texts for t in a.terms(x)))
    assert (per_text, order) == _batch_terms(a, texts, "_term_ids_regex")


@settings(max_examples=500, deadline=None)
@given(st.lists(_ANY_TEXT | _ASCII_TEXT, max_size=6), st.booleans())
def test_compiled_tokenizer_on_any_text_equals_the_regexes(texts, stemmed):
    a = Analyzer(stem=stemmed)
    per_text, order = _batch_terms(a, texts)
    assert per_text == [a.terms(t) for t in texts]
    assert order == list(dict.fromkeys(t for x in texts for t in a.terms(x)))


def test_compiled_tokenizer_examples():
    a = Analyzer(stopwords=False, stem=False)
    cases = {
        "Caroline's CAROLINE'S caroline'sx 1's _'s 's": [["caroline", "caroline", "carolinesx", "1", "s", "s"]],
        "99.9 1,000.5 1..2 1.2.3 9, 99abc abc99 v2.5 a_b": [["99.9", "1,000.5", "1", "2", "1.2.3", "9", "99", "abc", "abc99", "v2", "5", "a", "b"]],
        "don't rock'n'roll it`s ‘quoted’ l’école Anna’S": [["dont", "rocknroll", "its", "quoted", "lécole", "anna"]],
    }
    for text, want in cases.items():
        assert _batch_terms(a, [text])[0] == want == [a.terms(text)]
    # many distinct tokens: the hash table grows several times
    words = [f"w{i} {i}.{i}" for i in range(5000)]
    assert _batch_terms(a, words)[0] == [a.terms(t) for t in words]
    assert _batch_terms(a, ["", "", "x"])[0] == [[], [], ["x"]]


def test_compiled_tokenizer_grows_its_arrays():
    a = Analyzer(stopwords=False, stem=False)
    dense = ["q " * 3000 + "z1 " * 3000]  # more tokens than a quarter of the characters
    long_words = [" ".join(f"{i:0>60}x" for i in range(400))]  # distinct tokens overflow their copy buffer
    huge = ["y" * 40_000, "é" + "y" * 40_000]  # one token longer than the buffer doubled
    for texts in (dense, long_words, huge, dense + long_words + huge):
        assert _batch_terms(a, texts)[0] == [a.terms(t) for t in texts]


_WORDS = st.sampled_from(["having", "have", "doing", "do", "ours", "our", "paint", "painted", "painting", "the", "a", "s", "team", "99.9", "w7"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_WORDS, max_size=8).map(" ".join), max_size=6), st.lists(_WORDS, max_size=6), st.booleans(), st.booleans())
def test_interning_with_a_known_dictionary_equals_interning_each_term(texts, stored, stopwords, stemmed):
    """intern_tokens with the store's dictionary (looked up in bulk, ``intern`` called for the
    other terms only) gives the ids and assigns new ones in the order of calling ``intern`` on
    every term; stop words stay out even when their stem is a stored term."""
    from mempp.storage.analyzer import tokenize

    a = Analyzer(stopwords=stopwords, stem=stemmed)
    known = {t: i for i, t in enumerate(dict.fromkeys(stem(w) for w in stored))}

    def run(with_known):
        new: dict[str, int] = {}

        def intern(term):
            return known[term] if term in known else new.setdefault(term, len(known) + len(new))

        flat, lengths = a.intern_tokens(tokenize(texts), intern, known if with_known else None)
        return flat.tolist(), lengths.tolist(), list(new)

    assert run(True) == run(False)
