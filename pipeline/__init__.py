"""specrag: the library. Importing it never configures logging (see ``pipeline._quiet``)."""

from pipeline import _quiet  # noqa: F401  (before anything imports bm25s)
