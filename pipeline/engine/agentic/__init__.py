"""Agentic retrieval: decompose a question, retrieve per part, bind every id parameter to a
producer, all within step, token and latency budgets (``AgenticRetriever``)."""
