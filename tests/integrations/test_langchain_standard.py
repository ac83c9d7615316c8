"""LangChain's standard retriever tests (``langchain-tests``' ``RetrieversIntegrationTests``, issue 37)
for :class:`KGRAGLangChainRetriever`, our one exported LangChain retriever, over every kgrag method.

One class per method, on the session's sample index (tests/conftest.py; KG-Translator: the sample
corpus as a ParseKG index). The standard tests ask that ``k`` (constructor or ``invoke(q, k=...)``)
returns exactly ``k`` documents, so these classes run with ``include_facts=False`` (passages only);
:class:`TestActivationWithFacts` runs them on the default configuration, where the ``k`` passages
are followed by up to ``max_facts`` fact documents by design (the two count tests are marked
``xfail``, LangChain's documented mechanism, strict: they must fail for that reason only).

The standard tests are not overridden (``test_no_overrides_DO_NOT_OVERRIDE`` checks it); their
``async def`` test runs through pytest-asyncio (``asyncio_mode = "auto"`` in pyproject.toml).
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from langchain_tests.integration_tests import RetrieversIntegrationTests

from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.integrations._common import METHODS, make_method
from kgrag_plugins.integrations.langchain import KGRAGLangChainRetriever
from kgrag_plugins.methods.base import Retriever

Q = "Which river flows through the city where Marie Curie was born?"

#: One kgrag method instance per test class, shared by its tests (graph / edge vectors built once).
_MADE: dict[str, Retriever] = {}


@pytest.fixture(scope="module")
def sample_parsekg_index(tmp_path_factory, sample_corpus, sample_index) -> KnowledgeIndex:
    """The sample corpus as a ParseKG index (what KG-Translator needs), with the same embedder."""
    path = tmp_path_factory.mktemp("standard-parsekg") / "index"
    return KnowledgeIndex.build(sample_corpus, path, builder="parsekg", embedder=sample_index.embedder, progress=False)


class _KGRAGStandard(RetrieversIntegrationTests):
    """The standard tests for ``KGRAGLangChainRetriever(retriever=make_method(index, method, **options))``."""

    method: ClassVar[str]
    options: ClassVar[dict[str, Any]] = {}
    index_fixture: ClassVar[str] = "sample_index"
    include_facts: ClassVar[bool] = False

    @pytest.fixture(autouse=True)
    def _kg_method(self, request: pytest.FixtureRequest) -> None:
        key = type(self).__name__
        if key not in _MADE:
            _MADE[key] = make_method(request.getfixturevalue(self.index_fixture), self.method, **self.options)
        self.kg = _MADE[key]

    @property
    def retriever_constructor(self) -> type[KGRAGLangChainRetriever]:
        return KGRAGLangChainRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"retriever": self.kg, "k": 2, "include_facts": self.include_facts}

    @property
    def retriever_query_example(self) -> str:
        return Q


class TestDense(_KGRAGStandard):
    method = "dense"


class TestBM25(_KGRAGStandard):
    method = "bm25"


class TestHybrid(_KGRAGStandard):
    method = "hybrid"


class TestPPR(_KGRAGStandard):
    method = "ppr"


class TestActivation(_KGRAGStandard):
    method = "activation"


class TestSARAG(_KGRAGStandard):
    # SA-RAG returns *at most* k passages (cosine threshold); the paper's defaults are tuned for
    # bge-large, and with MiniLM return 2 passages here for k=3. The MiniLM calibration of the
    # SARAGRetriever docstring (c=0.2, document_threshold=0.3) finds enough for the count tests.
    method = "sa_rag"
    options = {"c": 0.2, "document_threshold": 0.3}


class TestKGInfused(_KGRAGStandard):
    method = "kg_infused"


class TestFRAG(_KGRAGStandard):
    method = "frag"


class TestTranslator(_KGRAGStandard):
    method = "translator"
    index_fixture = "sample_parsekg_index"


class TestKnow3(_KGRAGStandard):
    method = "know3"


class TestActivationWithFacts(_KGRAGStandard):
    """The adapter's defaults: ``k`` passages, then up to 5 fact documents (``max_facts``)."""

    method = "activation"
    include_facts = True

    @pytest.mark.xfail(
        reason="include_facts=True (the default) appends up to max_facts fact documents after the k passages: "
        "k counts passages, not documents (include_facts=False: exactly k, see the other classes)",
        strict=True,
    )
    def test_k_constructor_param(self) -> None:
        super().test_k_constructor_param()

    @pytest.mark.xfail(
        reason="include_facts=True (the default) appends up to max_facts fact documents after the k passages: "
        "k counts passages, not documents (include_facts=False: exactly k, see the other classes)",
        strict=True,
    )
    def test_invoke_with_k_kwarg(self, retriever: KGRAGLangChainRetriever) -> None:
        super().test_invoke_with_k_kwarg(retriever)


def test_every_method_has_a_standard_test_class():
    covered = {cls.method for cls in _KGRAGStandard.__subclasses__() if not cls.include_facts}
    assert covered == set(METHODS)
