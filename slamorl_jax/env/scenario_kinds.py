"""The three scenario kinds and their preset preferences (``scenarios.py`` documents them)."""

from __future__ import annotations

import numpy as np

from slamorl_jax.env.objectives import preference_vector

SCENARIO_KINDS = ("deadline-critical", "budget-constrained", "balanced")
KIND_PREFERENCES = ("time", "cost", "balanced")


def kind_preferences() -> np.ndarray:
    """(3, 3) preset preference of each scenario kind."""
    return np.stack([preference_vector(p) for p in KIND_PREFERENCES])
