"""``mempp.langchain.MemppRetriever`` with the real ``langchain-core``: invoke, batch, async, a
runnable chain, and LangChain's own conformance suite for retrievers (``langchain-tests``)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import mempp

pytest.importorskip("langchain_core", reason="the langchain extra is not installed (pip install 'mempp[langchain]')")
standard = pytest.importorskip("langchain_tests.integration_tests", reason="langchain-tests is not installed (pip install -e '.[test]')")

from langchain_core.documents import Document  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate  # noqa: E402
from langchain_core.runnables import RunnableLambda, RunnablePassthrough  # noqa: E402

from conftest import ORG  # noqa: E402
from mempp.langchain import MemppRetriever  # noqa: E402

SLA_1, LUNCH, SLA_2, UNDATED = ORG


@pytest.fixture
def store(tmp_path):
    with mempp.Store.open(tmp_path / "org", embedder=mempp.HashEmbedder()) as s:
        s.add(ORG)
        yield s


def test_invoke_returns_the_evidence_as_of_a_date(store):
    early = MemppRetriever(store=store, k=2, as_of="2023-03-01").invoke("what is the uptime SLA?")
    late = MemppRetriever(store=store, k=2).invoke("what is the uptime SLA?")
    assert all(isinstance(d, Document) for d in early + late)
    assert early[0].page_content == SLA_1["text"] and late[0].page_content == SLA_2["text"]
    assert SLA_2["text"] not in [d.page_content for d in early] and SLA_1["text"] not in [d.page_content for d in late]
    meta = late[0].metadata
    assert meta["id"] == "sla-2" and late[0].id == "sla-2" and meta["author"] == "Ben Ortiz"
    assert meta["date"].startswith("2023-06-01") and meta["thread"] == "EV-1" and meta["channel"] == "email"
    assert set(meta["ranks"]) == {"lexical", "tag", "vector"} and meta["rank_lexical"] == meta["ranks"]["lexical"]
    hit = store.query("what is the uptime SLA?", k=2)[0]
    assert meta["score"] == pytest.approx(hit.score) and meta["doc_id"] == hit.doc_id
    shares = meta["leg_scores"]  # weight / (60 + rank) per leg: they add up to the fused score here (no thread lift)
    assert set(shares) == {"lexical", "tag", "vector"} and sum(v for v in shares.values() if v) == pytest.approx(hit.score)


def test_filters_and_call_overrides(store):
    r = MemppRetriever(store=store, authors=["Ben Ortiz"])
    assert {d.metadata["author"] for d in r.invoke("SLA")} == {"Ben Ortiz"}
    assert len(r.invoke("SLA", k=1)) == 1
    assert [d.metadata["id"] for d in r.invoke("uptime SLA", as_of="2023-03-01", authors=None, k=1)] == ["sla-1"]
    assert {d.metadata["channel"] for d in MemppRetriever(store=store, channels=["chat"]).invoke("lunch")} == {"chat"}
    with pytest.raises(TypeError, match="unexpected keyword"):
        r.invoke("SLA", top_k=3)


def test_batch_and_async_equal_invoke(store):
    r = MemppRetriever(store=store, k=3)
    questions = ["uptime SLA", "lunch on Friday", "wiki page"]
    one = [r.invoke(q) for q in questions]
    assert r.batch(questions) == one

    async def both():
        return await r.ainvoke(questions[0]), await r.abatch(questions)

    a, b = asyncio.run(both())
    assert a == one[0] and b == one


def test_in_a_runnable_chain(store):
    def evidence(docs: list[Document]) -> str:
        return "\n".join(f"[{d.metadata['date'][:10]}] {d.metadata['author']}: {d.page_content}" for d in docs)

    prompt = ChatPromptTemplate.from_template("Answer from the evidence.\n{context}\nQuestion: {question}")
    chain = (
        {"context": MemppRetriever(store=store, k=1, as_of="2023-03-01") | RunnableLambda(evidence), "question": RunnablePassthrough()}
        | prompt
        | RunnableLambda(lambda p: p.to_string())
    )
    out = chain.invoke("what is the uptime SLA?")
    assert out == (
        "Human: Answer from the evidence.\n[2023-01-10] Aisha Patel: Decision: the uptime SLA is 99.9% for every plan.\n"
        "Question: what is the uptime SLA?"
    )


def test_a_path_opens_the_store_read_only_and_sees_new_commits(store, tmp_path):
    r = MemppRetriever(store=str(store.path), k=5)
    try:
        assert r.store is not store and r.store.read_only
        store.add([{"id": "sla-3", "text": "The uptime SLA is 99.99% from 2024.", "author": "Ann Lee", "date": "2024-01-01"}])
        assert "sla-3" in [d.metadata["id"] for d in r.invoke("uptime SLA")]  # refresh=True: the newest commit
    finally:
        r.close()
    with pytest.raises(ValueError, match="mempp.Store"):
        MemppRetriever(store=42)


def test_without_langchain_core_the_import_says_how_to_install(tmp_path):
    code = "import sys; sys.modules['langchain_core'] = None\nimport mempp\ntry:\n    import mempp.langchain\nexcept ImportError as e:\n    print(e)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path).stdout
    assert "pip install 'mempp[langchain]'" in out


# --- LangChain's conformance suite ---------------------------------------------------------------------
_SHARED: dict = {}


def _shared_store() -> mempp.Store:
    """One store for the suite's tests (its properties cannot take fixtures): more than 3 documents."""
    if "store" not in _SHARED:
        _SHARED["dir"] = tempfile.mkdtemp(prefix="mempp-lc-")
        store = mempp.Store.open(Path(_SHARED["dir"]) / "org", embedder=mempp.HashEmbedder())
        store.add(ORG + [{"id": f"n{i}", "text": f"uptime report {i}", "author": "Ann Lee", "date": f"2023-0{i + 1}-15"} for i in range(4)])
        _SHARED["store"] = store
    return _SHARED["store"]


@pytest.fixture(scope="module", autouse=True)
def _close_shared_store():
    yield
    if "store" in _SHARED:
        _SHARED.pop("store").close()
        shutil.rmtree(_SHARED.pop("dir"), ignore_errors=True)


class TestMemppRetrieverStandard(standard.RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[MemppRetriever]:
        return MemppRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        return {"store": _shared_store(), "k": 3}

    @property
    def retriever_query_example(self) -> str:
        return "what is the uptime SLA?"
