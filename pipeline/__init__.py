"""specrag: the library. Importing it never configures logging (see ``specrag._quiet``)."""

from specrag import _quiet  # noqa: F401  (before anything imports bm25s)
