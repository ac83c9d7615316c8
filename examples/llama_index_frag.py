"""FRAG (hop-aware path retrieval, docs/methods.md §2) as a LlamaIndex retriever, offline, on a tiny movie KG.

Run: python examples/llama_index_frag.py
"""

from kgrag_plugins.index.graph import KnowledgeGraph
from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.integrations.llama_index import HopAwareRetriever
from kgrag_plugins.methods.frag.hop_classifier import HopClassifier
from kgrag_plugins.types import Entity

TRIPLES = [  # MetaQA-style, stored one way: movie -> relation -> value
    ("Big", "directed_by", "Penny Marshall"),
    ("Big", "starred_actors", "Tom Hanks"),
    ("A League of Their Own", "directed_by", "Penny Marshall"),
    ("A League of Their Own", "starred_actors", "Geena Davis"),
    ("A League of Their Own", "release_year", "1992"),
    ("Forrest Gump", "directed_by", "Robert Zemeckis"),
    ("Forrest Gump", "starred_actors", "Tom Hanks"),
    ("Forrest Gump", "release_year", "1994"),
    ("Cast Away", "directed_by", "Robert Zemeckis"),
    ("Cast Away", "starred_actors", "Helen Hunt"),
    ("Cast Away", "release_year", "2000"),
]
graph = KnowledgeGraph()
for head, relation, tail in TRIPLES:
    graph.add_entity(Entity(head, head))
    graph.add_entity(Entity(tail, tail))
    graph.add_triple(head, relation, tail)
index = KnowledgeIndex.build([], graph=graph, progress=False)

# A toy hop classifier (train one on real data with `kgrag train hop-classifier`); classifier=None
# routes with an LLM-free heuristic instead.
classifier = HopClassifier(index.embedder).fit(
    [
        "who directed [Big]",
        "what films did [Tom Hanks] act in",
        "when was [Cast Away] released",
        "who directed the movies starred by [Tom Hanks]",
        "who directed the films that share actors with the films of [Penny Marshall]",
        "when were the films released that share directors with the films starred by [Geena Davis]",
    ],
    [1, 1, 1, 2, 3, 3],
)
retriever = HopAwareRetriever(index, classifier=classifier, k=5, max_facts=4)
for question in [
    "which person directed the movies starred by [Tom Hanks]",
    "when were the movies released that share directors with [Big]",
]:
    nodes = retriever.retrieve(question)  # passages (none here) first, then paths (metadata["kind"] == "path")
    trace = retriever.last_trace
    print(f"\n{question}\n  route: {retriever.last_route}  P(complex) = {trace['p_complex']:.2f}")
    for n in nodes:
        print(f"  {n.score:6.3f}  [{n.node.metadata['kind']}, {n.node.metadata['hops']} hops] {n.node.get_content()}")
    print("  answers:", retriever.last_answers[:4])
# With any LlamaIndex LLM: RetrieverQueryEngine.from_args(retriever, llm=llm).query(question)
