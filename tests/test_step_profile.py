"""``benchmarks/hlo_sources.py`` and ``benchmarks/step_profile.py``: a compiled program's
instructions mapped to their Python lines, and traced time charged to them."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from benchmarks.hlo_sources import UNKNOWN, instruction_sources, parse_module
from benchmarks.step_profile import charge, main, module_name, thunk_times_us


def scaled_exponential(x: jax.Array) -> jax.Array:
    """A function whose operations the parser must find by name."""
    return jnp.exp(x) * 3.0 + 1.0


def test_compiled_instructions_name_the_function_that_traced_them() -> None:
    """The fusion that computes ``scaled_exponential`` is charged to its lines in this file, and
    every location the parser resolves names a file, a function and a line."""
    text = jax.jit(scaled_exponential).lower(jnp.zeros((64,), jnp.float32)).compile().as_text()
    sources = instruction_sources(parse_module(text))
    located = [loc for _, counts in sources.values() for loc in counts if loc != UNKNOWN]
    assert any("test_step_profile.py:scaled_exponential:" in loc for loc in located), sources
    for location in located:
        file, function, line = location.rsplit(":", 2)
        assert file and function and int(line) > 0


def test_time_is_split_over_an_instructions_locations_and_control_flow_is_not_charged() -> None:
    """A fusion of three operations on two lines gives each line its share; a while loop's own time
    is left out (its body's thunks carry it); an instruction missing from the module is kept apart."""
    sources = {
        "fusion.1": ("fusion", Counter({"/x/env/a.py:f:3": 2, "/x/env/b.py:g:7": 1})),
        "while.2": ("while", Counter({"/x/env/a.py:f:9": 1})),
        "copy.3": ("copy", Counter({UNKNOWN: 1})),
    }
    times = Counter({"fusion.1": 30.0, "while.2": 1000.0, "copy.3": 5.0, "gone.4": 2.0})
    by = charge(times, sources)
    assert by["line"] == Counter(
        {"/x/env/a.py:f:3": 20.0, "/x/env/b.py:g:7": 10.0, UNKNOWN: 5.0, "(not in the module)": 2.0}
    )
    assert by["function"]["/x/env/a.py:f"] == 20.0
    assert by["file"]["/x/env/b.py"] == 10.0
    assert sum(by["instruction"].values()) == 37.0
    assert "while.2 (while)" not in by["instruction"]


def test_locations_are_shown_from_the_repository_wherever_it_was_checked_out() -> None:
    from benchmarks.step_profile import REPO_ROOT, short_location

    assert short_location(f"{REPO_ROOT}/slamorl_jax/env/forecast.py:f:3") == "slamorl_jax/env/forecast.py:f:3"
    assert short_location("/elsewhere/repo/benchmarks/x.py:g:1") == "benchmarks/x.py:g:1"
    assert short_location("/usr/lib/jax/_src/numpy.py:h:2") == "/usr/lib/jax/_src/numpy.py:h:2"


def test_trace_events_are_summed_per_instruction_of_the_module(tmp_path: Path) -> None:
    """Complete events of the named module are summed by ``hlo_op``; other modules, other phases
    and events without an op are ignored."""
    events = [
        {"ph": "X", "dur": 4.0, "name": "f", "args": {"hlo_module": "jit_rollout", "hlo_op": "f"}},
        {"ph": "X", "dur": 6.0, "name": "f", "args": {"hlo_module": "jit_rollout", "hlo_op": "f"}},
        {"ph": "X", "dur": 9.0, "name": "f", "args": {"hlo_module": "jit_other", "hlo_op": "f"}},
        {"ph": "B", "dur": 9.0, "name": "g", "args": {"hlo_module": "jit_rollout", "hlo_op": "g"}},
        {"ph": "X", "dur": 9.0, "name": "h", "args": {"hlo_module": "jit_rollout"}},
    ]
    events.append(  # a GPU kernel run from a command buffer: charged to the kernel's own name
        {
            "ph": "X",
            "dur": 3.0,
            "name": "k_2",
            "args": {"hlo_module": "jit_rollout", "hlo_op": "command_buffer_1"},
        }
    )
    trace = tmp_path / "host.trace.json.gz"
    with gzip.open(trace, "wt") as stream:
        json.dump({"traceEvents": events}, stream)
    assert thunk_times_us(str(trace), "jit_rollout") == (Counter({"f": 10.0, "k_2": 3.0}), 3)


def test_the_module_name_is_read_from_the_compiled_text() -> None:
    text = jax.jit(scaled_exponential).lower(jnp.zeros((4,), jnp.float32)).compile().as_text()
    assert module_name(text) == "jit_scaled_exponential"
    with pytest.raises(RuntimeError, match="HloModule"):
        module_name("ENTRY %main {}")


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--step", "scan"], "argument --step"),
        (["--program", "learner"], "argument --program"),
        (["--num-envs", "0"], "argument --num-envs"),
        (["--out", "profile.txt"], "--out must end in .json"),
        (["--program", "train", "--steps", "3"], "--steps cannot be given"),
    ],
)
def test_bad_flags_exit_2_with_one_line(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Bad flags stop before anything is compiled: exit 2 and a one-line message naming the flag
    (with an --out of its own: the committed default report is refused, one line too, whatever the
    flags)."""
    out = [] if "--out" in argv else ["--out", str(tmp_path / "profile.json")]
    with pytest.raises(SystemExit) as info:
        main([*argv, *out])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and named in err[0], err


def test_another_backend_is_refused_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The profile reads XLA:CPU's thunks or XLA:GPU's kernels: on another backend it stops with
    exit 2 and one line saying how to run it, before compiling anything."""
    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
    with pytest.raises(SystemExit) as info:
        main(["--out", str(tmp_path / "profile.json")])
    assert not (tmp_path / "profile.json").exists()
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "JAX_PLATFORMS=cpu" in err[0]
