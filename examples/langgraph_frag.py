"""FRAG (hop-aware path retrieval, docs/methods.md §2) as a LangGraph graph, offline, on a tiny movie KG.

Run: python examples/langgraph_frag.py   (set KGRAG_LLM_BASE_URL / KGRAG_LLM_MODEL to also generate)
"""

from kgrag_plugins.config import env
from kgrag_plugins.index.graph import KnowledgeGraph
from kgrag_plugins.index.store import KnowledgeIndex
from kgrag_plugins.integrations.langgraph import frag_graph
from kgrag_plugins.types import Entity

# MetaQA-style triples, stored one way (movie -> relation -> value); FRAG walks them both ways.
MOVIES = {
    "Big": ("Penny Marshall", ["Tom Hanks"], "1988"),
    "A League of Their Own": ("Penny Marshall", ["Tom Hanks", "Geena Davis"], "1992"),
    "Awakenings": ("Penny Marshall", ["Robin Williams", "Robert De Niro"], "1990"),
    "Forrest Gump": ("Robert Zemeckis", ["Tom Hanks", "Robin Wright"], "1994"),
    "Cast Away": ("Robert Zemeckis", ["Tom Hanks", "Helen Hunt"], "2000"),
    "Taxi Driver": ("Martin Scorsese", ["Robert De Niro", "Jodie Foster"], "1976"),
}
graph = KnowledgeGraph()
for movie, (director, actors, year) in MOVIES.items():
    for relation, value in [("directed_by", director), ("release_year", year)] + [
        ("starred_actors", a) for a in actors
    ]:
        graph.add_entity(Entity(movie, movie))
        graph.add_entity(Entity(value, value))
        graph.add_triple(movie, relation, value)
index = KnowledgeIndex.build([], graph=graph, progress=False)  # a KG without passages

llm = None
if env("LLM_BASE_URL"):
    from kgrag_plugins.models.llm import OpenAICompatibleLLM

    llm = OpenAICompatibleLLM.from_env()
# classifier=HopClassifier(...).fit(questions, hops) (or a saved one's path) replaces the heuristic router;
# make_hop_router(simple, complex) puts the same router in front of any two retrievers or subgraphs.
app = frag_graph(index, llm=llm, k=5)

for question in [
    "which person directed the movies starred by [Tom Hanks]",
    "who directed the films that share actors with the films directed by [Penny Marshall]",
]:
    state = {"question": question}
    for update in app.stream(state, stream_mode="updates"):
        for node, out in update.items():
            state.update(out)
    print(f"\n{question}\n  route: {state['route']}  (by {state['trace']['route']['by']})")
    for path in state["facts"][:3]:
        print("  path:", path)
    print("  answers:", state["answers"][:4])
    print("  generation:", state.get("generation"))
