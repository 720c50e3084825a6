"""The three scenario kinds, their preset preferences and the preferences that oppose their tight
SLA (``scenarios.py`` documents them)."""

from __future__ import annotations

import numpy as np

from slamorl_jax.env.objectives import preference_vector

SCENARIO_KINDS = ("deadline-critical", "budget-constrained", "balanced")
KIND_PREFERENCES = ("time", "cost", "balanced")
# The preference that pulls against each kind's tight SLA (``conflict``): a cost preference under a
# tight deadline, a time preference under a tight budget; ``balanced`` has no single tight SLA.
OPPOSED_PREFERENCES = ("cost", "time", "balanced")
# ``mixed``: the chance of a uniform random preference and of the opposed one (else the preset).
MIXED_RANDOM_PREFERENCE_PROB = 0.4
MIXED_OPPOSED_PREFERENCE_PROB = 0.2


def kind_preferences() -> np.ndarray:
    """(3, 3) preset preference of each scenario kind."""
    return np.stack([preference_vector(p) for p in KIND_PREFERENCES])


def opposed_preferences() -> np.ndarray:
    """(3, 3) preference of each scenario kind that opposes its tight SLA."""
    return np.stack([preference_vector(p) for p in OPPOSED_PREFERENCES])
