"""Lookup steps: named entities, the API's search endpoints, and where they enter the ranking."""

from __future__ import annotations

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from pipeline.catalog.models import ApiIndex, EndpointEntry
from pipeline.stages.lookup import LookupStepAdder, lookup_endpoints, named_entities, needed_resources
from pipeline.specs.ids import operation_chunk_id
from pipeline.stages.query import SpecQuery
from pipeline.stages.results import ADDED_STEP

API = "films"


def ep(path: str, op_id: str = "") -> EndpointEntry:
    return EndpointEntry(path=path, methods=["GET"], operation_ids=[op_id] if op_id else [])


INDEX = ApiIndex(file_id=API, name="Films", endpoints=[
    ep("/search/movie"), ep("/search/person"), ep("/search/company"),
    ep("/movie/{movie_id}"), ep("/movie/{movie_id}/credits"), ep("/movie/top_rated"),
    ep("/person/{person_id}"), ep("/person/{person_id}/movie_credits"),
    ep("/users", "findUsers"),
])


def op(path: str) -> str:
    return operation_chunk_id(API, path, "get")


def ranking(*paths: str) -> list[NodeWithScore]:
    return [NodeWithScore(node=TextNode(id_=op(p), text=p, metadata={"source_file": API}), score=1.0 / (i + 1))
            for i, p in enumerate(paths)]


def hydrate(hits):
    return [NodeWithScore(node=TextNode(id_=h.node.node_id, text="full", metadata={"source_file": API}), score=h.score)
            for h in hits]


@pytest.mark.parametrize("query,entities", [
    ("give me the number of movies directed by Sofia Coppola", [("Sofia Coppola", True)]),
    ('Who is the director of the movie "Twilight"?', [("Twilight", False)]),
    ("Who was the lead actor in the movie The Dark Knight?", [("The Dark Knight", False)]),
    ("Who is the director of Leonardo DiCaprio's latest movie?", [("Leonardo DiCaprio", True)]),
    ("give me a poster of the third episode of Band of Brothers", [("Band of Brothers", False)]),
    ("What is top-1 rated movie?", []),
    ("How do I create a user? I need the API", []),
])
def test_named_entities(query, entities):
    assert [(e.text, e.person_like) for e in named_entities(query)] == entities


def test_lookup_endpoints_and_the_resources_they_resolve():
    found = {l.chunk_id: set(l.resource) for l in lookup_endpoints(API, INDEX)}
    assert found == {op("/search/movie"): {"movi"}, op("/search/person"): {"person"},
                     op("/search/company"): {"compani"}, op("/users"): {"user"}}
    assert needed_resources([op("/movie/{movie_id}/credits"), op("/person/{person_id}"), op("/movie/top_rated")]) == \
        {"movi", "person"}


def test_person_named_in_a_movie_question_gets_person_search_and_its_follow_up():
    adder = LookupStepAdder(load_index=lambda f: INDEX if f == API else None)
    ranked = ranking("/movie/top_rated", "/movie/{movie_id}", "/movie/{movie_id}/credits")
    api_order = [op("/person/{person_id}/movie_credits"), op("/person/{person_id}"), op("/movie/{movie_id}")]
    out, added = adder.add("tell me the highest rated movie directed by Martin Scorsese", ranked, hydrate, 10,
                           search_api=lambda api: api_order)
    assert added == [op("/search/movie"), op("/search/person"), op("/person/{person_id}/movie_credits")]
    assert [n.node.node_id for n in out] == [op("/movie/top_rated"), *added, op("/movie/{movie_id}"),
                                             op("/movie/{movie_id}/credits")]
    assert all(n.node.get_content() for n in out)  # the new ones were hydrated


def test_no_entity_or_no_search_endpoint_changes_nothing():
    adder = LookupStepAdder(load_index=lambda f: INDEX if f == API else ApiIndex(file_id=f, name=f))
    ranked = ranking("/movie/top_rated", "/movie/{movie_id}")
    assert adder.add("What is the top rated movie?", ranked, hydrate, 10) == (ranked, [])
    other = [NodeWithScore(node=TextNode(id_="other:paths/~1x/get", text="x"), score=1.0)]
    assert adder.add('Find "Twilight"', other, hydrate, 10) == (other, [])


def test_an_already_ranked_lookup_moves_up_instead_of_repeating():
    adder = LookupStepAdder(load_index=lambda f: INDEX)
    ranked = ranking("/movie/{movie_id}/credits", "/movie/top_rated", "/movie/{movie_id}", "/search/movie")
    out, added = adder.add('Who directed "Twilight"?', ranked, hydrate, 3)
    assert added == [op("/search/movie")]
    assert [n.node.node_id for n in out] == [op("/movie/{movie_id}/credits"), op("/search/movie"), op("/movie/top_rated")]


def test_as_a_postprocessor_it_reads_the_question_from_the_query_and_marks_what_it_added():
    adder = LookupStepAdder(load_index=lambda f: INDEX, hydrate=hydrate)
    ranked = ranking("/movie/{movie_id}/credits", "/movie/top_rated")
    query = SpecQuery(query_str='Who directed "Twilight"? getMovieCredits', custom_embedding_strs=['Who directed "Twilight"?'],
                      top_k=10)
    out = adder.postprocess_nodes(ranked, query_bundle=query)
    assert [n.node.node_id for n in out] == [op("/movie/{movie_id}/credits"), op("/search/movie"), op("/movie/top_rated")]
    assert ADDED_STEP in out[1].node.metadata and ADDED_STEP not in out[0].node.metadata
    assert ADDED_STEP not in out[1].node.get_content(metadata_mode="llm")
    assert adder.postprocess_nodes(ranked) == ranked  # no question, nothing to do
