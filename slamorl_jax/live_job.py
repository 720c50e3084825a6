"""A running job's report after an epoch (:class:`LiveJob`): its fields, its JSON form and the
checks that refuse a report that contradicts itself or holds a value no job could.

A platform tool knows a running job's workload and GPU type (catalogue names), allocation, progress,
spend, last-epoch readings, SLAs, preference and the epochs it has run so far. Every number is
finite and at most ``MAX_VALUE`` (``MAX_COUNT`` for counts); one that must be positive (a time,
budget, memory or throughput) is at least ``MIN_POSITIVE``. Whether the policy's cluster can hold
the job is ``live.check_recommendable``'s; how its readings compare with training,
``live_checks.outside_training``'s.

JSON form (``LiveJob.from_dict``; ``python -m slamorl_jax.recommend --job=job.json``), the README's
example job (``docs/example_job.json``, whose history holds its ten epochs)::

    {"workload": "imagenet-resnet50", "gpu_type": "T4",
     "gpus": 4, "cpus": 32, "epochs_done": 10, "epochs_total": 60,
     "elapsed_s": 15500, "cost_usd": 14, "last_epoch_time_s": 1550,
     "throughput": 830, "gpu_util": 0.82, "cpu_util": 0.4,
     "memory_used_gib": 64, "memory_alloc_gib": 160, "price_per_hour": 3.23,
     "deadline_s": 90000, "budget_usd": 80, "min_throughput": 500, "preference": "time",
     "history": [{"gpus": 4, "cpus": 32, "epoch_time_s": 1550}, ...]}

A job that has run no epoch yet (``epochs_done`` 0) may leave out ``elapsed_s`` and ``cost_usd`` (0:
or what its probes spent) and the last epoch's readings (``last_epoch_time_s`` to
``price_per_hour``, :data:`READINGS`): it has measured none, and each left out is the profile's
forecast at its allocation, as the env's reset sets them; once it has run an epoch they are required
(and ``cost_usd`` above 0 where its time at ``price_per_hour`` comes to a dollar or more).

Optional: ``min_throughput``, ``max_memory_gib``, ``min_gpu_util`` and ``min_cpu_util`` (no limit when
left out); ``preference`` (``time``, ``cost``, ``balanced`` or three weights: time, cost, sla;
default balanced); ``history``, one entry per epoch run so far with its allocation and measured
epoch time (without re-allocation pauses; default: the last epoch alone; the observation's
``surprise`` is the last entry against the online model of those before it, so without a history
it is the last epoch against the profile);
``mean_gpu_util``/``mean_cpu_util`` (time-weighted over the job so far, pauses included; default
the last epoch's; before the first epoch, the profile's utilisation while its probes ran over
``elapsed_s``, as the env's probes count busy time, 0 without probes) and ``peak_memory_gib``
(default the last epoch's; before the first epoch, the profile's forecast of what its probes used,
0 without probes, as the env's reset and probes set it; once the job has run an epoch, at least
that epoch's ``memory_used_gib``);
``requested_gpus``,
``requested_cpus`` and ``reference_throughput`` (see above); ``probes``, short runs made before the
first epoch (``slamorl_jax.live_start.probe_plan``), each ``{"gpus", "cpus", "epoch_time_s"}`` with
the probe's time over its fraction of an epoch: they feed the online model as epochs do but are not
epochs (``epochs_done`` does not count them); ``multipliers``, the per-SLA dual multipliers the
previous answer returned (``Recommendation.multipliers``, an object by SLA name): a policy trained
with ``--weights=dual`` carries each SLA's pressure from epoch to epoch in them, so a platform passes
them back with its next report (left out: every SLA's starts at 0, as at a job's first reading;
the other weight modes do not read them, and their answers' ``multipliers`` are ``null``). ``null``
leaves any optional field out.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from slamorl_jax.env.job_model import billed_usd
from slamorl_jax.env.objectives import SLA_NAMES, preference_vector
from slamorl_jax.env.probes import PROBE_FRACTION
from slamorl_jax.env.suggested_slas import NO_LIMIT  # an upper limit never reached (max_memory_gib)
from slamorl_jax.json_input import MAX_COUNT, MAX_VALUE, finite_number, short_value

# The last epoch's readings a job reports (a new job may leave them out: the profile's forecast).
READINGS = (
    "last_epoch_time_s",
    "throughput",
    "gpu_util",
    "cpu_util",
    "memory_used_gib",
    "memory_alloc_gib",
    "price_per_hour",
)
# Smallest value accepted where a reading must be positive (a time, budget, memory or throughput):
# float32 holds nothing below about 1e-45, and ratios of a value near it overflow to NaN.
MIN_POSITIVE = 1e-6
HISTORY_FIELDS = ("gpus", "cpus", "epoch_time_s")
LAST_EPOCH_TOLERANCE = 1e-3  # relative: history's last epoch time against last_epoch_time_s


@dataclasses.dataclass(frozen=True)
class LiveJob:
    """A running job after its latest epoch (units in the names; utilisations are fractions)."""

    # Catalogue names (slamorl_jax.env.load_catalog().workload_names, .gpu_types: T4, K80, P100,
    # V100), of the policy's catalogue (LoadedPolicy.catalog) when it was trained on one of its own:
    # checked where a policy reads the job (live.check_recommendable).
    workload: str
    gpu_type: str
    gpus: int
    cpus: int
    epochs_done: int
    epochs_total: int
    deadline_s: float
    budget_usd: float
    # Left out (None): 0 for a job that has run no epoch; one that has must report them (__post_init__).
    elapsed_s: float | None = None
    cost_usd: float | None = None
    # The last epoch's readings (READINGS): required once the job has run an epoch; a new job may leave
    # them out and gets the profile's forecast at its allocation, as the env's reset does.
    last_epoch_time_s: float | None = None  # the epoch's run time, without a re-allocation pause
    # samples/s and utilisations over the last epoch's whole interval, the restart pause before it
    # included (samples / (pause + epoch time)), as the env measures them
    throughput: float | None = None
    gpu_util: float | None = None
    cpu_util: float | None = None
    memory_used_gib: float | None = None
    memory_alloc_gib: float | None = None
    price_per_hour: float | None = None  # what the current allocation costs per hour now
    min_throughput: float = 0.0
    max_memory_gib: float = NO_LIMIT
    min_gpu_util: float = 0.0
    min_cpu_util: float = 0.0
    preference: str | tuple[float, ...] = "balanced"
    history: tuple[tuple[int, int, float], ...] | None = None  # (gpus, cpus, epoch_time_s) per epoch
    mean_gpu_util: float | None = None
    mean_cpu_util: float | None = None
    peak_memory_gib: float | None = None
    requested_gpus: int | None = None
    requested_cpus: int | None = None
    reference_throughput: float | None = None
    probes: tuple[tuple[int, int, float], ...] | None = None  # (gpus, cpus, epoch_time_s) per probe run
    # Per-SLA dual multipliers before this report (SLA_NAMES order; the previous answer's): --weights=dual
    multipliers: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        # Each field as the plain Python value its annotation names (NumPy and JAX scalars become
        # ints and floats), refusing strings, bools and fractions where numbers or counts belong:
        # ``ValueError`` naming the field, as ``from_dict`` gives for JSON.
        for field in dataclasses.fields(self):
            value = _field_value(field.name, str(field.type), getattr(self, field.name))
            object.__setattr__(self, field.name, value)
        so_far = [name for name in SPENT_SO_FAR if getattr(self, name) is None]
        if so_far and self.epochs_done > 0:
            # A new job's 0 would read a running job as one that took no time and spent nothing.
            raise ValueError(
                f"missing job field(s): {', '.join(so_far)} (a job that has run an epoch reports its "
                "time and spend so far)"
            )
        for name in so_far:
            object.__setattr__(self, name, 0.0)
        _check(self)

    @property
    def request(self) -> tuple[int, int]:
        """The user's requested ``(gpus, cpus)``; the current allocation where the job gave none."""
        return self.requested_gpus or self.gpus, self.requested_cpus or self.cpus

    @classmethod
    def required_fields(cls) -> list[str]:
        """The fields every job report holds, in the job's field order."""
        return [f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING]

    @classmethod
    def missing_fields(cls, data: Mapping[str, Any]) -> list[str]:
        """The required job fields ``data`` leaves out, in the job's field order."""
        return [name for name in cls.required_fields() if name not in data]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LiveJob:
        """Build from a JSON-like mapping; ``ValueError`` names any unknown, missing or bad field."""
        if not isinstance(data, Mapping):
            raise ValueError("a job must be a JSON object of its fields")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - set(fields))
        if unknown:  # written as JSON writes them: a name may hold a newline or be any length
            raise ValueError(
                f"unknown job field(s): {', '.join(short_value(name) for name in unknown)}"
                + _did_you_mean(unknown, [name for name in fields if name not in data])
            )
        required = cls.required_fields()
        missing = [name for name in required if name not in data]
        if missing:
            raise ValueError(f"missing job field(s): {', '.join(missing)}")
        # The runs' JSON form (objects); every other field is checked by the constructor.
        # null means left out, for the runs as for every optional field (a platform may write an
        # unset field as null); a required field that is null is refused by the constructor.
        values = {
            name: _history(v, name) if name in RUN_FIELDS and v is not None else v
            for name, v in data.items()
            if v is not None or name in required
        }
        return cls(**values)  # which refuses a running job without its time and spend so far

    def as_dict(self) -> dict[str, Any]:
        """The job's JSON form, which :meth:`from_dict` reads back to an equal job: every field it
        holds (``None`` ones left out), runs as ``{gpus, cpus, epoch_time_s}`` objects, weights and
        multipliers as lists. (``dataclasses.asdict`` keeps runs as tuples, a form ``from_dict``
        refuses: a JSON report names each run's values.)"""
        out: dict[str, Any] = {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is None:
                continue
            if field.name in RUN_FIELDS:
                value = [dict(zip(HISTORY_FIELDS, run, strict=True)) for run in value]
            elif isinstance(value, tuple):
                value = list(value)
            out[field.name] = value
        return out


def _did_you_mean(unknown: list[str], known: list[str]) -> str:
    """`` (did you mean epochs_total?)`` for an unknown name near one of the ``known`` fields (a
    typo; the fields a report has not given), each such name paired with its guess where there are
    several (`` (did you mean "gpu": gpus, "cpu": cpus?)``); else nothing."""
    near = {name: match[0] for name in unknown if (match := difflib.get_close_matches(str(name), known, n=1))}
    if not near:
        return ""
    if len(near) == 1 and len(unknown) == 1:
        return f" (did you mean {next(iter(near.values()))}?)"
    return f" (did you mean {', '.join(f'{short_value(k)}: {v}' for k, v in near.items())}?)"


RUN_FIELDS = ("history", "probes")
SPENT_SO_FAR = ("elapsed_s", "cost_usd")  # optional before the first epoch, required after it


def _field_value(name: str, kind: str, value: Any) -> Any:
    """``value`` of the field ``name`` (annotated ``kind``) as the job keeps it; ``ValueError`` naming
    the field when it has the wrong type."""
    if name == "preference":
        if isinstance(value, str):
            return value
        weights = (
            isinstance(value, (list, tuple, np.ndarray))
            and np.ndim(value) == 1
            and all(not isinstance(v, (list, tuple, dict, np.ndarray)) for v in value)
        )
        if not weights:
            raise ValueError(f"preference must be a name or three weights, got {short_value(value)}")
        return tuple(_number(name, v) for v in value)
    if name in ("workload", "gpu_type"):
        if not isinstance(value, str):
            raise ValueError(f"{name} must be a catalogue name (a string), got {short_value(value)}")
        return value
    if value is None and "None" in kind:
        return None
    if name == "multipliers":
        return _multipliers(value)
    if name in RUN_FIELDS:
        return _runs(value, name)
    return _integer(name, value) if kind.startswith("int") else _number(name, value)


def _multipliers(value: Any) -> tuple[float, ...]:
    """The dual multipliers as a tuple in ``SLA_NAMES`` order, from an object by SLA name (what an
    answer returns) or a sequence of six numbers."""
    if isinstance(value, Mapping):
        if set(value) != set(SLA_NAMES):
            raise ValueError(f"multipliers must name exactly the SLAs {', '.join(SLA_NAMES)}")
        value = [value[name] for name in SLA_NAMES]
    if not isinstance(value, (list, tuple, np.ndarray)) or len(value) != len(SLA_NAMES):
        raise ValueError(f"multipliers must be an object by SLA name or {len(SLA_NAMES)} numbers")
    return tuple(_number("multipliers", v) for v in value)


def _number(name: str, value: Any) -> float:
    return finite_number(value, f"job field {name}")


def _integer(name: str, value: Any) -> int:
    number = _number(name, value)
    if number != int(number):
        raise ValueError(f"job field {name} must be an integer, got {short_value(value)}")
    return int(number)


def _runs(value: Any, field: str) -> tuple[tuple[int, int, float], ...]:
    """The ``history`` or ``probes`` given to the constructor: runs as ``(gpus, cpus, epoch_time_s)``
    (or as the JSON objects :func:`_history` reads)."""
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{field} must be a sequence of runs, each (gpus, cpus, epoch_time_s)")
    runs = []
    for i, run in enumerate(value):
        if isinstance(run, Mapping) and set(run) == set(HISTORY_FIELDS):
            run = tuple(run[name] for name in HISTORY_FIELDS)
        if not isinstance(run, (list, tuple)) or len(run) != len(HISTORY_FIELDS):
            raise ValueError(f"{field}[{i}] must be (gpus, cpus, epoch_time_s), got {short_value(run)}")
        gpus, cpus, epoch_time = run
        runs.append(
            (
                _integer(f"{field}[{i}].gpus", gpus),
                _integer(f"{field}[{i}].cpus", cpus),
                _number(f"{field}[{i}].epoch_time_s", epoch_time),
            )
        )
    return tuple(runs)


def _history(value: Any, field: str = "history") -> tuple[tuple[Any, Any, Any], ...]:
    """The JSON form of ``history`` (or ``probes``): a list of objects, each with exactly ``gpus``,
    ``cpus`` and ``epoch_time_s``, as ``(gpus, cpus, epoch_time_s)`` runs; their values are checked
    by the constructor (:func:`_runs`)."""
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{field} must be a list of runs, each {{gpus, cpus, epoch_time_s}}")
    for i, entry in enumerate(value):
        if not isinstance(entry, Mapping) or set(entry) != set(HISTORY_FIELDS):
            raise ValueError(f"{field}[{i}] must be an object with exactly {', '.join(HISTORY_FIELDS)}")
    return tuple(tuple(entry[name] for name in HISTORY_FIELDS) for entry in value)


def _check_magnitudes(job: LiveJob) -> None:
    """No count above ``MAX_COUNT``, no other number above ``MAX_VALUE`` (``max_memory_gib`` may be
    ``NO_LIMIT``)."""
    counts = ("gpus", "cpus", "epochs_done", "epochs_total", "requested_gpus", "requested_cpus")
    for field in dataclasses.fields(job):
        value = getattr(job, field.name)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or field.name == "preference":
            continue
        if field.name == "max_memory_gib" and value == NO_LIMIT:
            continue
        limit = MAX_COUNT if field.name in counts else MAX_VALUE
        if not math.isfinite(value) or abs(value) > limit:
            raise ValueError(f"{field.name} must be a finite number of at most {limit:g}, got {value!r}")
    for field in ("history", "probes"):
        for i, (gpus, cpus, epoch_time) in enumerate(getattr(job, field) or ()):
            if max(gpus, cpus) > MAX_COUNT or not epoch_time <= MAX_VALUE:
                raise ValueError(f"{field}[{i}] must hold counts <= {MAX_COUNT:g} and times <= {MAX_VALUE:g}")


def _check_last_epoch(job: LiveJob) -> None:
    """The last ``history`` entry is the last epoch: it ran on the reported allocation and took
    ``last_epoch_time_s`` (within ``LAST_EPOCH_TOLERANCE``, for a time rounded in one place); a report
    that contradicts itself would feed the online model one epoch and the severities another."""
    if not job.history or job.last_epoch_time_s is None:
        return
    gpus, cpus, seconds = job.history[-1]
    same_time = abs(seconds - job.last_epoch_time_s) <= LAST_EPOCH_TOLERANCE * job.last_epoch_time_s
    if (gpus, cpus) != (job.gpus, job.cpus) or not same_time:
        raise ValueError(
            f"history's last entry ({gpus} GPUs x {cpus} CPUs, {seconds:g} s) is not the last epoch the "
            f"job reports ({job.gpus} x {job.cpus}, last_epoch_time_s {job.last_epoch_time_s:g}): list "
            "the epochs oldest first, ending with the last one"
        )


def _check_elapsed(job: LiveJob) -> None:
    """``elapsed_s`` covers the epochs the job reports having run (every one in ``history``, or the
    last), pauses on top, within ``LAST_EPOCH_TOLERANCE``: 1 s with ten epochs of 1,550 s was read
    as a job far ahead of its deadline. A new job's given ``elapsed_s`` covers its probes' run time
    (``PROBE_FRACTION`` of each probe's ``epoch_time_s``; left out, it is 0: not given)."""
    if job.epochs_done == 0:
        probe_s = PROBE_FRACTION * sum(seconds for _, _, seconds in job.probes or ())
        if job.elapsed_s and probe_s > job.elapsed_s * (1 + LAST_EPOCH_TOLERANCE):
            raise ValueError(
                f"elapsed_s ({job.elapsed_s:g} s) is less than its probes ran ({probe_s:g} s, "
                f"{PROBE_FRACTION:g} of each probe's epoch_time_s): elapsed_s is the job's time so far"
            )
        return
    run = sum(seconds for _, _, seconds in job.history) if job.history else job.last_epoch_time_s or 0.0
    if run > job.elapsed_s * (1 + LAST_EPOCH_TOLERANCE):
        what = f"the {len(job.history)} epochs of its history" if job.history else "its last epoch"
        raise ValueError(
            f"elapsed_s ({job.elapsed_s:g} s) is less than {what} took ({run:g} s): elapsed_s is the "
            "job's time so far, every epoch and pause included"
        )


# A running job reporting $0 spent is refused once its time so far at its current price comes to
# this much: far above a spend rounded to cents (an epoch of 7 s at $0.63/h is $0.001) and above
# what a price that rose since its earlier epochs could make of one.
ZERO_SPEND_CHECKED_FROM_USD = 1.0


def _check_spend(job: LiveJob) -> None:
    """A job that has run epochs at a price above 0 has spent something: ``cost_usd`` 0 (a new
    job's filled 0 kept by ``dataclasses.replace(job, epochs_done=5)``, say) read as a job with its
    whole budget left. Refused where its ``elapsed_s`` at its ``price_per_hour`` comes to
    :data:`ZERO_SPEND_CHECKED_FROM_USD` or more."""
    at_the_price = billed_usd(job.elapsed_s, job.price_per_hour or 0.0)
    if job.epochs_done > 0 and job.cost_usd == 0 and at_the_price >= ZERO_SPEND_CHECKED_FROM_USD:
        raise ValueError(
            f"cost_usd is 0 but the job has run {job.epochs_done} epoch(s) over {job.elapsed_s:g} s at "
            f"${job.price_per_hour:g}/h: cost_usd is the job's spend so far"
        )


def _check(job: LiveJob) -> None:
    """Ranges of every field; ``ValueError`` naming the first bad one."""
    _check_magnitudes(job)
    if job.gpus < 1 or job.cpus < 1:
        raise ValueError(f"gpus and cpus must be >= 1, got {job.gpus} and {job.cpus}")
    if job.epochs_total < 1 or not 0 <= job.epochs_done <= job.epochs_total:
        raise ValueError(
            f"need 0 <= epochs_done <= epochs_total and epochs_total >= 1, got {job.epochs_done} "
            f"and {job.epochs_total}"
        )
    missing = [name for name in READINGS if getattr(job, name) is None]
    if missing and job.epochs_done > 0:
        raise ValueError(
            f"missing job field(s): {', '.join(missing)} (a job that has run an epoch reports its last one)"
        )
    if (
        job.memory_used_gib is not None
        and job.memory_alloc_gib is not None
        and (job.memory_used_gib > job.memory_alloc_gib)
    ):
        raise ValueError(
            f"memory_used_gib ({job.memory_used_gib:g}) must not exceed memory_alloc_gib "
            f"({job.memory_alloc_gib:g})"
        )
    positive = ("last_epoch_time_s", "memory_alloc_gib", "deadline_s", "budget_usd")
    for name in (*positive, "reference_throughput"):
        value = getattr(job, name)
        if value is not None and not value >= MIN_POSITIVE:
            raise ValueError(f"{name} must be at least {MIN_POSITIVE:g}, got {value:g}")
    # A peak of 0 is a job that has used no memory yet (the env's fresh jobs without probes).
    non_negative = ("elapsed_s", "cost_usd", "throughput", "memory_used_gib", "price_per_hour")
    for name in (*non_negative, "peak_memory_gib", "min_throughput", "max_memory_gib"):
        if getattr(job, name) is not None and not getattr(job, name) >= 0:
            raise ValueError(f"{name} must be >= 0, got {getattr(job, name)}")
    _check_peak_memory(job)
    for name in ("gpu_util", "cpu_util", "min_gpu_util", "min_cpu_util", "mean_gpu_util", "mean_cpu_util"):
        value = getattr(job, name)
        if value is not None and not 0 <= value <= 1:
            raise ValueError(f"{name} is a fraction in [0, 1], got {value}")
    for name in ("requested_gpus", "requested_cpus"):
        value = getattr(job, name)
        if value is not None and value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if job.history is not None:
        if len(job.history) > job.epochs_done:
            raise ValueError(f"history lists {len(job.history)} epochs but epochs_done is {job.epochs_done}")
        if not job.history and job.epochs_done > 0:  # would silently drop the last epoch's measurement
            raise ValueError(
                f"history is empty but the job has run {job.epochs_done} epochs: list them, or leave "
                "history out (the last epoch alone)"
            )
    for field in ("history", "probes"):
        for i, (gpus, cpus, epoch_time) in enumerate(getattr(job, field) or ()):
            if gpus < 1 or cpus < 1 or not epoch_time >= MIN_POSITIVE:
                raise ValueError(f"{field}[{i}] needs gpus, cpus >= 1 and epoch_time_s >= {MIN_POSITIVE:g}")
    _check_last_epoch(job)
    _check_elapsed(job)
    _check_spend(job)
    if job.multipliers is not None and not all(0 <= m < math.inf for m in job.multipliers):
        raise ValueError(f"multipliers must be finite and >= 0, got {list(job.multipliers)}")
    preference_vector(job.preference)  # raises for a bad preference


def has_launched(job: LiveJob) -> bool:
    """Whether ``job`` has run anything where it is (an epoch, a probe, or time on its allocation):
    a move from there pays the re-allocation pause; a job that has not starts wherever it is
    placed for free (``env.probes.first_placement``)."""
    return job.epochs_done > 0 or bool(job.probes) or (job.elapsed_s or 0.0) > 0


def _check_peak_memory(job: LiveJob) -> None:
    """A job that has run an epoch peaked at least at that epoch's memory: a lower peak is a unit or
    field mix-up, and the memory SLA would be judged on it (two tools' readings may differ within
    ``LAST_EPOCH_TOLERANCE``)."""
    peak, used = job.peak_memory_gib, job.memory_used_gib
    if peak is None or used is None or job.epochs_done == 0:
        return
    if peak < used * (1 - LAST_EPOCH_TOLERANCE):
        raise ValueError(
            f"peak_memory_gib ({peak:g}) is below memory_used_gib ({used:g}), the last epoch's: the peak "
            "over the job so far includes it"
        )
