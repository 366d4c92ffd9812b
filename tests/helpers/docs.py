"""The documentation the tests read: the README and every page of the site.

The README is the front door and the site (``docs/**/*.md``) holds the rest, so a test that
checks what "the docs" say reads them all: :func:`doc_pages` lists them (README.md first,
then the site's pages in sorted order) and :func:`all_docs_text` joins their text.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"


def doc_pages() -> list[Path]:
    """README.md, then every Markdown page under docs/, sorted."""
    return [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]


def all_docs_text() -> str:
    """The text of every page of :func:`doc_pages`, in that order, one after the other."""
    return "\n\n".join(page.read_text(encoding="utf-8") for page in doc_pages())
