"""Job reports read from files, as ``recommend --job`` / ``--jobs`` and ``history ingest`` read
them: one JSON object (:func:`read_job`), or many (:func:`read_jobs`: JSON Lines, a JSON list, or
one object over several lines), strict JSON (a repeated key is an error), each bad one named by its
line or item in one line with exit status 2 (or, with ``keep_going``, answered by its reason)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from slamorl_jax.cli_args import fail, first_line
from slamorl_jax.cli_start import program_name
from slamorl_jax.json_input import json_kind, json_or_reason, loads_strict

if TYPE_CHECKING:
    from collections.abc import Callable

    from slamorl_jax.live_job import LiveJob

#: The command whose name the messages give unless told another: ``recommend`` reads most job files.
PROG = program_name("slamorl_jax.recommend")


def read_source(source: str, flag: str, prog: str = PROG) -> str:
    """The UTF-8 text of file ``source`` (``-``: standard input); exits 2 naming ``flag`` when it
    cannot be read (the message names ``prog``, as every exit below)."""
    if not source:
        fail(f"{flag} is empty: give a file path, or - for standard input", prog)
    if source == "-" and sys.stdin is None:
        fail(f"{flag} - reads standard input, which is closed", prog)
    try:
        if source == "-":
            stream = getattr(sys.stdin, "buffer", None)
            data = (
                stream.read() if stream is not None else sys.stdin.read().encode("utf-8", "surrogateescape")
            )
        else:
            data = Path(source).read_bytes()
    except (OSError, ValueError) as err:  # missing, a directory, unreadable, a NUL byte in the path
        fail(f"cannot read {flag} {source!r}: {getattr(err, 'strerror', None) or err}", prog)
    try:
        return data.decode("utf-8-sig")  # a byte-order mark some editors write is skipped
    except UnicodeDecodeError as err:
        fail(f"{flag} {source!r} is not UTF-8 text (byte {err.start})", prog)
    return ""  # unreachable


def parse_json(text: str, where: str, prog: str = PROG) -> object:
    """The JSON value of ``text``; exits 2 naming ``where`` when it has none (:func:`json_or_reason`)."""
    value, reason = json_or_reason(text)
    if reason is not None:
        fail(f"{where}{reason}", prog)
    return value


def read_job(source: str) -> dict:
    """The JSON object in file ``source`` (``-``: standard input); exits 2 when it cannot be read or
    is not one JSON object."""
    data = parse_json(read_source(source, "--job"), f"--job {source!r}")
    if not isinstance(data, dict):
        fail(f"--job {source!r} must hold one JSON object (a job), got {json_kind(data)}", PROG)
    return data


def read_jobs(
    source: str,
    keep_going: bool = False,
    prog: str = PROG,
    prepare: Callable[[dict], dict] | None = None,
) -> list[tuple[str, LiveJob | str]]:
    """The jobs of the ``--jobs`` file, each with where it is (``line N`` or ``item i``): JSON Lines
    (one job object a line, blank lines skipped), one JSON list of job objects, or one job object
    over several lines; exits 2 naming the line or item of a bad one, or with ``keep_going`` gives
    why in its place (a string). A file that cannot be read, or holds no jobs, exits 2 either way
    (every message names ``prog``: ``history ingest`` reads the same files, each job object first
    passed through ``prepare``)."""
    from slamorl_jax.live_job import LiveJob

    text = read_source(source, "--jobs", prog)
    try:  # a list, or one (pretty-printed) job: the whole file is one JSON value
        whole = loads_strict(text)
    except (ValueError, RecursionError):
        single = one_json_value(text)
        broken_list = single is None and text.lstrip().startswith("[") and not later_lines_are_objects(text)
        if single or broken_list:  # exits with the reason: a repeated key, a broken list
            parse_json(text, f"--jobs {source!r}", prog)
        whole = None  # JSON Lines (or bad JSON, named by its line below)
    if isinstance(whole, (list, dict)):
        named = [(f"item {i}", item) for i, item in enumerate(whole)] if isinstance(whole, list) else []
        if isinstance(whole, dict):  # one job: named by its line(s), as JSON Lines names a job
            filled = [n for n, line in enumerate(text.split("\n"), 1) if line.strip()]
            first, last = filled[0], filled[-1]
            named = [(f"line {first}" if first == last else f"lines {first}-{last}", whole)]
    else:  # JSON Lines: records end at newlines only (a string may hold U+2028 and the like)
        lines = [(f"line {n}", line) for n, line in enumerate(text.split("\n"), 1)]
        named = [
            (where, _line_value(line, where, source, keep_going, prog))
            for where, line in lines
            if line.strip()
        ]
    if not named:
        fail(f"--jobs {source!r} holds no jobs", prog)
    jobs: list[tuple[str, LiveJob | str]] = []
    for where, item in named:
        try:
            if isinstance(item, _Unreadable):
                raise ValueError(item.reason)
            if not isinstance(item, dict):
                raise ValueError(f" must be a JSON object (a job), got {json_kind(item)}")
            jobs.append((where, LiveJob.from_dict(prepare(item) if prepare else item)))
        except ValueError as err:
            if not keep_going:
                fail(f"--jobs {source!r} {where}{_joined(str(err))}", prog)
            jobs.append((where, first_line(err).lstrip(" :")))
    return jobs


def one_json_value(text: str) -> bool | None:
    """Whether ``text`` is one JSON value and whitespace (``False``: another value follows it, as in
    JSON Lines; ``None``: its first value does not parse). Read leniently (a repeated key passes):
    only where the first value ends matters here, its faults are named where it is parsed."""
    body = text.lstrip()
    try:
        _, end = json.JSONDecoder().raw_decode(body)
    except (ValueError, RecursionError):
        return None
    return not body[end:].strip()


def later_lines_are_objects(text: str) -> bool:
    """Whether every non-blank line after the first is a JSON object on its own: a JSON Lines file
    whose first line is broken, which ``--keep_going`` answers line by line (a broken list written
    over several lines has lines that are not, such as ``{...},``)."""
    rest = [line for line in text.lstrip().split("\n")[1:] if line.strip()]
    return bool(rest) and all(one_json_value(line) and line.lstrip().startswith("{") for line in rest)


class _Unreadable:
    """A ``--jobs`` line that is not JSON, kept (with ``--keep_going``) to be answered by its reason."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _line_value(line: str, where: str, source: str, keep_going: bool, prog: str = PROG) -> object:
    """The JSON value of one ``--jobs`` line; exits 2 naming it when it has none, or with
    ``keep_going`` gives an :class:`_Unreadable` that says why."""
    if not keep_going:
        return parse_json(line, f"--jobs {source!r} {where}", prog)
    value, reason = json_or_reason(line)
    return value if reason is None else _Unreadable(reason)


def _joined(reason: str) -> str:
    """A reason after a job's location: one that says how it joins (`` is not ...``, ``: ...``, as
    :func:`json_or_reason` gives them) as it is, any other (a job's refusal) after a colon."""
    return reason if reason.startswith((" ", ":")) else f": {reason}"
