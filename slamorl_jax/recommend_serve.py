"""``python -m slamorl_jax.recommend --serve``: answer jobs as they arrive, in one warm process.

A platform that asks once per job and epoch pays a new process each time (imports, loading the
policy, compiling: seconds). ``--serve`` loads the policy once and reads standard input line by line:
each non-blank line is one job (the JSON object ``--job`` reads) and gets one line of JSON back at
once (flushed), in order: the answer ``--job`` prints, or ``{"line": N, "error": "..."}`` for a line
it cannot answer (bad JSON, a bad job, a job the policy's cluster cannot hold), after which it goes
on with the next line. Every answer carries its input ``line``. It ends at the end of input, exit 0.
The first job compiles (a second or two, and again for a job whose runs need a longer padded length,
``live_encoding.runs_length``); later ones take milliseconds.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, TextIO

from slamorl_jax.cli_args import first_line
from slamorl_jax.json_input import json_kind, json_or_reason

if TYPE_CHECKING:
    from slamorl_jax.policy_checkpoint import LoadedPolicy

MAX_ERROR_CHARS = 1000
#: What a byte that is not UTF-8 becomes on the way in (``recommend.serve_stdin``): a lone surrogate,
#: which no UTF-8 text holds (a real U+FFFD in a line is text like any other).
ESCAPED_BYTES = re.compile("[\udc80-\udcff]")


def answer_line(policy: LoadedPolicy, line: str, brief: bool = False) -> dict:
    """The answer for one job line (``recommend``'s JSON form); ``ValueError`` (or ``RecursionError``
    for absurd nesting) when the line is not a job the policy can answer."""
    from slamorl_jax.live import recommend
    from slamorl_jax.live_job import LiveJob

    if ESCAPED_BYTES.search(line):  # standard input is decoded with errors="surrogateescape"
        raise ValueError("the line is not UTF-8 text")
    data, reason = json_or_reason(line.strip())
    if reason is not None:  # worded as --job words it, not as Python's parser does
        raise ValueError(f"the line{reason}")
    if not isinstance(data, dict):
        raise ValueError(f"a line must be one JSON object (a job), got {json_kind(data)}")
    return recommend(policy, LiveJob.from_dict(data)).as_dict(brief)


def serve(policy: LoadedPolicy, lines: Iterable[str], out: TextIO, brief: bool = False) -> int:
    """Answer every non-blank line of ``lines`` on ``out``, one JSON line each (``Recommendation.as_dict``
    with ``brief``), flushed at once (module docstring); the exit status, 0."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            answer = {"line": number, **answer_line(policy, line, brief)}
        except (ValueError, RecursionError) as err:
            answer = {"line": number, "error": first_line(err, MAX_ERROR_CHARS)}
        out.write(json.dumps(answer) + "\n")
        out.flush()
    return 0
