"""Text analysis: one identifier splitter for every view, and the two analysers side by side."""

from __future__ import annotations

import pytest
from specrag.core.analysis import (
    QUERY_STOPWORDS,
    identifier_parts,
    identifier_words,
    index_tokens,
    normalise,
    query_terms,
    question_tokens,
    split_identifier,
    with_identifier_parts,
)


@pytest.mark.parametrize("text,parts", [
    ("getMovieCredits", ["get", "Movie", "Credits"]),
    ("movie_id", ["movie", "id"]),
    ("HTTPResponse", ["HTTP", "Response"]),
    ("/movie/{movie_id}/credits", ["movie", "movie", "id", "credits"]),
    ("v2Users", ["v2", "Users"]),
    ("a_bíblia-digital", ["a", "bíblia", "digital"]),
    ("", []),
])
def test_identifier_parts(text, parts):
    assert identifier_parts(text) == parts
    assert split_identifier(text) == " ".join(parts)
    assert identifier_words(text) == [p.lower() for p in parts]


def test_index_time_keeps_identifiers_whole_and_appends_their_parts():
    assert with_identifier_parts("getUserById") == "getUserById get User By Id"
    assert with_identifier_parts("HTTPResponse user_id") == "HTTPResponse user_id HTTP Response user id"
    assert with_identifier_parts("plain words") == "plain words"
    vocab = index_tokens(["getMovieCredits please"]).vocab
    assert {"getmoviecredit", "credit", "movi", "pleas"} <= set(vocab)  # index time keeps 'please'


def test_query_time_splits_and_drops_question_filler():
    assert normalise("Get topRated movies, please") == "get top rated movies please"
    assert query_terms("Could you please tell me the top_rated movies?") == ["top", "rate", "movi"]
    assert {"please", "help", "want"} <= QUERY_STOPWORDS
    assert "get" not in QUERY_STOPWORDS and "list" not in QUERY_STOPWORDS  # API verbs stay


def test_documents_analysed_as_questions_share_the_question_vocabulary():
    vocab = set(question_tokens(["Please list the topRated movies"]).vocab)
    assert vocab == set(query_terms("list topRated movies")) == {"list", "top", "rate", "movi"}


def test_query_terms_are_cached_but_each_caller_gets_its_own_list():
    first = query_terms("List the movies of an actor")
    first.append("changed")
    assert query_terms("List the movies of an actor") == ["list", "movi", "actor"] != first
