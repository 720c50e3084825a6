"""SLA targets for a new job whose user gave none: ``recommend --suggest_slas``.

A real job submitted without a deadline, a budget or a minimum throughput gets them from
``env/suggested_slas.py``: the forecast the policy's observation uses (the workload's profile
corrected by the job's reported ``probes``, the paper's "baseline runs", if any), at the allocation
it ranks first for the job's preference with the SLAs the user left out counting as no limit and
the ones given binding, with the SLA-MORL reference code's margins (time and cost x 1.1, throughput
x 0.9), or, with a ``confidence``, margins from the online model's own uncertainty that the job
should meet with that probability (``env/suggested_slas.py``), each to 4 significant digits
rounded away from the job's side.

``python -m slamorl_jax.recommend --suggest_slas --job=new_job.json`` answers with them for a job
that has run no epoch, where ``deadline_s`` and ``budget_usd`` may be left out; the job then starts at
the answer's allocation with the answer's SLAs, and asks ``recommend`` after each epoch as usual.
``benchmarks/suggested_slas.py`` measures how often simulated jobs meet such SLAs.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Any

import jax

from slamorl_jax.env.catalog import Catalog
from slamorl_jax.env.params import EnvParams
from slamorl_jax.env.suggested_slas import (
    COST_MARGIN,
    SUGGESTIBLE,
    THROUGHPUT_MARGIN,
    TIME_MARGIN,
    check_suggestible,
    suggested_targets,
)
from slamorl_jax.json_input import MAX_VALUE
from slamorl_jax.live import check_recommendable, live_state
from slamorl_jax.live_job import LiveJob, has_launched

SIGNIFICANT_DIGITS = 4  # of a suggested target
_suggested = jax.jit(suggested_targets, static_argnums=(2, 3))


def round_outward(value: float, up: bool, digits: int = SIGNIFICANT_DIGITS) -> float:
    """``value`` (> 0) to ``digits`` significant digits, rounded up (a deadline, a budget) or down (a
    minimum): the margin is never eaten by the rounding. In decimal arithmetic on the float's exact
    value (a binary scale such as ``1e-5`` is inexact: 4.601e8 rounded "up" came out below it)."""
    exact = Decimal(value)
    quantum = Decimal(1).scaleb(exact.adjusted() - digits + 1)
    return float(exact.quantize(quantum, rounding=ROUND_CEILING if up else ROUND_FLOOR))


def suggested_slas(
    job: LiveJob,
    params: EnvParams,
    suggest: Iterable[str] = SUGGESTIBLE,
    confidence: float | None = None,
    catalog: Catalog | None = None,
) -> dict[str, Any]:
    """SLA targets for ``job`` (module docstring): the ones in ``suggest`` from the forecast's first
    choice with the reference code's margins (or those of ``confidence``), whatever ``job`` holds for
    them; the others as ``job`` gives them. ``ValueError`` for a job that has run an epoch, one
    ``live.check_recommendable`` refuses, a name outside :data:`SUGGESTIBLE` or a confidence outside
    ``CONFIDENCE_RANGE``. ``catalog``: the one ``params`` are built on and the names are read in
    (the policy's, ``LoadedPolicy.catalog``; default: the shipped one)."""
    suggest = check_suggestible(suggest)  # a tuple: a static argument of the compiled suggestion
    if job.epochs_done > 0:
        raise ValueError(
            f"SLAs are suggested for a job that has run no epoch yet (epochs_done is {job.epochs_done})"
        )
    check_recommendable(job, params, catalog)
    # A job that ran probes moves from the last one; one that ran nothing starts for free.
    state = live_state(job, params, catalog)
    targets, choice = _suggested(state, params, suggest, confidence, has_launched(job))
    choice = {name: float(value) for name, value in choice.items()}
    slas = {
        name: round_outward(float(getattr(targets, name)), up=name != "min_throughput")
        if name in suggest
        else getattr(job, name)
        for name in SUGGESTIBLE
    }
    for name in suggest:  # a target the job could not report back (a price far past any real one)
        if not slas[name] <= MAX_VALUE:
            raise ValueError(
                f"the suggested {name} {slas[name]:.4g} is over the largest a job may give "
                f"({MAX_VALUE:.0e}): check the job's price_per_hour and epochs"
            )
    return {
        "source": "forecast_slas",
        "gpus": int(choice["gpus"]),
        "cpus": int(choice["cpus"]),
        **slas,
        "suggested": list(suggest),
        "projected": {name: choice[name] for name in ("time_s", "cost_usd", "throughput")},
        "margins": (
            {"time": TIME_MARGIN, "cost": COST_MARGIN, "throughput": THROUGHPUT_MARGIN}
            if confidence is None
            else {"time": choice["margin"], "cost": choice["margin"], "throughput": 1.0 / choice["margin"]}
        ),
        "confidence": confidence,
        "probes_used": len(job.probes or ()),
        "then": "start the job there with these SLAs; after each epoch ask again with its history",
    }
