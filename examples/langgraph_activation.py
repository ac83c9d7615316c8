"""Spreading-activation retrieval as a LangGraph graph, offline, on the bundled sample corpus.

Run: python examples/langgraph_activation.py   (set KGRAG_LLM_BASE_URL / KGRAG_LLM_MODEL to also generate)
"""

import tempfile

from kgrag_plugins.config import env
from kgrag_plugins.demo import sample_corpus
from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.integrations.langgraph import activation_graph

question = "Which river flows through the city where Marie Curie was born?"
llm = None
if env("LLM_BASE_URL"):
    from kgrag_plugins.models.llm import OpenAICompatibleLLM

    llm = OpenAICompatibleLLM.from_env()
with tempfile.TemporaryDirectory() as tmp:
    index = KnowledgeIndex.build(sample_corpus(), f"{tmp}/index", builder="mentions", progress=False)
    graph = activation_graph(index, llm, k=5)  # also: kg_infused_graph(index, llm), sa_rag_graph(index, llm)
    state = {"question": question}
    for update in graph.stream(state, stream_mode="updates"):
        for node, out in update.items():
            print(f"-- {node}")
            state.update(out)
    for doc in state["documents"]:
        print(f"{doc.metadata['score']:6.3f}  [{doc.metadata['title']}] {doc.page_content[:100]}")
    print("facts:", state["facts"][:5])
    print("generation:", state.get("generation"))
