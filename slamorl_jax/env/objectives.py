"""The three objectives, the six SLAs, and the preference presets.

Objectives (reward vector order): ``time``, ``cost``, ``sla``.

SLAs (order of the met-flags and severities everywhere):

==============  ==========================================  =================================
SLA             met when (per epoch, for the agent)          job-level check (episode figures)
==============  ==========================================  =================================
``time``        projected completion time <= deadline        total time <= deadline
``cost``        projected total cost <= budget               total cost <= budget
``throughput``  epoch throughput >= minimum                  samples / total time >= minimum
``memory``      host memory used <= maximum                  peak memory used <= maximum
``gpu_util``    GPU utilisation >= minimum                   time-weighted mean >= minimum
``cpu_util``    CPU utilisation >= minimum                   time-weighted mean >= minimum
==============  ==========================================  =================================

Preference presets are points of the simplex over the objectives. They follow the reference code's
emphasis of 0.6 on the preferred objective (its ``MultiObjectiveConfig``), with the SLA objective
kept at 0.2 in every preset.
"""

from __future__ import annotations

import numpy as np

OBJECTIVES = ("time", "cost", "sla")
NUM_OBJECTIVES = len(OBJECTIVES)
SLA_NAMES = ("time", "cost", "throughput", "memory", "gpu_util", "cpu_util")
NUM_SLAS = len(SLA_NAMES)

SLA_WEIGHT = 0.2  # every preset's weight on the SLA objective (and the evaluation's preference front's)
PREFERENCES: dict[str, np.ndarray] = {
    "time": np.array([0.6, 0.2, SLA_WEIGHT], dtype=np.float32),
    "cost": np.array([0.2, 0.6, SLA_WEIGHT], dtype=np.float32),
    "balanced": np.array([0.4, 0.4, SLA_WEIGHT], dtype=np.float32),
}


def preference_vector(preference: str | tuple[float, ...] | list[float] | np.ndarray) -> np.ndarray:
    """A preset name or any non-negative 3-vector, normalised onto the simplex (``ValueError`` if not)."""
    if isinstance(preference, str):
        if preference not in PREFERENCES:
            raise ValueError(
                f"unknown preference {preference!r}; choose one of: {', '.join(PREFERENCES)} "
                "or give 3 non-negative weights (time, cost, sla)"
            )
        return PREFERENCES[preference].copy()
    given = np.asarray(preference)
    if given.dtype.kind not in "iuf":  # strings, None, bools, mappings: not weights
        raise ValueError(
            f"preference must be a preset name or {NUM_OBJECTIVES} finite weights (time, cost, sla), "
            f"got {preference!r:.60}"
        )
    vector = given.astype(np.float64).reshape(-1)
    if vector.shape != (NUM_OBJECTIVES,) or not np.all(np.isfinite(vector)):
        raise ValueError(f"preference must have {NUM_OBJECTIVES} finite weights (time, cost, sla)")
    if np.any(vector < 0) or vector.max() <= 0:
        raise ValueError("preference weights must be non-negative with a positive sum")
    if vector.max() > 1e300:  # weights near the float64 limit, whose sum would overflow to inf
        vector = vector / vector.max()
    return (vector / vector.sum()).astype(np.float32)
