"""Token counts are cl100k from the bundled file, whatever LlamaIndex's global tokenizer is."""

from __future__ import annotations

import random
from pathlib import Path

import llama_index.core
from llama_index.core.utils import get_tokenizer, set_global_tokenizer
from specrag.core.tokens import SegmentTokenCounter, count_tokens


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


TRICKY = ["a", "Z", "é", "字", "7", "42", " ", "  ", "\t", "\n", "\r", "\r\n", "\n\n", "\x0b", "\x0c", "\u2028",
          "\u00a0", "\u3000", "\x1c", ":", "-", "'s", "'ll", "|", "#", "{", "}", "<|endoftext|>", "😀", "type: string",
          "  - name: id", "    description: The id."]


def _rendered_spec_texts() -> list[str]:
    from specrag.specs.ingest import ingest_spec

    texts = []
    for spec in sorted((Path(__file__).resolve().parents[2] / "examples" / "specs").iterdir()):
        result = ingest_spec(spec, spec.stem, 1500)
        texts += [t for c in result.chunks for t in (c.text, c.compact_text, c.embed_text) if t]
    return texts


def test_segment_counter_counts_exactly_as_a_whole_text_encoding():
    """Cutting a text where cl100k's pre-tokenizer always cuts changes no count: random texts of
    the characters its pattern treats specially, and real rendered chunks with lines repeated,
    re-indented, blanked and joined."""
    rng = random.Random(7)
    counter = SegmentTokenCounter()
    texts = ["".join(rng.choice(TRICKY) for _ in range(rng.randint(1, 60))) for _ in range(4000)]
    for text in _rendered_spec_texts():
        lines = text.split("\n")
        for _ in range(20):
            mutated = list(lines)
            i = rng.randrange(len(mutated))
            mutated.insert(i, rng.choice([mutated[i], "", "   ", " " * rng.randint(1, 6) + mutated[i], "\r", "\t-"]))
            texts.append(rng.choice(["\n", "\r\n", "\n\n"]).join(mutated))
    assert len(texts) > 4000
    for text in texts + texts:  # the second pass is answered from the kept segments
        assert counter(text) == count_tokens(text), repr(text)


def test_segment_counter_keeps_short_segments_only_and_starts_again_when_full():
    counter = SegmentTokenCounter(max_segments=3, max_chars=20)
    long_line = "word " * 10
    assert counter(f"a: 1\nb: 2\n{long_line}") == count_tokens(f"a: 1\nb: 2\n{long_line}")
    assert set(counter._counts) == {"a: 1\n", "b: 2\n"}
    counter("c: 3\nd: 4\ne: 5")
    counter("f: 6")
    assert len(counter._counts) <= 4
