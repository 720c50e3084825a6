"""GitHub Markdown tables: the one writer of every table the package's commands, reports and
benchmarks print."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def markdown_table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], align: Sequence[str] | None = None
) -> str:
    """A Markdown table of ``rows`` (cells written with ``str``) under ``headers``. ``align``: each
    column's separator cell (``"---"``, or ``"---:"`` for a right-aligned column), written spaced as
    the docs' hand-aligned tables are (``| --- | ---: |``); without it, every column's is ``---``,
    written ``|---|---|``."""
    if align is not None and len(align) != len(headers):
        raise ValueError(f"align names {len(align)} columns for {len(headers)} headers")
    separator = (
        "| " + " | ".join(align) + " |" if align is not None else "|" + "|".join("---" for _ in headers) + "|"
    )
    lines = ["| " + " | ".join(headers) + " |", separator]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)
