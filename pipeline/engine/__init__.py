"""The engine layer: the query engine composed of the stages (``query_engine``), its wiring from
settings (``factory``), ordered plans (``plan``), agentic retrieval (``agentic``), graph queries
(``graph_queries``) and markdown rendering (``markdown``)."""
