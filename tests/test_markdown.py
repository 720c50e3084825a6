"""The one Markdown table writer: the compact form reports use and the aligned form the docs paste."""

from __future__ import annotations

import pytest

from slamorl_jax.markdown import markdown_table


def test_tables_in_both_forms() -> None:
    assert (
        markdown_table(["a", "b"], [[1, "x"], [2.5, None]])
        == "| a | b |\n|---|---|\n| 1 | x |\n| 2.5 | None |"
    )
    aligned = markdown_table(["name", "value"], [["n", 3]], align=("---", "---:"))
    assert aligned.splitlines() == ["| name | value |", "| --- | ---: |", "| n | 3 |"]
    assert markdown_table(["only"], []) == "| only |\n|---|"


def test_an_alignment_of_another_width_is_refused() -> None:
    with pytest.raises(ValueError, match="align names 1 columns for 2 headers"):
        markdown_table(["a", "b"], [], align=("---",))
