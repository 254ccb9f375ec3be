"""The call-dependency graph of each API: which operation produces the ids another one consumes.

``naming`` (resource types from names), ``infer`` (what one operation consumes and produces),
``links`` (OpenAPI ``links``), ``build`` (the per-API graph at ingest), ``models``, and
``queries`` (impact, deps, producers: the library functions behind ``specrag impact``/``deps``).
"""
