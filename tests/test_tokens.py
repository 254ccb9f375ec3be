"""Token counts are cl100k from the bundled file, whatever LlamaIndex's global tokenizer is."""

from __future__ import annotations

import llama_index.core
from llama_index.core.utils import get_tokenizer, set_global_tokenizer

from pipeline.tokens import count_tokens


def test_counts_match_cl100k_and_ignore_a_users_global_tokenizer():
    text = "GET /movie/{movie_id}/credits\nsummary: Get the cast and crew for a movie\n"
    expected = len(get_tokenizer()(text))  # llama-index's default is cl100k too
    previous = llama_index.core.global_tokenizer
    try:
        set_global_tokenizer(lambda s: s.split())  # a user's own tokenizer: far fewer "tokens"
        assert count_tokens(text) == expected > len(text.split())
    finally:
        set_global_tokenizer(previous)


def test_special_token_text_is_counted_as_text():
    assert count_tokens("<|endoftext|>") > 1
    assert count_tokens("") == 0
