"""Each metric on tiny hand-made rankings, values worked out by hand (and against numpy)."""

import math

import numpy as np
import pytest
from evalfakes import ADDRESS, COUNTRY, POST_USERS, USER, USER_CREATE, DictLookup, make_chunk, op, schema

from specrag.evals import metrics as m
from specrag.evals.querysets import endpoint_key, normalize_path
from specrag.specs.ids import errors_chunk_id

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


@pytest.mark.parametrize("values", [[10.0, 20.0, 30.0, 40.0], [5.0], [3.0, 1.0, 2.0, 100.0, 7.0]])
def test_percentile_matches_numpy(values):
    for q in (50, 95):
        assert m.percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_percentile_by_hand():
    assert m.percentile([10, 20, 30, 40], 50) == 25.0
    assert m.percentile([10, 20, 30, 40], 95) == pytest.approx(38.5)
    assert m.percentile([], 50) == 0.0


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
