"""The default prompts, one ``{name}.txt`` per LLM stage, installed as ``specrag.default_prompts``
and read through ``importlib.resources`` (``--prompts DIR`` swaps the whole set)."""
