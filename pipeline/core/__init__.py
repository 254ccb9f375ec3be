"""Layer 0, records and kernels: errors, settings, ids, the stage records, tokens, text analysis,
fusion, BM25, the LLM client, prompts, caches. Imports nothing else of specrag."""
