"""Multi-objective figures: the front a preference-conditioned policy traces, its hypervolume and its
expected utility.

One trained policy serves every preference (the weights are inputs), so sweeping the preference
traces a front in (time, cost), both relative to each job's request (lower is better).
The preference grid puts ``1 - SLA_WEIGHT`` on time and cost, split ``a : 1 - a`` for ``a`` evenly
spread over [0, 1], and ``SLA_WEIGHT`` on the SLA objective (the presets' 0.2, ``objectives.py``).

* Hypervolume: the area dominated by a set of (time, cost) points and bounded by
  ``REFERENCE_POINT`` = twice the request's time and cost; points beyond it add nothing.
* Expected utility: the mean over the grid of ``-(a t_a + (1 - a) c_a)`` where ``(t_a, c_a)`` is
  what the method achieves under preference ``a`` (a static method gives the same point for all).
"""

from __future__ import annotations

import numpy as np

from slamorl_jax.env.objectives import SLA_WEIGHT

REFERENCE_POINT = (2.0, 2.0)


def preference_grid(points: int) -> tuple[np.ndarray, np.ndarray]:
    """The time shares ``a`` (``[points]``) and their preference vectors ``[points, 3]``."""
    if points < 2:
        raise ValueError(f"a preference front needs at least 2 points, got {points}")
    share = np.linspace(0.0, 1.0, points)
    vectors = np.stack(
        [(1 - SLA_WEIGHT) * share, (1 - SLA_WEIGHT) * (1 - share), np.full(points, SLA_WEIGHT)], axis=1
    )
    return share, vectors.astype(np.float32)


def nondominated(points: np.ndarray) -> np.ndarray:
    """Mask of the points ``[K, 2]`` that no other point dominates (minimisation; duplicates kept)."""
    points = np.asarray(points, dtype=np.float64)
    no_worse = np.all(points[:, None, :] <= points[None, :, :], axis=-1)  # [i, j]: i no worse than j
    better = np.any(points[:, None, :] < points[None, :, :], axis=-1)
    dominated = np.any(no_worse & better, axis=0)
    return ~dominated


def hypervolume(points: np.ndarray, reference: tuple[float, float] = REFERENCE_POINT) -> float:
    """Area dominated by ``points`` ``[K, 2]`` inside the box below ``reference`` (minimisation)."""
    points = np.asarray(points, dtype=np.float64)
    if points.shape == (2,):  # one point
        points = points[None]
    if points.ndim != 2 or points.shape[1] != 2:  # [K, 3] or [2, K] were reshaped into other points
        raise ValueError(f"points must have shape [K, 2] (time, cost), got {points.shape}")
    inside = points[np.all(points < np.asarray(reference), axis=1)]
    if inside.size == 0:
        return 0.0
    front = inside[nondominated(inside)]
    front = front[np.lexsort((front[:, 1], front[:, 0]))]  # by time, then cost
    area, best_cost = 0.0, reference[1]
    for time, cost in front:
        if cost < best_cost:
            area += (reference[0] - time) * (best_cost - cost)
            best_cost = cost
    return float(area)


def expected_utility(share: np.ndarray, time: np.ndarray, cost: np.ndarray) -> float:
    """Mean over the grid of ``-(a t + (1 - a) c)``; ``time``/``cost`` per grid point or scalars."""
    share = np.asarray(share, dtype=np.float64)
    time = np.broadcast_to(np.asarray(time, dtype=np.float64), share.shape)
    cost = np.broadcast_to(np.asarray(cost, dtype=np.float64), share.shape)
    return float(np.mean(-(share * time + (1.0 - share) * cost)))
