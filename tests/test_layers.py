"""The package's layers (DESIGN.md, section 2): the environment, the agent and the history store are
built on by the evaluation, and none of them imports it (the history store took the oracle from
``evaluation/baselines.py`` until the oracle moved to ``env/best_static.py``)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "slamorl_jax"
BELOW_EVALUATION = ("env", "agent", "history", "calibration", "gym")


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, by its absolute name (function-level imports included)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_no_layer_below_the_evaluation_imports_it() -> None:
    offenders = {
        str(path.relative_to(PACKAGE)): sorted(
            name for name in imported_modules(path) if name.startswith("slamorl_jax.evaluation")
        )
        for layer in BELOW_EVALUATION
        for path in sorted((PACKAGE / layer).rglob("*.py"))
    }
    assert not {path: names for path, names in offenders.items() if names}
