"""``benchmarks/sharded_step.py``'s flags: bad ones stop with one line and exit 2, before any child
process starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.sharded_step import main, to_markdown


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--devices", "0"], "argument --devices"),
        (["--devices", "two"], "argument --devices"),
        (["--num-envs", "0"], "argument --num-envs"),
        (["--out", "step.txt"], "--out must end in .json"),
    ],
)
def test_bad_flags_exit_2_with_one_line(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """One line naming the flag (with an --out of its own: the committed default report is refused,
    one line too, whatever the flags)."""
    out = [] if "--out" in argv else ["--out", str(tmp_path / "step.json")]
    with pytest.raises(SystemExit) as info:
        main([*argv, *out])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and named in err[0], err


def test_the_table_gives_each_device_count_its_ratio_and_a_failed_child_its_error() -> None:
    timing = {"steps_per_s_median": 2.0e6, "steps_per_s_best": 2.5e6}
    slower = {"steps_per_s_median": 1.6e6, "steps_per_s_best": 1.7e6}
    payload = {
        "rows": [
            {"devices": 2, "num_envs": 4096, "step_envs": timing, "vmap(step)": slower},
            {"devices": 8, "error": "ValueError: --num_envs=12 must be a multiple of the 8 devices"},
        ],
        "machine": {},
    }
    table = to_markdown(payload)
    assert "| 2 | 4,096 | 2M (2.5M) | 1.6M (1.7M) | 1.25x |" in table
    assert "failed: ValueError" in table
