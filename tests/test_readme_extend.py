"""The README's "Extend the simulator (Python)" example runs as written and does what it says."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
SECTION = "## Extend the simulator (Python)"


def example() -> str:
    """The section's one ```python block."""
    text = README.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    (block,) = re.findall(r"```python\n(.*?)```", text[start:end], flags=re.S)
    return block


def test_every_name_the_example_imports_exists() -> None:
    """A moved or renamed function breaks the example without running it (the whole run is slow)."""
    for node in ast.parse(example()).body:
        if isinstance(node, ast.ImportFrom):
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name), f"{node.module}.{alias.name}"


@pytest.mark.slow  # trains 10 updates and runs 1,024 jobs on a changed cluster (about 30 s)
def test_the_example_trains_and_judges_on_its_own_cluster() -> None:
    namespace: dict = {"print": lambda *args: None}
    exec(compile(example(), str(README), "exec"), namespace)
    params = namespace["params"]
    assert int(params.gpus_per_node) == 8 and int(params.max_nodes) == 2
    assert int(namespace["state"].update) == namespace["config"].num_updates
    assert all(np.isfinite(np.asarray(v)).all() for v in namespace["metrics"].values())
    kept, oracle = namespace["kept"], namespace["oracle"]
    assert np.mean(oracle["all_slas_met"]) > np.mean(kept["all_slas_met"])
