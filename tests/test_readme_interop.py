"""The README's "Use it from other libraries" snippets run as written, in order, and do what they say."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
SECTION = "## Use it from other libraries"


def snippets() -> list[str]:
    """The section's ```python blocks."""
    text = README.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    return re.findall(r"```python\n(.*?)```", text[start:end], flags=re.S)


pytestmark = pytest.mark.slow  # compiles the env for gymnax's wrappers and both Gymnasium envs


@pytest.fixture(scope="module")
def namespaces() -> list[dict]:
    """Each snippet executed in a fresh namespace (as a reader would paste it)."""
    blocks = snippets()
    assert len(blocks) == 2
    out = []
    for block in blocks:
        namespace: dict = {"__name__": "readme"}
        exec(compile(block, str(README), "exec"), namespace)
        out.append(namespace)
    return out


def test_gymnax_snippet_logs_scalar_episode_returns(namespaces: list[dict]) -> None:
    """LogWrapper over FlattenObservationWrapper under lax.scan: episodes end, returns are finite."""
    ns = namespaces[0]
    ended, returns = np.asarray(ns["ended"]), np.asarray(ns["returns"])
    assert ended.shape == returns.shape == (ns["num_steps"], ns["num_envs"])
    assert ended.any() and np.all(np.isfinite(returns))


def test_gymnasium_snippet_reports_vector_returns(namespaces: list[dict]) -> None:
    """The MO-Gymnasium wrappers saw vector rewards and a finished job's (time, cost, sla) returns."""
    ns = namespaces[1]
    assert ns["rewards"].shape == (4, 3)
    assert ns["info"]["episode"]["r"].shape == (3,)
    assert np.isscalar(ns["reward"]) and ns["info"]["vector_reward"].shape == (3,)
    np.testing.assert_allclose(ns["reward"], ns["env"].w @ ns["info"]["vector_reward"], rtol=1e-5)
