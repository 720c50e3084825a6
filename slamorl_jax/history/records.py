"""History records: finished jobs and the allocation that served each best, in JSON or CSV.

One record per finished job (:class:`HistoryRecord`): what a new job can be matched on (its workload
and GPU type by catalogue name, its epochs, deadline, budget and preference) and the allocation that
served it best (``best_gpus``, ``best_cpus``: built from simulated episodes, the hindsight oracle's;
from a user's own records, the allocation they found best).

JSON form: an object ``{"records": [...]}`` (other top-level keys, such as ``"source"``, are kept
as notes and ignored), or a bare list of records; each record an object::

    {"workload": "imagenet-resnet50", "gpu_type": "T4", "epochs": 60,
     "deadline_s": 90000, "budget_usd": 80, "preference": "time",
     "best_gpus": 8, "best_cpus": 32}

``preference`` is a preset name (``time``, ``cost``, ``balanced``) or three non-negative weights
(time, cost, sla). CSV form: a header row naming exactly these columns (any order), one record a row,
``preference`` a preset name or three weights separated by spaces or semicolons (``0.6;0.2;0.2``; a
quoted cell may separate them by commas). Cells and column names are read without the spaces around
them; blank rows are skipped.

:func:`load_records` refuses a file it cannot read or parse, an empty store, and any record with a
missing, unknown or bad field (``ValueError`` naming the file, the record and the field, one line);
given a cluster (``EnvParams``), also a record whose best allocation it cannot hold
(``live_checks.check_in_cluster``, what ``recommend`` refuses of a job). ``python -m
slamorl_jax.history check`` checks against the default cluster (the one every policy ``train``
makes is trained on: its cluster comes from the catalogue, not the run's config), and ``recommend
--history`` / ``evaluate --history`` against the policy's, so all three refuse the same store.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from slamorl_jax.atomic_files import write_new_text_atomically, write_text_atomically
from slamorl_jax.cli_args import first_line
from slamorl_jax.env.catalog import Catalog, gpu_type_index, load_catalog, workload_index
from slamorl_jax.env.objectives import PREFERENCES, preference_vector
from slamorl_jax.env.params import EnvParams
from slamorl_jax.json_input import MAX_COUNT, MAX_VALUE, finite_number, loads_strict, short_value
from slamorl_jax.live_checks import ClusterLimits, check_in_cluster

RECORD_FIELDS = (
    "workload",
    "gpu_type",
    "epochs",
    "deadline_s",
    "budget_usd",
    "preference",
    "best_gpus",
    "best_cpus",
)
BEST_FIELDS = ("best_gpus", "best_cpus")


@dataclasses.dataclass(frozen=True)
class HistoryRecord:
    """One finished job and the allocation that served it best (units in the names)."""

    workload: str  # catalogue workload name
    gpu_type: str  # catalogue GPU type
    epochs: int
    deadline_s: float
    budget_usd: float
    preference: tuple[float, float, float]  # time, cost, sla weights on the simplex
    best_gpus: int
    best_cpus: int

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (the preference as its three weights)."""
        return {**dataclasses.asdict(self), "preference": [round(w, 6) for w in self.preference]}


def record_from_mapping(
    data: Any, where: str, catalog: Catalog | None = None, cluster: EnvParams | ClusterLimits | None = None
) -> HistoryRecord:
    """A record from a JSON object or CSV row; ``ValueError`` (prefixed ``where``) on any bad field,
    and, given a ``cluster``, on a best allocation outside it."""
    if not isinstance(data, Mapping):
        raise ValueError(f"{where}: a record must be an object with fields {', '.join(RECORD_FIELDS)}")
    unknown = sorted(str(k) for k in set(data) - set(RECORD_FIELDS))
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {', '.join(unknown)}")
    missing = [name for name in RECORD_FIELDS if name not in data]
    if missing:
        raise ValueError(f"{where}: missing field(s) {', '.join(missing)}")
    catalog = catalog or load_catalog()
    try:
        for name in ("workload", "gpu_type"):
            if not isinstance(data[name], str):
                raise ValueError(f"{name} must be a catalogue name, got {short_value(data[name])}")
        workload_index(data["workload"], catalog)
        gpu_type_index(data["gpu_type"], catalog)
        counts = {name: _count(name, data[name]) for name in ("epochs", "best_gpus", "best_cpus")}
        limits = {name: _positive(name, data[name]) for name in ("deadline_s", "budget_usd")}
        preference = _preference(data["preference"])
        if cluster is not None:
            check_in_cluster(BEST_FIELDS, counts["best_gpus"], counts["best_cpus"], cluster)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None
    return HistoryRecord(
        workload=data["workload"], gpu_type=data["gpu_type"], preference=preference, **counts, **limits
    )


def _number(name: str, value: Any) -> float:
    return finite_number(value, name, text=True)  # CSV cells are text


def _count(name: str, value: Any) -> int:
    number = _number(name, value)
    if number != int(number) or not 1 <= number <= MAX_COUNT:
        raise ValueError(f"{name} must be a whole number from 1 to {MAX_COUNT:,}, got {short_value(value)}")
    return int(number)


def _positive(name: str, value: Any) -> float:
    number = _number(name, value)
    if not 0 < number <= MAX_VALUE:
        raise ValueError(f"{name} must be > 0 and at most {MAX_VALUE:g}, got {short_value(value)}")
    return number


def _preference(value: Any) -> tuple[float, float, float]:
    if isinstance(value, str) and value.strip() not in PREFERENCES:
        parts = value.replace(";", " ").replace(",", " ").split()  # a quoted CSV cell may hold commas
        value = [_number("preference", part) for part in parts] if len(parts) > 1 else value.strip()
    elif isinstance(value, str):
        value = value.strip()
    elif isinstance(value, (list, tuple)):
        value = [_number("preference", part) for part in value]
    else:
        raise ValueError(f"preference must be a preset name or three weights, got {short_value(value)}")
    vector = preference_vector(value)
    return (float(vector[0]), float(vector[1]), float(vector[2]))


def parse_json(text: str, source: str, what: str, where: str = "") -> Any:
    """The JSON value of ``text`` (from ``source``, a ``what``); ``ValueError`` with one line naming
    ``where`` in it (e.g. ``"log line 3, "``) and the line of a syntax error."""
    try:
        return loads_strict(text)  # a field given twice is refused, as in recommend --job
    except json.JSONDecodeError as err:
        raise ValueError(f"{source} is not valid JSON: {err.msg} ({where}line {err.lineno})") from None
    except RecursionError:
        raise ValueError(f"{source} is nested too deeply to be a {what}") from None
    except ValueError as err:  # a key given twice; an integer of more digits than Python converts
        raise ValueError(f"{source}: {where}{first_line(err)}") from None


def json_list(text: str, source: str, what: str, key: str) -> list:
    """The list of a JSON ``what`` document: ``{key: [...], ...}`` (other keys are notes) or a bare
    list; ``ValueError`` with one line otherwise."""
    data = parse_json(text, source, what)
    if isinstance(data, Mapping):
        if key not in data:
            raise ValueError(f"{source}: a JSON {what} needs a '{key}' list")
        data = data[key]
    if not isinstance(data, list):
        raise ValueError(f"{source}: the {key} must be a JSON list of objects")
    return data


def records_from_json(
    text: str, source: str, catalog: Catalog | None = None, cluster: EnvParams | ClusterLimits | None = None
) -> list[HistoryRecord]:
    """The records of a JSON document (module docstring)."""
    data = json_list(text, source, "history store", "records")
    for i, item in enumerate(data):
        if problem := json_types_problem(item):
            raise ValueError(f"{source} record {i}: {problem}")
    return [
        record_from_mapping(item, f"{source} record {i}", catalog, cluster) for i, item in enumerate(data)
    ]


#: The fields a JSON record holds as numbers (a CSV cell is text and is parsed; a JSON string is not).
NUMBER_FIELDS = ("epochs", "deadline_s", "budget_usd", "best_gpus", "best_cpus")


def json_types_problem(item: Any) -> str | None:
    """What in a JSON record is text where a number belongs (``"60"``, a preference of ``"0.6;0.2;0.2"``
    or ``["1", "0", "0"]``), or ``None``."""
    if not isinstance(item, Mapping):
        return None  # record_from_mapping says what it is
    for name in NUMBER_FIELDS:
        if isinstance(item.get(name), str):
            return f"{name} must be a number, got {short_value(item[name])}"
    preference = item.get("preference")
    if isinstance(preference, str) and preference.strip() not in PREFERENCES:
        return f"preference must be a preset name ({', '.join(PREFERENCES)}) or a list of three numbers"
    if isinstance(preference, list) and any(isinstance(w, str) for w in preference):
        return f"preference weights must be numbers, got {short_value(preference)}"
    return None


def csv_header_problem(header: Sequence[str]) -> str | None:
    """What is wrong with a CSV store's header (names already stripped; empty ones, from a trailing
    comma, left out), naming the columns missing, unknown or repeated; ``None`` when it names each
    record field once."""
    named = [name for name in header if name]
    missing = [name for name in RECORD_FIELDS if name not in named]
    unknown = [short_value(name) for name in named if name not in RECORD_FIELDS]  # as JSON writes them
    repeated = sorted({name for name in named if named.count(name) > 1})
    parts = [
        f"{what} {', '.join(names)}"
        for what, names in (("lacks", missing), ("has unknown", unknown), ("repeats", repeated))
        if names
    ]
    if not parts:
        return None
    return f"the CSV header {'; '.join(parts)} (its columns: {','.join(RECORD_FIELDS)}, in any order)"


def records_from_csv(
    text: str, source: str, catalog: Catalog | None = None, cluster: EnvParams | ClusterLimits | None = None
) -> list[HistoryRecord]:
    """The records of a CSV document (module docstring). Written by hand as well as by programs: a
    space after a comma, a trailing comma, and any of the three line endings are read as meant."""
    if not text.strip():
        raise ValueError(f"{source} is empty: a CSV store is a header row, then one record a row")
    # newline=None reads \r\n, \r (old Macs) and \n alike; skipinitialspace drops a space after a comma
    reader = csv.reader(io.StringIO(text, newline=None), skipinitialspace=True)
    try:
        header = [name.strip() for name in next(reader)]
        if problem := csv_header_problem(header):
            raise ValueError(f"{source}: {problem}")
        rows = [(reader.line_num, cells) for cells in reader if any(cell.strip() for cell in cells)]
    except csv.Error as err:
        raise ValueError(f"{source} is not valid CSV: {err}") from None
    records = []
    for line, cells in rows:  # the file line each row ends on: the header is line 1; blank lines count
        where = f"{source} line {line}"
        if len(cells) < len(header):
            raise ValueError(f"{where}: expected {len(RECORD_FIELDS)} cells, got {len(cells)}")
        stray = [cell for name, cell in zip(header, cells, strict=False) if not name and cell.strip()]
        if len(cells) > len(header) or stray:
            raise ValueError(f"{where}: a cell under no column of the header")
        row = {name: cell.strip() for name, cell in zip(header, cells, strict=True) if name}
        records.append(record_from_mapping(row, where, catalog, cluster))
    return records


def read_text(source: str, what: str, suffixes: Sequence[str]) -> str:
    """The UTF-8 text of file ``source`` (a ``what`` ending in one of ``suffixes``); ``ValueError``
    with one line when it has another suffix or cannot be read or decoded."""
    if Path(source).suffix.lower() not in suffixes:
        raise ValueError(f"{what} {source!r} must be a {' or '.join(suffixes)} file")
    try:
        data = Path(source).read_bytes()
    except (OSError, ValueError) as err:
        raise ValueError(f"cannot read {what} {source!r}: {getattr(err, 'strerror', None) or err}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise ValueError(f"{what} {source!r} is not UTF-8 text (byte {err.start})") from None


def load_records(
    path: str | Path, catalog: Catalog | None = None, cluster: EnvParams | ClusterLimits | None = None
) -> list[HistoryRecord]:
    """The records of a ``.json`` or ``.csv`` history store; ``ValueError`` with one line on bad input
    (with a ``cluster``, also a best allocation outside it)."""
    source = str(path)
    suffix = Path(source).suffix.lower()
    text = read_text(source, "history store", (".json", ".csv"))
    parse = records_from_json if suffix == ".json" else records_from_csv
    if isinstance(cluster, EnvParams):
        cluster = ClusterLimits.of(cluster)  # read once, not once a record
    records = parse(text, source, catalog, cluster)
    if not records:
        raise ValueError(f"history store {source!r} holds no records")
    return records


def check_records(records: Sequence[HistoryRecord], catalog: Catalog | None = None) -> None:
    """``ValueError`` naming the first of ``records`` that :func:`load_records` would refuse (not a
    :class:`HistoryRecord`, a name not in the catalogue, a count below 1, a non-finite limit, weights
    off the simplex): records built in Python pass through the loader's checks too."""
    for i, record in enumerate(records):
        if not isinstance(record, HistoryRecord):
            raise ValueError(f"record {i}: a HistoryRecord is needed, got {type(record).__name__}")
        try:
            fields = record.as_dict()
        except TypeError:  # as_dict rounds each weight: a preset name or a number is no weights
            raise ValueError(
                f"record {i}: preference must be three weights, got {short_value(record.preference)}"
            ) from None
        read_back = record_from_mapping(fields, f"record {i}", catalog)
        if not np.allclose(read_back.preference, record.preference, atol=1e-5):  # loading normalises
            raise ValueError(f"record {i}: preference must be weights summing to 1, got {record.preference}")


def save_records(
    records: Sequence[HistoryRecord],
    path: str | Path,
    notes: Mapping[str, Any] | None = None,
    replace: bool = True,
    catalog: Catalog | None = None,
) -> None:
    """Write ``records`` as JSON (``notes`` beside them) or CSV, by the file's suffix, whole or not at
    all (``atomic_files``: a failed write leaves an existing store as it was). Unless ``replace``, a
    file that exists by then is left alone (``FileExistsError``). ``ValueError``, nothing written, for
    records :func:`load_records` would refuse (a name not in ``catalog``, the shipped one by
    default, a count below 1, a non-finite limit, weights off the simplex), none at all, or another
    suffix."""
    path = Path(path)
    if path.suffix.lower() not in (".json", ".csv"):
        raise ValueError(f"a history store must end in .json or .csv, got {str(path)!r}")
    if not records:
        raise ValueError("no records to save: load_records refuses an empty store")
    check_records(records, catalog)  # what load_records would refuse, found before writing
    write = write_text_atomically if replace else write_new_text_atomically
    if path.suffix.lower() == ".csv":
        stream = io.StringIO(newline="")
        writer = csv.DictWriter(stream, fieldnames=RECORD_FIELDS)
        writer.writeheader()
        for record in records:
            row = record.as_dict()
            row["preference"] = ";".join(f"{w:g}" for w in row["preference"])
            writer.writerow(row)
        write(path, stream.getvalue())
        return
    payload = {**(notes or {}), "records": [record.as_dict() for record in records]}
    write(path, json.dumps(payload, indent=1) + "\n")
