"""Named, reproducible scenarios: how jobs, preferences and SLA targets are drawn at reset.

Every job draws (``job_generator.sample_job``): a workload (``workload_probs``), a GPU type
(``gpu_type_probs``), its epochs (uniform in the workload's calibrated range), a scenario kind
(``scenario_probs``), the user's requested allocation (GPU count from the workload's request
distribution, CPUs per GPU from the Alibaba request distribution, both clipped to the cluster), and
six SLA targets as factors of the requested allocation's own time, cost, throughput and memory,
uniform in ``[sla_factor_low, sla_factor_high]`` of its kind (defaults in ``defaults.py``). T_plan
and C_plan are the profile's forecast of the request's time and cost (``expected_time`` and
``expected_cost`` in ``job_generator.sample_job_row``), not the job's hidden true ones, which the
reward's T_ref and C_ref are (``job_env``):

=====================  ===============  ===============  ==============  =============  ========
kind                   deadline/T_plan  budget/C_plan    min thr x ref   max mem x ref  pref.
=====================  ===============  ===============  ==============  =============  ========
deadline-critical      0.30 - 0.70      1.5 - 3.0        0.5 - 1.0       4 - 8          time
budget-constrained     1.5 - 3.0        0.30 - 0.70      0.2 - 0.5       1.5 - 3        cost
balanced               0.60 - 1.00      0.60 - 1.00      0.4 - 0.8       2 - 4          balanced
=====================  ===============  ===============  ==============  =============  ========

GPU utilisation minimum 0.2-0.4 / 0.4-0.7 / 0.3-0.5 and CPU utilisation minimum 0.05-0.2 (absolute).
Tight targets stay within the plan's reach: the deadline is at least ``feasibility_margin`` x the
profile's fastest static allocation's time, the budget at least that margin x the profile's cheapest
one's cost, and the throughput minimum at most the profile's fastest throughput / margin (from the
profile, as a user plans them, not the job's hidden truth, which a binding floor would reveal: a job
slower than its profile may miss a floored SLA whatever it does). Whether one static allocation meets
all six SLAs at once is not guaranteed; ``slamorl_jax.env.feasibility`` measures how often it does.

Named scenarios (``scenario_params(name)``):

* ``deadline-critical``, ``budget-constrained``, ``balanced``: only that kind, its preset preference.
* ``mixed`` (training default): the three kinds with equal probability; the preference is drawn
  uniformly from the simplex with probability 0.4, is the kind's *opposed* preference (as in
  ``conflict``) with probability 0.2, else the kind's preset; 30 % of jobs meet one mid-run event
  (``shifts.py``, the six kinds equally likely).
* ``conflict``: the user's preference opposes the tight SLA, both directions with equal
  probability: the ``deadline-critical`` kind's SLAs (tight deadline, loose budget) with the ``cost``
  preference, and the ``budget-constrained`` kind's (tight budget, loose deadline) with the ``time``
  preference (``EnvParams.opposed_preference``, ``scenario_kinds.OPPOSED_PREFERENCES``). The SLA
  ranges and the feasibility floors are those kinds' own, so its jobs are exactly as feasible
  (``python -m slamorl_jax.env.feasibility``), and a job's ``scenario`` field names the kind whose
  SLAs it drew. Tilting towards the preferred objective here costs SLAs; adaptive weights are
  meant to notice.
* ``shifting``: the three kinds with equal probability and their preset preferences, and every job
  meets one mid-run event (``shifts.py``: a long contention spell, a slower node, a price rise, a
  deadline moved earlier, a budget cut or a preemption, equally likely) at an epoch between 20 %
  and 70 % of its run; a spell or a slower node holds until a GPU change moves the job to fresh
  nodes. Evaluation anchors it with the re-planning oracle, which knows the event in advance
  (``evaluation/replanning.py``).
"""

from __future__ import annotations

import numpy as np

from slamorl_jax.env.catalog import Catalog
from slamorl_jax.env.defaults import default_params
from slamorl_jax.env.objectives import preference_vector
from slamorl_jax.env.params import EnvParams, with_values
from slamorl_jax.env.scenario_kinds import (
    KIND_PREFERENCES,
    MIXED_OPPOSED_PREFERENCE_PROB,
    MIXED_RANDOM_PREFERENCE_PROB,
    SCENARIO_KINDS,
    kind_preferences,
)
from slamorl_jax.env.shifts import DEFAULT_MIXED_SHIFT_PROB, event_probs, no_shift_probs

__all__ = [
    "CONFLICT_KINDS",
    "EVALUATION_SCENARIOS",
    "KIND_PREFERENCES",
    "SCENARIOS",
    "SCENARIO_KINDS",
    "check_scenario",
    "kind_preferences",
    "scenario_params",
    "with_preference",
    "with_scenario",
]

SCENARIOS = (*SCENARIO_KINDS, "mixed", "conflict", "shifting")
# What ``evaluate`` runs by default: every named scenario but the training mixture.
EVALUATION_SCENARIOS = tuple(name for name in SCENARIOS if name != "mixed")
# Whose jobs trace the preference front in ``evaluate`` by default (``SuiteConfig.front_scenario``).
DEFAULT_FRONT_SCENARIO = "balanced"
# The two kinds ``conflict`` draws (each with the preference that opposes its tight SLA).
CONFLICT_KINDS = ("deadline-critical", "budget-constrained")


def check_scenario(name: str) -> str:
    """Return ``name`` if it is a scenario, else raise a ``ValueError`` listing the valid ones."""
    if name not in SCENARIOS:
        raise ValueError(f"unknown scenario {name!r}; choose one of: {', '.join(SCENARIOS)}")
    return name


def check_params_type(params: object, function: str) -> None:
    """``TypeError`` naming ``function`` unless ``params`` is ``EnvParams`` (dataclasses' own error
    names neither)."""
    if not isinstance(params, EnvParams):
        raise TypeError(f"{function} takes EnvParams first, got {type(params).__name__}")


def with_scenario(params: EnvParams, name: str) -> EnvParams:
    """``params`` with the job generator set to the named scenario: it sets ``scenario_probs``,
    ``random_preference_prob``, ``opposed_preference_prob``, ``kind_preference`` and ``shift_probs``
    (edits of those five made before are replaced; make them after) and keeps every other field,
    ``use_fixed_preference`` included: a preference fixed by :func:`with_preference` stays in force
    over the scenario's own (``conflict``'s opposed one too)."""
    check_params_type(params, "with_scenario")
    check_scenario(name)
    probs = np.zeros(len(SCENARIO_KINDS), dtype=np.float32)
    random_preference, opposed, shifts = 0.0, 0.0, no_shift_probs()
    if name in ("mixed", "shifting"):
        probs[:] = 1.0 / len(SCENARIO_KINDS)
    elif name == "conflict":
        for kind in CONFLICT_KINDS:
            probs[SCENARIO_KINDS.index(kind)] = 1.0 / len(CONFLICT_KINDS)
        opposed = 1.0
    else:
        probs[SCENARIO_KINDS.index(name)] = 1.0
    if name == "mixed":
        random_preference, opposed = MIXED_RANDOM_PREFERENCE_PROB, MIXED_OPPOSED_PREFERENCE_PROB
        shifts = event_probs(DEFAULT_MIXED_SHIFT_PROB)
    elif name == "shifting":
        shifts = event_probs(1.0)
    return with_values(
        params,
        scenario_probs=probs,
        random_preference_prob=random_preference,
        opposed_preference_prob=opposed,
        kind_preference=kind_preferences(),
        shift_probs=shifts,
    )


def with_preference(params: EnvParams, preference: str | list[float] | np.ndarray | None) -> EnvParams:
    """``params`` where every job uses ``preference`` (a preset name or weights); ``None`` = scenario's."""
    check_params_type(params, "with_preference")
    if preference is None:
        return with_values(params, use_fixed_preference=False)
    return with_values(params, use_fixed_preference=True, fixed_preference=preference_vector(preference))


def scenario_params(name: str = "mixed", catalog: Catalog | None = None) -> EnvParams:
    """Default parameters with the named scenario."""
    return with_scenario(default_params(catalog), name)
