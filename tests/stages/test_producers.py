"""Producer expansion: a top hit's unbound id parameter gets its best producer right before it."""

from __future__ import annotations

import json

from llama_index.core.schema import NodeWithScore, TextNode
from specrag.catalog.models import ApiIndex
from specrag.core.ids import operation_chunk_id
from specrag.core.records import ADDED_STEP
from specrag.graph.models import DependencyEdge, EdgeSource, ParamNeed, ResourceEntry
from specrag.stages.names import (
    named_spans,
    names_something,
    names_the_caller,
    owned_by_asker,
    without_names,
)
from specrag.stages.producers import ProducerExpander, for_the_asker
from specrag.stages.query import SpecQuery

API = "films"


def op(path: str) -> str:
    return operation_chunk_id(API, path, "get")


MOVIE = ParamNeed(name="movie_id", location="path", required=True, id_like=True, resources=["movie"])
TEXT = ParamNeed(name="query", location="query", required=True, text=True)
COLLECTION = ParamNeed(name="collection_id", location="path", required=True, id_like=True, resources=["collection"])
USER = ParamNeed(name="user_id", location="path", required=True, id_like=True, resources=["user"])
PLAYLIST = ParamNeed(name="playlist_id", location="path", required=True, id_like=True, resources=["playlist"])


def edge(consumer: str, param: str, producer: str, score: float = 0.75, field: str = "results[].id") -> DependencyEdge:
    return DependencyEdge(consumer=op(consumer), param=param, producer=op(producer), field=field, score=score,
                          resource=param.removesuffix("_id"), source=EdgeSource.TYPE)


SPEC = {  # path -> (params, producers)
    "/search/movie": ([TEXT], []),
    "/movie/top_rated": ([], []),
    "/movie/{movie_id}": ([MOVIE], []),
    "/movie/{movie_id}/credits": ([MOVIE], [edge("/movie/{movie_id}/credits", "movie_id", p, s) for p, s in
                                            [("/movie/{movie_id}", 0.9), ("/search/movie", 0.75),
                                             ("/movie/top_rated", 0.75), ("/collection/{collection_id}", 0.72)]]),
    "/collection/{collection_id}": ([COLLECTION], [edge("/collection/{collection_id}", "collection_id",
                                                        "/search/collection")]),
    "/search/collection": ([TEXT], []),
    "/collection/{collection_id}/images": ([COLLECTION], [edge("/collection/{collection_id}/images", "collection_id",
                                                               "/search/collection")]),
    "/genre/list": ([], []),
    "/search/studio": ([TEXT], []),
    "/studio/{studio_id}/images": ([ParamNeed(name="studio_id", location="path", required=True, id_like=True,
                                              resources=["studio"])], []),
    "/me": ([], []),
    "/me/tracks": ([], []),
    "/browse/featured-playlists": ([], []),
    # the graph offers lists whose items carry some user's id as strongly as the caller's own record
    "/users/{user_id}/playlists": ([USER], [edge("/users/{user_id}/playlists", "user_id", p, s, f) for p, s, f in
                                            [("/browse/featured-playlists", 0.75, "playlists.items[].owner.id"),
                                             ("/me/tracks", 0.75, "items[].track.added_by.id"), ("/me", 0.5, "id")]]),
    "/me/playlists": ([], []),
    # no caller's own list here: the caller's playlists are the user's, by the user id GET /me gives
    "/users/{user_id}/playlists/{playlist_id}/tracks": (
        [USER, PLAYLIST],
        [edge("/users/{user_id}/playlists/{playlist_id}/tracks", param, p, s, f) for param, p, s, f in
         [("user_id", "/browse/featured-playlists", 0.75, "playlists.items[].owner.id"), ("user_id", "/me", 0.5, "id"),
          ("playlist_id", "/browse/featured-playlists", 0.75, "playlists.items[].id"),
          ("playlist_id", "/users/{user_id}/playlists", 0.75, "items[].id")]]),
    "/playlists/{playlist_id}/tracks": ([PLAYLIST], [edge("/playlists/{playlist_id}/tracks", "playlist_id", p, 0.75, f)
                                                     for p, f in [("/browse/featured-playlists", "playlists.items[].id"),
                                                                  ("/me/playlists", "items[].id")]]),
}


def node(path: str, score: float = 1.0) -> NodeWithScore:
    params, producers = SPEC[path]
    meta = {"source_file": API, "params": json.dumps([p.model_dump() for p in params]),
            "producers": json.dumps([e.model_dump(mode="json", exclude={"consumer"}) for e in producers])}
    return NodeWithScore(node=TextNode(id_=op(path), text=f"doc {path}", metadata=meta), score=score)


def hydrate(hits):
    by_id = {op(p): p for p in SPEC}
    return [node(by_id[h.node.node_id], h.score or 0.0) for h in hits if h.node.node_id in by_id]


INDEX = ApiIndex(file_id=API, name="Films", resources=[
    ResourceEntry(name="collection", lookups=[op("/search/collection")], producers=1,
                  consumers=[op("/collection/{collection_id}"), op("/collection/{collection_id}/images")]),
    ResourceEntry(name="movie", lookups=[op("/search/movie")], producers=4, consumers=[op("/movie/{movie_id}/credits")]),
])


class ApiRanking:
    """A retriever stand-in: ranks one API's endpoints in a fixed order (stubs, like the real one)."""

    def __init__(self, *paths: str):
        self.paths, self.queries = paths, []

    def retrieve(self, query: SpecQuery):
        self.queries.append(query)
        return [NodeWithScore(node=TextNode(id_=op(p), text=""), score=1.0) for p in self.paths]


def expander(**kw) -> ProducerExpander:
    return ProducerExpander(hydrate=hydrate, load_index=lambda api: INDEX if api == API else None, **kw)


def run(step: ProducerExpander, question: str, *paths: str, top_k: int = 10) -> list[NodeWithScore]:
    query = SpecQuery(query_str=question + " expanded", custom_embedding_strs=[question], top_k=top_k)
    return step.postprocess_nodes([node(p, 1.0 / (i + 1)) for i, p in enumerate(paths)], query_bundle=query)


def paths_of(nodes) -> list[str]:
    return [n.node.node_id.split(":", 1)[1].removeprefix("paths/").replace("~1", "/").removesuffix("/get") for n in nodes]


def test_an_input_free_list_binds_the_id_when_the_question_names_nothing():
    out = run(expander(), "Who directed the top rated movie?", "/movie/{movie_id}/credits", "/genre/list")
    assert paths_of(out) == ["/movie/top_rated", "/movie/{movie_id}/credits", "/genre/list"]
    assert out[0].node.metadata[ADDED_STEP] == "provides movie_id for GET /movie/{movie_id}/credits"
    assert out[0].node.get_content() == "doc /movie/top_rated"  # hydrated
    assert ADDED_STEP not in out[1].node.metadata
    assert ADDED_STEP not in out[0].node.get_content(metadata_mode="llm")


def test_a_free_text_lookup_binds_the_id_when_the_question_names_something():
    out = run(expander(), 'Who directed "Titanic"?', "/movie/{movie_id}/credits", "/genre/list")
    assert paths_of(out)[:2] == ["/search/movie", "/movie/{movie_id}/credits"]


def test_the_retrievers_ranking_within_the_api_decides_between_equals():
    ranking = ApiRanking("/movie/top_rated", "/movie/{movie_id}/credits")
    out = run(expander(retriever=ranking, lookup_weight=0.0), "Who directed the best movie?",
              "/movie/{movie_id}/credits")
    assert paths_of(out)[0] == "/movie/top_rated"
    sent = ranking.queries[0]
    assert (sent.file_ids, sent.types, sent.hydrate, sent.custom_embedding_strs) == (
        [API], ["endpoint"], False, ["Who directed the best movie?"])


def test_a_producer_already_ranked_above_binds_and_one_below_moves_up():
    above = run(expander(), "x", "/movie/top_rated", "/movie/{movie_id}/credits")
    assert paths_of(above) == ["/movie/top_rated", "/movie/{movie_id}/credits"]  # bound: nothing added
    below = run(expander(), "credits of the top rated movie", "/movie/{movie_id}/credits", "/genre/list",
                "/movie/top_rated")
    assert paths_of(below) == ["/movie/top_rated", "/movie/{movie_id}/credits", "/genre/list"]  # moved, not repeated


def test_chains_are_followed_and_the_depth_is_kept():
    out = run(expander(max_chain=2), "movies of a collection", "/collection/{collection_id}/images",
              "/genre/list", "/movie/top_rated", top_k=3)
    assert paths_of(out) == ["/search/collection", "/collection/{collection_id}/images", "/genre/list"]


def test_a_named_resource_brings_its_lookup_and_the_call_that_uses_it():
    ranking = ApiRanking("/collection/{collection_id}/images", "/collection/{collection_id}")
    out = run(expander(retriever=ranking), "give me an image for the collection Star Wars", "/genre/list",
              "/movie/top_rated")
    assert paths_of(out) == ["/genre/list", "/search/collection", "/collection/{collection_id}/images",
                             "/movie/top_rated"]
    assert out[1].node.metadata[ADDED_STEP] == "looks up the collection 'Star Wars'"
    assert out[2].node.metadata[ADDED_STEP] == "uses the collection id that GET /search/collection finds"


def test_a_named_resource_is_bridged_to_the_id_a_top_hit_needs():
    """The credits of a movie *of a collection*: after the collection's lookup comes the call that
    takes its id and yields movie ids (the graph's edge), not the collection call ranked best."""
    ranking = ApiRanking("/collection/{collection_id}/images", "/collection/{collection_id}")
    out = run(expander(retriever=ranking), "credits of a movie of the collection Star Wars",
              "/movie/{movie_id}/credits", "/genre/list")
    paths = paths_of(out)
    at = paths.index("/search/collection")
    assert paths[at + 1] == "/collection/{collection_id}" and "/collection/{collection_id}/images" not in paths
    assert out[at + 1].node.metadata[ADDED_STEP] == "uses the collection id that GET /search/collection finds"


def test_a_typed_name_is_looked_up_in_a_preferred_api_when_another_api_tops_the_ranking():
    """Another API's list on top knows no "movie": the movie is looked up in the API stage 1
    preferred that has one, not typed by the top API's best guess."""
    other = NodeWithScore(node=TextNode(id_=operation_chunk_id("boxoffice", "/lists", "get"), text="doc",
                                        metadata={"source_file": "boxoffice"}), score=1.0)
    ranked = [other, node("/genre/list", 0.5)]
    query = SpecQuery(query_str="the cast of the movie Titanic", prefer_file_ids=["boxoffice", API], top_k=10)
    out = expander().postprocess_nodes(ranked, query_bundle=query)
    assert paths_of(out) == ["/lists", "/search/movie", "/movie/{movie_id}/credits", "/genre/list"]
    assert out[1].node.metadata[ADDED_STEP] == "looks up the movie 'Titanic'"
    unpreferred = expander().postprocess_nodes(ranked, query_bundle=SpecQuery(query_str=query.query_str, top_k=10))
    assert paths_of(unpreferred) == ["/lists", "/genre/list"]
    third = SpecQuery(query_str=query.query_str, prefer_file_ids=["boxoffice", "radio", API], top_k=10)
    assert paths_of(expander().postprocess_nodes(ranked, query_bundle=third)) == ["/lists", "/genre/list"]  # not in
    # the API stage 1 put first: a third API's lookup would answer for another API's thing


def test_nothing_to_bind_or_no_question_changes_nothing():
    ranked = [node("/genre/list", 1.0), node("/movie/top_rated", 0.5)]
    assert run(expander(), "list the genres", "/genre/list", "/movie/top_rated") == ranked
    assert expander().postprocess_nodes(ranked) == ranked
    capped = run(expander(max_added=0), "Who directed the top rated movie?", "/movie/{movie_id}/credits")
    assert paths_of(capped) == ["/movie/{movie_id}/credits"]


def test_an_untyped_name_gets_the_resource_whose_consumers_rank_best():
    ranking = ApiRanking("/genre/list", "/collection/{collection_id}/images", "/movie/{movie_id}/credits")
    out = run(expander(retriever=ranking), "pictures of Star Wars please", "/genre/list")
    assert paths_of(out)[:3] == ["/genre/list", "/search/collection", "/collection/{collection_id}/images"]
    owned = run(expander(retriever=ranking), "the credits of Star Wars's collection", "/genre/list")
    assert "/search/collection" not in paths_of(owned)  # a possessive: the name is not the collection


def test_the_agent_of_a_passive_clause_is_not_the_resource_it_acts_on():
    ranking = ApiRanking("/movie/{movie_id}/credits", "/collection/{collection_id}/images")
    plain = run(expander(retriever=ranking), "the credits of Star Wars", "/genre/list")
    assert paths_of(plain)[1] == "/search/movie"  # untyped: the resource whose consumers rank best
    agent = run(expander(retriever=ranking), "the movies grouped by Star Wars", "/genre/list")
    assert "/search/movie" not in paths_of(agent) and paths_of(agent)[1] == "/search/collection"


def test_a_name_that_made_or_owns_a_resource_is_of_a_type_with_a_call_that_yields_it():
    """"Movies grouped by Star Wars": of the resources it may be, the one a call of which yields
    movie ids (the collection's details), not the studio whose consumers the ranking puts first."""
    studio = ResourceEntry(name="studio", lookups=[op("/search/studio")], consumers=[op("/studio/{studio_id}/images")])
    index = INDEX.model_copy(update={"resources": [*INDEX.resources, studio]})
    ranking = ApiRanking("/studio/{studio_id}/images", "/collection/{collection_id}/images")
    step = ProducerExpander(hydrate=hydrate, load_index=lambda api: index, retriever=ranking)
    assert paths_of(run(step, "the credits of Star Wars", "/genre/list"))[1] == "/search/studio"  # untyped
    assert paths_of(run(step, "the movies grouped by Star Wars", "/genre/list"))[1] == "/search/collection"
    assert paths_of(run(step, "Star Wars's movies", "/genre/list"))[1] == "/search/collection"


def test_single_quoted_names_but_no_apostrophes_and_no_name_of_something_new():
    spans = named_spans("Add Hello to my playlist 'Sad Songs', not to Nolan's list")
    assert [(s.text, s.before) for s in spans] == [("Sad Songs", ["my", "playlist"]), ("Hello", ["add"]),
                                                   ("Nolan", ["not", "to"])]
    assert [s.text for s in named_spans("I don't know what it's for")] == []
    assert named_spans("Create a new playlist called 'Road Trip' for me") == []  # nothing has that name yet
    assert [s.text for s in named_spans("Open the playlist called 'Road Trip'")] == ["Road Trip"]


def test_what_a_name_after_by_acts_on():
    assert named_spans("give me the number of movies directed by Sofia Coppola")[0].acted_on == [
        "of", "movies", "directed"]
    assert named_spans('orders placed by "John Smith" last week')[0].acted_on == ["orders", "placed"]
    assert named_spans("songs by Adele")[0].acted_on == ["songs"]
    assert named_spans("Released in 1997, by James Cameron")[0].acted_on == []  # never across a comma
    assert named_spans("Who directed Titanic?")[0].acted_on == []


def test_named_spans_and_what_types_them():
    spans = named_spans('movies directed by Sofia Coppola, the movie "Twilight" and a TV show called House of Cards')
    assert [(s.text, s.before) for s in spans] == [
        ("Twilight", ["the", "movie"]), ("Sofia Coppola", ["directed", "by"]), ("House of Cards", ["tv", "show"])]
    owner = named_spans("give me some reviews of Cate Blanchett's latest TV show")[0]
    assert (owner.text, owner.owned) == ("Cate Blanchett", ["latest", "tv", "show"])
    assert [s.text for s in named_spans("Who directed more movies, Akira Kurosawa or Spielberg?")] == [
        "Akira Kurosawa", "Spielberg"]
    assert named_spans("Who is it, Akira Kurosawa?")[0].before == []  # never across a comma


def test_names_something():
    assert names_something('Who directed "Twilight"?')
    assert names_something("give me the number of movies directed by Sofia Coppola")
    assert not names_something("Who directed the top-1 rated movie? I need the API")
    assert not names_something("What is top rated?")


def test_without_names_keeps_what_is_asked_and_blanks_the_values_named():
    assert without_names("give me the homepage of the network that produced Game of Thrones").split() == [
        "give", "me", "the", "homepage", "of", "the", "network", "that", "produced"]
    # quoted names go too, the name of something new included: a value, not what is asked for
    assert without_names('Rename it to "Updated Sales Data" in the new dashboard "Star Map"').split() == [
        "Rename", "it", "to", "in", "the", "new", "dashboard"]
    assert without_names('Show the endgame of "Game"').split() == ["Show", "the", "endgame", "of"]  # whole words only
    assert without_names("Who directed the top-1 rated movie?") == "Who directed the top-1 rated movie?"
    assert without_names('"Titanic"') == '"Titanic"'  # nothing else left: the question as it is


def test_a_top_list_that_leaves_words_unanswered_is_followed_by_the_call_that_uses_its_id():
    ranking = ApiRanking("/movie/top_rated", "/collection/{collection_id}/images", "/movie/{movie_id}/credits")
    out = run(expander(retriever=ranking), "credits of the top rated movie", "/movie/top_rated", "/genre/list")
    assert paths_of(out) == ["/movie/top_rated", "/movie/{movie_id}/credits", "/genre/list"]
    assert out[1].node.metadata[ADDED_STEP] == "uses the movie_id that GET /movie/top_rated finds"
    assert out[1].node.get_content() == "doc /movie/{movie_id}/credits"  # hydrated


def test_no_follow_up_when_the_top_hit_answers_every_word_or_such_a_call_is_ranked():
    ranking = ApiRanking("/movie/{movie_id}/credits")
    answered = run(expander(retriever=ranking), "top rated movie", "/movie/top_rated", "/genre/list")
    assert paths_of(answered) == ["/movie/top_rated", "/genre/list"]
    ranked = run(expander(retriever=ranking), "credits of the top rated movie", "/movie/top_rated", "/genre/list",
                 "/movie/{movie_id}/credits")
    assert paths_of(ranked) == ["/movie/top_rated", "/genre/list", "/movie/{movie_id}/credits"]
    off = run(expander(retriever=ranking, follow_depth=0), "credits of the top rated movie", "/movie/top_rated")
    assert paths_of(off) == ["/movie/top_rated"]
    wordless = run(expander(retriever=ranking), "reviews of the top rated movie", "/movie/top_rated")
    assert paths_of(wordless) == ["/movie/top_rated"]  # the call that uses the id lacks the missing word


def test_a_word_no_ranked_hit_has_brings_the_call_that_has_it_after_the_hit_whose_id_it_takes():
    """The top hit (a genre list) yields nothing the credits call takes, but a hit below it
    does: the call with the missing word comes right after that one."""
    ranking = ApiRanking("/genre/list", "/movie/{movie_id}/credits")
    out = run(expander(retriever=ranking), "credits of the top rated movie", "/genre/list", "/movie/top_rated")
    assert paths_of(out) == ["/genre/list", "/movie/top_rated", "/movie/{movie_id}/credits"]
    assert out[2].node.metadata[ADDED_STEP] == "uses the movie_id that GET /movie/top_rated finds"
    unproduced = run(expander(retriever=ranking), "credits of a movie", "/genre/list")
    assert paths_of(unproduced) == ["/genre/list"]  # no ranked hit yields the movie id it takes
    answered = run(expander(retriever=ranking), "top rated movie genres", "/genre/list", "/movie/top_rated")
    assert paths_of(answered) == ["/genre/list", "/movie/top_rated"]  # every word is in a ranked hit


def test_first_person_possessives_and_the_paths_that_name_the_caller():
    assert owned_by_asker("Show me my playlists") == ["playlists"]
    assert owned_by_asker("Add Hello to my saved tracks, then play it") == ["saved", "tracks"]
    assert owned_by_asker("Is this invoice OURS?") == [] and owned_by_asker("my, my: what is this") == []
    assert owned_by_asker("my my my") == ["my", "my", "my"]  # each governs the words after it
    assert owned_by_asker("Show me the playlists of Adele") is None and owned_by_asker("flights to Myanmar") is None
    # the asker as beneficiary: what is made or done is theirs, though no possessive names a resource
    assert owned_by_asker("Create a new playlist called 'Road Trip' for me") == []
    assert owned_by_asker("Book a table for us, please") == [] and owned_by_asker("Is there a seat for me?") == []
    assert owned_by_asker("Tell me about it") is None and owned_by_asker("a menu for meetings") is None
    assert names_the_caller("/me") and names_the_caller("/me/tracks") and names_the_caller("/my/music/follows")
    assert not any(names_the_caller(p) for p in ("/users/{user_id}", "/media/{id}", "/memes", "/mine-sites"))


def test_for_the_asker_takes_the_callers_record_else_its_list_of_what_the_possessive_names():
    users = SPEC["/users/{user_id}/playlists"][1]
    assert for_the_asker(users, None) == users
    assert [e.producer for e in for_the_asker(users, ["library"])] == [op("/me")]  # the caller itself
    listed = [e for e in users if e.producer != op("/me")]  # the caller's tracks hold some user's id
    assert for_the_asker(listed, ["playlists"]) == listed
    playlists = SPEC["/playlists/{playlist_id}/tracks"][1]
    assert [e.producer for e in for_the_asker(playlists, ["playlist", "road", "trip"])] == [op("/me/playlists")]
    assert for_the_asker(playlists, ["library"]) == playlists  # "the track X to my library" is no track of mine
    assert for_the_asker(playlists, []) == playlists  # "is it ours?" names no resource


def producer_edges(chunk_id: str) -> list[DependencyEdge]:
    return next((edges for path, (_, edges) in SPEC.items() if op(path) == chunk_id), [])


def test_without_the_callers_own_list_the_askers_things_come_from_a_list_keyed_by_the_callers_id():
    tracks = SPEC["/users/{user_id}/playlists/{playlist_id}/tracks"][1]
    playlists = [e for e in tracks if e.param == "playlist_id"]
    create = DependencyEdge(consumer=tracks[0].consumer, param="playlist_id", field="id", score=1.0,
                            producer=operation_chunk_id(API, "/users/{user_id}/playlists", "post"),
                            resource="playlist", source=EdgeSource.TYPE)

    def edges_of(chunk_id: str) -> list[DependencyEdge]:  # the call that makes one takes the caller's id too
        return producer_edges(op("/users/{user_id}/playlists") if chunk_id == create.producer else chunk_id)

    def no_caller(chunk_id: str) -> list[DependencyEdge]:
        return [e for e in producer_edges(chunk_id) if e.producer != op("/me")]

    mine = for_the_asker([create, *playlists], ["playlist", "favorites"], edges_of)
    assert [e.producer for e in mine] == [op("/users/{user_id}/playlists")]  # a list, read: no playlist made
    assert for_the_asker(playlists, ["playlist"]) == playlists  # nothing tells who the list is keyed by
    assert for_the_asker(playlists, ["library"], edges_of) == playlists  # the possessive names no playlist
    assert for_the_asker(playlists, ["playlist"], no_caller) == playlists


def test_the_askers_own_things_take_their_id_from_the_call_that_names_the_caller():
    ranking = ApiRanking("/browse/featured-playlists", "/users/{user_id}/playlists", "/me/playlists")
    mine = run(expander(retriever=ranking), "Show me my playlists", "/users/{user_id}/playlists")
    assert paths_of(mine) == ["/me", "/users/{user_id}/playlists"]
    assert mine[0].node.metadata[ADDED_STEP] == "provides user_id for GET /users/{user_id}/playlists"
    theirs = run(expander(retriever=ranking), "Show me the playlists of a featured user", "/users/{user_id}/playlists")
    assert paths_of(theirs) == ["/browse/featured-playlists", "/users/{user_id}/playlists"]
    made_for_me = run(expander(retriever=ranking), "Make a playlist for me", "/users/{user_id}/playlists")
    assert paths_of(made_for_me) == ["/me", "/users/{user_id}/playlists"]  # the beneficiary is the caller
    listed_above = run(expander(retriever=ranking), "Show me my playlists", "/browse/featured-playlists",
                       "/users/{user_id}/playlists")
    assert paths_of(listed_above) == ["/browse/featured-playlists", "/me", "/users/{user_id}/playlists"]
    own_list = run(expander(retriever=ranking), "What is on my playlist Road Trip?", "/playlists/{playlist_id}/tracks")
    assert paths_of(own_list) == ["/me/playlists", "/playlists/{playlist_id}/tracks"]
    featured = run(expander(retriever=ranking), "What is on the playlist Road Trip?", "/playlists/{playlist_id}/tracks")
    assert paths_of(featured) == ["/browse/featured-playlists", "/playlists/{playlist_id}/tracks"]
    nested = "/users/{user_id}/playlists/{playlist_id}/tracks"
    two_hops = run(expander(retriever=ranking), "What songs are on my playlist Rock?", nested)
    assert paths_of(two_hops) == ["/me", "/users/{user_id}/playlists", nested]
    assert two_hops[1].node.metadata[ADDED_STEP] == f"provides playlist_id for GET {nested}"
    theirs = run(expander(retriever=ranking), "What songs are on the playlist Rock?", nested)
    assert paths_of(theirs) == ["/browse/featured-playlists", nested]
