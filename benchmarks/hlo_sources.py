"""Which lines of Python each instruction of a compiled XLA program came from.

``jax.jit(f).lower(...).compile().as_text()`` prints the optimised HLO module with its source tables
(``FileNames``, ``FunctionNames``, ``FileLocations``, ``StackFrames``) and a ``stack_frame_id`` in
each instruction's metadata. :func:`instruction_sources` reads them into, for every instruction of
the module (the thunks a CPU trace names), the source locations of the operations it computes: a
fusion's are those of the operations fused into it that carry a frame, an unfused instruction's (or
a fusion's whose operations carry none) its own. A location is
the innermost frame JAX recorded (the user code that traced the operation; JAX's own frames are
filtered out when it traces). ``benchmarks/step_profile.py`` uses this to charge a profiled step's
time to the functions of the env.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
# Operations that move or name data without computing: left out of a fusion's locations so its time
# is charged to what it computes.
BOOKKEEPING = frozenset(
    {"parameter", "constant", "bitcast", "broadcast", "get-tuple-element", "tuple", "reshape", "iota"}
)
# Instructions whose time is the time of the computations they run (their own thunks are traced).
CONTROL_FLOW = frozenset({"while", "conditional", "call"})
UNKNOWN = "(no source)"

_COMPUTATION = re.compile(r"^(?:ENTRY )?%(\S+) .*\{$")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%(\S+) = .*? ([a-z][\w\-]*)\(")
_CALLS = re.compile(r"calls=%([\w.\-]+)")
_FRAME = re.compile(r"stack_frame_id=(\d+)")
_TABLE_ROW = re.compile(r"^(\d+) (.*)$")
_FIELD = re.compile(r"(\w+)=(\d+)")


@dataclass(frozen=True)
class Instruction:
    """One HLO instruction: its opcode, the computation it calls (a fusion's body) and its frame."""

    opcode: str
    calls: str | None
    frame: int | None


@dataclass(frozen=True)
class HloModuleText:
    """A compiled module's instructions by computation, and its source tables."""

    computations: dict[str, dict[str, Instruction]]
    files: dict[int, str]
    functions: dict[int, str]
    locations: dict[int, tuple[int, int, int]]  # id -> (file id, function id, line)
    frames: dict[int, int]  # frame id -> location id

    def location(self, frame: int | None) -> str:
        """``file:function:line`` of a stack frame, or :data:`UNKNOWN`."""
        if frame is None or frame not in self.frames or self.frames[frame] not in self.locations:
            return UNKNOWN
        file_id, function_id, line = self.locations[self.frames[frame]]
        return f"{self.files.get(file_id, '?')}:{self.functions.get(function_id, '?')}:{line}"


def _unquote(text: str) -> str:
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] == '"' else text


def parse_module(text: str) -> HloModuleText:
    """Read ``text`` (a compiled module's ``as_text()``) into its instructions and source tables."""
    tables: dict[str, dict[int, str]] = {name: {} for name in TABLES}
    computations: dict[str, dict[str, Instruction]] = {}
    table: str | None = None
    current: dict[str, Instruction] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped in TABLES:
            table, current = stripped, None
            continue
        if table is not None and (row := _TABLE_ROW.match(stripped)):
            tables[table][int(row.group(1))] = row.group(2)
            continue
        table = None
        if match := _COMPUTATION.match(line):
            current = computations.setdefault(match.group(1), {})
            continue
        if current is not None and (match := _INSTRUCTION.match(line)):
            calls, frame = _CALLS.search(line), _FRAME.search(line)
            current[match.group(1)] = Instruction(
                opcode=match.group(2),
                calls=calls.group(1) if calls else None,
                frame=int(frame.group(1)) if frame else None,
            )
    locations = {}
    for key, row in tables["FileLocations"].items():
        fields = {name: int(value) for name, value in _FIELD.findall(row)}
        locations[key] = tuple(fields.get(name, 0) for name in ("file_name_id", "function_name_id", "line"))
    frames = {
        key: fields["file_location_id"]
        for key, row in tables["StackFrames"].items()
        if "file_location_id" in (fields := {name: int(v) for name, v in _FIELD.findall(row)})
    }
    return HloModuleText(
        computations=computations,
        files={k: _unquote(v) for k, v in tables["FileNames"].items()},
        functions={k: _unquote(v) for k, v in tables["FunctionNames"].items()},
        locations=locations,
        frames=frames,
    )


def instruction_sources(module: HloModuleText) -> dict[str, tuple[str, Counter[str]]]:
    """For every instruction of ``module`` by name: ``(opcode, locations)``, where ``locations``
    counts the source locations of the operations it computes (module docstring)."""
    sources = {}
    for instructions in module.computations.values():
        for name, instruction in instructions.items():
            counts: Counter[str] = Counter()
            body = module.computations.get(instruction.calls or "", {})
            if instruction.opcode == "fusion" and body:
                counts.update(
                    module.location(op.frame)
                    for op in body.values()
                    if op.opcode not in BOOKKEEPING and op.frame is not None
                )
            if not counts:
                counts[module.location(instruction.frame)] += 1
            sources[name] = (instruction.opcode, counts)
    return sources
