"""The output contract: ``KnowledgeContext`` and its stats (``knowledge``), and the conversions
between chunks, LlamaIndex nodes and context chunks (``nodes``). Above specs, below the index."""
