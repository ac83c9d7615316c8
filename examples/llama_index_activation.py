"""Spreading-activation retrieval as a LlamaIndex retriever, offline, on the bundled sample corpus.

Run: python examples/llama_index_activation.py   (about 30 s: it builds a small index first)
"""

import tempfile

from kgrag_plugins.demo import sample_corpus
from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.integrations.llama_index import SpreadingActivationRetriever

question = "Which river flows through the city where Marie Curie was born?"
with tempfile.TemporaryDirectory() as tmp:
    index = KnowledgeIndex.build(sample_corpus(), f"{tmp}/index", builder="mentions", progress=False)
    # variant="sa_rag" or "kg_infused" (llm=... optional) plug in the same way.
    retriever = SpreadingActivationRetriever(index, variant="activation", similarity_top_k=5, max_facts=5)
    for n in retriever.retrieve(question):  # passages first, then facts (metadata["kind"])
        label = n.node.metadata["title"] if n.node.metadata["kind"] == "passage" else n.node.metadata["kind"]
        print(f"{n.score:6.3f}  [{label}] {n.node.get_content()[:100]}")
    print("question entities:", [s["name"] for s in retriever.last_trace.get("seeds", [])])
    # With any LlamaIndex LLM: RetrieverQueryEngine.from_args(retriever, llm=llm).query(question)
