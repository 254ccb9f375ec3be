"""Each metric on tiny hand-made rankings, values worked out by hand (and against numpy)."""

import math

import numpy as np
import pytest
from evalfakes import (
    ADDRESS,
    COUNTRY,
    ERROR,
    GET_USER,
    LIST_USERS,
    POST_USERS,
    USER,
    USER_CREATE,
    DictLookup,
    make_chunk,
    op,
    schema,
    users_lookup,
)
from specrag.core.ids import errors_chunk_id
from specrag.evals import metrics as m
from specrag.evals.querysets import endpoint_key, normalize_path

RANKING = ["a", "x", "b", "y", "z", "w", "v", "c"]


def test_recall_at_k_and_all_found():
    gold = {"a", "b", "c"}
    assert m.recall_at_k(RANKING, gold, 5) == pytest.approx(2 / 3)
    assert m.recall_at_k(RANKING, gold, 10) == 1.0
    assert m.all_found_at_k(RANKING, gold, 5) == 0.0
    assert m.all_found_at_k(RANKING, gold, 10) == 1.0
    assert m.recall_at_k(RANKING, {"a", "missing"}, 10) == 0.5
    assert m.all_found_at_k(RANKING, {"a", "missing"}, 10) == 0.0
    assert m.recall_at_k([], gold, 10) == 0.0 and m.recall_at_k(RANKING, set(), 10) == 0.0


def test_reciprocal_rank():
    assert m.reciprocal_rank(RANKING, {"b", "c"}) == pytest.approx(1 / 3)
    assert m.reciprocal_rank(RANKING, {"a"}) == 1.0
    assert m.reciprocal_rank(RANKING, {"missing"}) == 0.0


def test_ndcg_one_gold_item():
    assert m.ndcg_at_k(["a", "x"], {"a"}, 10) == 1.0
    assert m.ndcg_at_k(["x", "a"], {"a"}, 10) == pytest.approx(1 / math.log2(3))  # 0.6309
    assert m.ndcg_at_k(["x"] * 10 + ["a"], {"a"}, 10) == 0.0  # rank 11 is outside @10


def test_ndcg_two_gold_items_uses_ideal_over_all_gold():
    ideal = 1 + 1 / math.log2(3)
    assert m.ndcg_at_k(["b", "a"], {"a", "b"}, 10) == 1.0
    assert m.ndcg_at_k(["a", "x", "b"], {"a", "b"}, 10) == pytest.approx((1 + 0.5) / ideal)  # 0.9197
    # b never retrieved: the ideal ranking still counts it, so a perfect top-1 is not 1.0
    assert m.ndcg_at_k(["a", "x"], {"a", "b"}, 10) == pytest.approx(1 / ideal)  # 0.6131
    # with k=1 the ideal holds one hit only
    assert m.ndcg_at_k(["a", "b"], {"a", "b"}, 1) == 1.0


def test_selection_accuracy_and_precision():
    assert m.selection_accuracy(["a", "b"], ["a", "c", "d"]) == 0.5
    assert m.selection_precision(["a", "b"], ["a", "c", "d"]) == pytest.approx(1 / 3)
    assert m.selection_accuracy(["a"], ["c", "a"]) == 1.0
    assert m.selection_accuracy(["a"], []) == 0.0 and m.selection_precision(["a"], []) == 0.0


def test_chunk_ids_map_to_endpoints():
    post = endpoint_key("users_api", "POST", "/users")
    assert m.chunk_endpoint(POST_USERS) == post
    assert m.chunk_endpoint(errors_chunk_id(POST_USERS)) == post
    assert m.chunk_endpoint(POST_USERS + ":part2") == post
    assert m.chunk_endpoint(USER) is None
    assert m.chunk_endpoint("not-an-id") is None
    ranking = m.ranked_endpoints([USER, errors_chunk_id(POST_USERS), op("users_api", "get", "/users"), POST_USERS])
    assert ranking == [post, endpoint_key("users_api", "GET", "/users")]
    assert m.operation_of(errors_chunk_id(POST_USERS) + ":part3") == POST_USERS


def test_gold_matching_normalises_method_params_and_trailing_slash():
    assert endpoint_key("a", "get", "/users/{id}/") == endpoint_key("a", "GET", "/users/{userId}")
    assert endpoint_key("a", "get", "/users") != endpoint_key("a", "get", "/users/{id}")
    assert endpoint_key("a", "get", "/x") != endpoint_key("b", "get", "/x")
    assert normalize_path("/") == "/" and normalize_path("/a/{b}/c/{d}") == "/a/{}/c/{}"


def test_ref_closure_three_levels_stops_at_depth():
    # op -> A -> B -> C -> D : D is 4 hops away and not required
    ids = {n: schema("t", n) for n in "ABCD"}
    root = op("t", "get", "/x")
    lookup = DictLookup([make_chunk(root, [ids["A"]]), make_chunk(ids["A"], [ids["B"]]),
                         make_chunk(ids["B"], [ids["C"]]), make_chunk(ids["C"], [ids["D"]]), make_chunk(ids["D"])])
    assert m.ref_closure(root, lookup.get_chunks) == {ids["A"], ids["B"], ids["C"]}
    assert m.ref_closure(root, lookup.get_chunks, max_depth=1) == {ids["A"]}


def test_ref_closure_with_cycle_and_unresolved_ref():
    a, b = schema("t", "A"), schema("t", "B")
    root = op("t", "post", "/x")
    # A <-> B cycle, B points back at the operation, A has a ref the corpus lacks
    lookup = DictLookup([make_chunk(root, [a]), make_chunk(a, [b, schema("t", "Gone")]), make_chunk(b, [a, root])])
    assert m.ref_closure(root, lookup.get_chunks) == {a, b}


def test_closure_share():
    closure = {USER_CREATE, ADDRESS, COUNTRY}
    assert m.closure_share(closure, [POST_USERS, USER_CREATE, ADDRESS]) == pytest.approx(2 / 3)
    assert m.closure_share(closure, [POST_USERS, USER_CREATE, ADDRESS, COUNTRY + ":part2"]) == 1.0
    assert m.closure_share(set(), [POST_USERS]) == 1.0
    assert m.closure_share(closure, []) == 0.0


def test_ref_closure_skips_the_parts_of_a_split_chunk():
    a = schema("t", "A")
    root = op("t", "get", "/big")
    part2 = root + ":part2"
    lookup = DictLookup([make_chunk(root, [a, part2]), make_chunk(part2), make_chunk(a, [a + ":part2"]),
                         make_chunk(a + ":part2")])
    assert m.ref_closure(root, lookup.get_chunks) == {a}


def test_hidden_step_recovery_at_k():
    from specrag.evals.metrics import hidden_step_recovery_at_k

    assert hidden_step_recovery_at_k(["s", "x", "c"], ["s", "c"], 10) == 1.0
    assert hidden_step_recovery_at_k(["c", "x", "s"], ["s", "c"], 2) == 0.0  # the hidden call is 3rd
    assert hidden_step_recovery_at_k(["a", "c"], ["a", "b", "c"], 10) == 0.0  # b missing
    assert hidden_step_recovery_at_k(["c"], ["c"], 10) is None  # nothing hidden
    assert hidden_step_recovery_at_k(["s"], ["s", "s"], 10) is None  # the same call twice hides nothing


def test_ordered_pair_accuracy():
    from specrag.evals.metrics import gold_pairs, ordered_pair_accuracy

    assert gold_pairs(["a", "b", "c"]) == [("a", "b"), ("a", "c"), ("b", "c")]
    assert gold_pairs(["s", "s"]) == [] and gold_pairs(["a", "b", "a", "b"]) == [("a", "b"), ("b", "a")]
    assert ordered_pair_accuracy(["a", "b", "c"], ["a", "b", "c"]) == 1.0
    assert ordered_pair_accuracy(["b", "a", "c"], ["a", "b", "c"]) == 2 / 3  # (a, b) reversed
    assert ordered_pair_accuracy(["a", "c"], ["a", "b", "c"]) == 1 / 3  # pairs with b missing count wrong
    assert ordered_pair_accuracy([], ["a", "b"]) == 0.0
    assert ordered_pair_accuracy(["a"], ["a"]) is None


def test_pair_order_accuracy_reads_only_the_pairs_the_plan_holds():
    from specrag.evals.metrics import pair_order_accuracy

    assert pair_order_accuracy(["a", "c"], ["a", "b", "c"]) == 1.0  # (a, c) in order; pairs with b not held
    assert pair_order_accuracy(["c", "b", "a"], ["a", "b", "c"]) == 0.0
    assert pair_order_accuracy(["x"], ["a", "b"]) is None


def test_edge_hits():
    from specrag.evals.metrics import edge_hits

    steps = [("search", {}), ("credits", {"movie_id": {"search", "top"}}),
             ("person", {"person_id": {"search_person"}, "lang_id": set()})]
    assert edge_hits(steps) == (1, 3)
    assert edge_hits([("a", {"x_id": {"b"}})]) == (0, 0)  # the first call's parameters come from the question


# ---- context metrics: what the user receives ---------------------------------------------------------


def test_delivered_endpoints_are_the_operations_own_chunks():
    post, listing = endpoint_key("users_api", "POST", "/users"), endpoint_key("users_api", "GET", "/users")
    # a part, an errors chunk and a component deliver no operation; the operation chunk itself does
    assert m.delivered_endpoints([POST_USERS + ":part2", errors_chunk_id(GET_USER), USER, LIST_USERS]) == {listing}
    assert m.delivered_endpoints([POST_USERS, LIST_USERS, POST_USERS]) == {post, listing}
    assert m.delivered_endpoints([]) == set()


def test_context_recall_and_all_found():
    gold = {"a", "b"}
    assert m.context_recall(gold, {"a", "x"}) == 0.5 and m.context_all_found(gold, {"a", "x"}) == 0.0
    assert m.context_recall(gold, {"a", "b", "x"}) == 1.0 and m.context_all_found(gold, {"b", "a"}) == 1.0
    assert m.context_recall(gold, set()) == 0.0
    assert m.context_recall(set(), {"a"}) == 0.0 and m.context_all_found(set(), {"a"}) == 0.0


def test_api_precision_weighs_each_chunk_by_its_tokens():
    chunks = [(POST_USERS, 300), (USER, 100), (op("petstore", "get", "/pets"), 100)]
    assert m.api_precision(chunks, ["users_api"]) == 0.8
    assert m.api_precision(chunks, ["petstore"]) == 0.2
    assert m.api_precision(chunks, ["users_api", "petstore"]) == 1.0  # the shares add up to the whole context
    assert m.api_precision(chunks, ["other"]) == 0.0
    assert m.api_precision([], ["users_api"]) == 0.0 and m.api_precision([(USER, 0)], ["users_api"]) == 0.0


def test_operation_footprint_is_the_operation_its_closure_and_its_errors_chunk():
    lookup = users_lookup()
    assert m.operation_footprint(POST_USERS, lookup.get_chunks) == {
        POST_USERS, errors_chunk_id(POST_USERS), USER_CREATE, USER, ADDRESS, COUNTRY}
    assert m.operation_footprint(GET_USER, lookup.get_chunks, max_depth=1) == {
        GET_USER, errors_chunk_id(GET_USER), USER}
    # as the chunker writes it, an operation refs its errors chunk: the error schema is then in the closure too
    linked = DictLookup([make_chunk(POST_USERS, [errors_chunk_id(POST_USERS)]),
                         make_chunk(errors_chunk_id(POST_USERS), [ERROR]), make_chunk(ERROR)])
    assert m.operation_footprint(POST_USERS, linked.get_chunks) == {POST_USERS, errors_chunk_id(POST_USERS), ERROR}


def test_operation_precision_counts_the_parts_of_footprint_chunks():
    footprint = {POST_USERS, errors_chunk_id(POST_USERS), USER_CREATE, USER, ADDRESS, COUNTRY}
    chunks = [(POST_USERS, 200), (USER_CREATE + ":part2", 50), (LIST_USERS, 150), (COUNTRY, 100)]
    assert m.operation_precision(chunks, footprint) == 350 / 500
    assert m.operation_precision(chunks, set()) == 0.0 and m.operation_precision([], footprint) == 0.0


def test_primary_operations():
    primaries = [USER, errors_chunk_id(GET_USER), POST_USERS + ":part2", POST_USERS, LIST_USERS]
    assert m.primary_operations(primaries) == [POST_USERS, LIST_USERS]  # errors chunks and components deliver none
    assert m.is_operation_chunk(POST_USERS) and not m.is_operation_chunk(errors_chunk_id(POST_USERS))


def test_closure_completeness_is_the_mean_share_over_the_operations():
    lookup = users_lookup()
    context = [LIST_USERS, POST_USERS, USER, ADDRESS]
    # GET /users needs User, Address, Country (2 of 3 here); POST /users UserCreate, User, Address, Country (2 of 4)
    mean, complete = m.closure_completeness([LIST_USERS, POST_USERS], context, lookup.get_chunks)
    assert (mean, complete) == (pytest.approx((2 / 3 + 2 / 4) / 2), 0.0)
    assert m.closure_completeness([LIST_USERS, POST_USERS], context + [USER_CREATE, COUNTRY],
                                  lookup.get_chunks) == (1.0, 1.0)
    assert m.closure_completeness([LIST_USERS, LIST_USERS], context, lookup.get_chunks)[0] == pytest.approx(2 / 3)
    assert m.closure_completeness([], context, lookup.get_chunks) == (None, None)


# ---- paired significance --------------------------------------------------------------------------------


def _exact_p(diffs):
    """Every one of the 2^n sign patterns, for the tests: the value the randomization test estimates."""
    import itertools

    observed = abs(sum(diffs)) - 1e-12
    flips = list(itertools.product((1, -1), repeat=len(diffs)))
    return sum(abs(sum(s * d for s, d in zip(signs, diffs))) >= observed for signs in flips) / len(flips)


def test_paired_randomization_p_identical_runs_and_a_single_question_give_1():
    values = [0.0, 0.5, 1.0, 1.0]
    assert m.paired_randomization_p(values, values) == 1.0
    assert m.paired_randomization_p([0.2], [0.9]) == 1.0  # one question: every sign flip is as extreme
    assert m.paired_randomization_p([], []) is None


def test_paired_randomization_p_by_hand():
    # two questions each +1: of the 4 sign patterns, (+,+) and (-,-) reach |mean| 1: p = 1/2
    assert m.paired_randomization_p([0, 0], [1, 1]) == pytest.approx(0.5, abs=0.015)
    # three questions each +1: 2 of 8 patterns; (1, 2, 3): |sum| 6 in 2 of 8 patterns too
    assert m.paired_randomization_p([0, 0, 0], [1, 1, 1]) == pytest.approx(0.25, abs=0.015)
    assert m.paired_randomization_p([0, 0, 0], [1, 2, 3]) == pytest.approx(0.25, abs=0.015)
    # changes (+0.5, 0, -1): every pattern's |sum| is 0.5 or 1.5 >= 0.5, so p = 1 exactly
    assert m.paired_randomization_p([0.5, 0, 1], [1, 0, 0]) == 1.0
    rng = np.random.default_rng(7)
    for _ in range(3):
        a, b = rng.random(8), rng.random(8)
        assert m.paired_randomization_p(a, b) == pytest.approx(_exact_p(list(b - a)), abs=0.015)


def test_paired_randomization_p_a_large_consistent_gain_is_significant():
    rng = np.random.default_rng(1)
    a = rng.random(30) * 0.5
    b = a + 0.3 + rng.random(30) * 0.1  # every one of 30 questions gains 0.3 to 0.4
    p = m.paired_randomization_p(a, b)
    assert p == 1 / 10_001 and p < 0.01  # no sign flip in 10,000 reaches it: the smallest p the test gives
    assert m.paired_randomization_p(b, a) == p  # two-sided: the direction does not matter
    assert m.paired_randomization_p(a, b, rounds=1000) == 1 / 1001
    assert m.paired_randomization_p(a, b, seed=3) == p  # the seed fixes the rounds; here none reaches it either


def test_paired_randomization_p_is_reproducible_and_checks_its_input():
    a, b = [0, 1, 0, 1, 1, 0], [1, 1, 0, 1, 1, 1]
    assert m.paired_randomization_p(a, b) == m.paired_randomization_p(a, b)
    assert 0 < m.paired_randomization_p(a, b) <= 1
    with pytest.raises(ValueError, match="differ in length"):
        m.paired_randomization_p([1, 2], [1])


def test_paired_values_drop_pairs_with_a_missing_side():
    assert m.paired_values([(1.0, 0.5), (None, 1.0), (0.0, None), (0.25, 0.0)]) == ([1.0, 0.25], [0.5, 0.0])
