"""Decision logs: what running jobs reported and where each was moved next, in JSON or JSON Lines.

One decision per job and epoch boundary (:class:`Decision`): the job's report after its latest epoch,
with exactly the fields ``recommend --job`` reads (:class:`~slamorl_jax.live_job.LiveJob`; a job that has
run no epoch yet may leave out its readings), plus the allocation it ran its next epoch on:
``next_gpus`` and ``next_cpus`` (equal to ``gpus``/``cpus`` when it stayed). ``python -m
slamorl_jax.imitate --decisions=log.jsonl`` pre-trains a policy to make them.

JSON form: ``{"decisions": [...]}`` (other top-level keys are notes, ignored) or a bare list; JSON
Lines (``.jsonl``): one decision object a line, blank lines skipped. Each decision::

    {"workload": "cifar10-resnet18", "gpu_type": "T4", "gpus": 1, "cpus": 4,
     "epochs_done": 0, "epochs_total": 30, "deadline_s": 5400, "budget_usd": 5,
     "preference": "time", "next_gpus": 4, "next_cpus": 16}

:func:`load_decisions` refuses a file it cannot read or parse, an empty log, and any decision with a
missing, unknown or bad field (``ValueError`` naming the file, the decision and the field, one line).
Whether an allocation fits the cluster depends on the policy's: ``demonstrations.decision_demonstrations``
refuses a current or next allocation outside it, naming the decision the same way (its line of a
JSON Lines log).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from slamorl_jax.atomic_files import write_text_atomically
from slamorl_jax.history.records import json_list, parse_json, read_text
from slamorl_jax.json_input import MAX_COUNT, short_value
from slamorl_jax.live_job import LiveJob

NEXT_FIELDS = ("next_gpus", "next_cpus")
SUFFIXES = (".json", ".jsonl")
WHAT = "decision log"


@dataclasses.dataclass(frozen=True)
class Decision:
    """A job's report after an epoch and the allocation of its next epoch."""

    job: LiveJob
    next_gpus: int
    next_cpus: int
    where: str = dataclasses.field(default="", compare=False)  # e.g. "log.jsonl line 3", for errors


def decision_from_mapping(data: Any, where: str) -> Decision:
    """One decision from a JSON object; ``ValueError`` prefixed by ``where`` on bad input."""
    if not isinstance(data, Mapping):
        raise ValueError(
            f"{where}: a decision must be a JSON object of a job's fields and {', '.join(NEXT_FIELDS)}"
        )
    missing = [name for name in NEXT_FIELDS if name not in data]
    if missing:
        raise ValueError(f"{where}: missing field(s): {', '.join(missing)}")
    counts = []
    for name in NEXT_FIELDS:
        value = data[name]
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUNT:
            raise ValueError(
                f"{where}: {name} must be a whole number from 1 to {MAX_COUNT}, got {short_value(value)}"
            )
        counts.append(value)
    report = {name: value for name, value in data.items() if name not in NEXT_FIELDS}
    try:
        job = LiveJob.from_dict(report)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None
    return Decision(job, *counts, where=where)


def decisions_from_text(text: str, source: str, lines: bool) -> list[Decision]:
    """The decisions of a JSON (``lines`` False) or JSON Lines document (module docstring)."""
    if lines:
        items = [
            (f"{source} line {number}", parse_json(line, source, WHAT, f"log line {number}, "))
            # Lines end at "\n" only: splitlines also splits at \x1c, \x85 or U+2028 inside a line.
            for number, line in enumerate(text.split("\n"), start=1)
            if line.strip()
        ]
    else:
        data = json_list(text, source, WHAT, "decisions")
        items = [(f"{source} decision {i}", item) for i, item in enumerate(data)]
    return [decision_from_mapping(item, where) for where, item in items]


def load_decisions(path: str | Path) -> list[Decision]:
    """The decisions of a ``.json`` or ``.jsonl`` log; ``ValueError`` with one line on bad input."""
    source = str(path)
    text = read_text(source, WHAT, SUFFIXES)
    decisions = decisions_from_text(text, source, lines=Path(source).suffix.lower() == ".jsonl")
    if not decisions:
        raise ValueError(f"decision log {source!r} holds no decisions")
    return decisions


def save_decisions(rows: Sequence[Mapping[str, Any]], path: str | Path) -> None:
    """Write decision objects (job fields plus ``next_gpus``/``next_cpus``) as JSON Lines or JSON, by
    the file's suffix (``.jsonl`` or ``.json``), whole or not at all (``atomic_files``). NumPy
    numbers are written as plain ones; ``ValueError`` (nothing written) for rows :func:`load_decisions`
    would refuse, none at all, or another suffix."""
    path = Path(path)
    if path.suffix.lower() not in SUFFIXES:
        raise ValueError(f"a decision log must end in {' or '.join(SUFFIXES)}, got {str(path)!r}")
    objects = []
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise ValueError(
                f"decision {i}: a decision must be a mapping of a job's fields and next_gpus, next_cpus"
            )
        data = json.loads(json.dumps(dict(row), default=_plain_number))
        decision_from_mapping(data, f"decision {i}")  # what load_decisions would refuse
        objects.append(data)
    if not objects:
        raise ValueError("no decisions to save: load_decisions refuses an empty log")
    if path.suffix.lower() == ".jsonl":
        text = "".join(json.dumps(data) + "\n" for data in objects)
    else:
        text = json.dumps({"decisions": objects}, indent=1) + "\n"
    write_text_atomically(path, text)


def _plain_number(value: Any) -> Any:
    """``json.dumps``'s fallback: a NumPy scalar as the Python number it holds."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON")
