"""History stores (``slamorl_jax.history``): nearest match on a tiny hand-made store, JSON/CSV, bad files."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cli_harness import assert_refused, call

from slamorl_jax.env.catalog import gpu_type_index, load_catalog, workload_index
from slamorl_jax.env.job_env import JobAllocationEnv
from slamorl_jax.env.scenarios import scenario_params
from slamorl_jax.history import (
    FEATURE_WEIGHTS,
    HistoryRecord,
    HistoryStart,
    load_records,
    nearest_record,
    save_records,
    table_from_records,
)
from slamorl_jax.history import __main__ as history_cli
from slamorl_jax.history.build import records_from_states

WORKLOAD = "imagenet-resnet50"
OTHER_WORKLOAD = "cifar10-resnet18-gavel"


def record(**changes: object) -> HistoryRecord:
    """A record of the query job below, changed by ``changes``."""
    fields = dict(
        workload=WORKLOAD,
        gpu_type="T4",
        epochs=60,
        deadline_s=90_000.0,
        budget_usd=80.0,
        preference=(0.6, 0.2, 0.2),
        best_gpus=4,
        best_cpus=16,
    )
    return HistoryRecord(**{**fields, **changes})


# Index 2 differs from the query only in a slightly looser deadline; every other record matches it
# exactly on the numbers but differs in workload or GPU type, or is far off on preference.
TINY_STORE = (
    record(workload=OTHER_WORKLOAD, best_gpus=1),
    record(gpu_type="V100", best_gpus=2),
    record(deadline_s=99_000.0, best_gpus=8, best_cpus=32),
    record(preference=(0.0, 1.0, 0.0), best_gpus=1, best_cpus=4),
)


def query_state(epochs: int = 60, deadline_s: float = 90_000.0) -> tuple[object, object]:
    """A fresh job changed into the query job (one state), and the params."""
    params = scenario_params("balanced")
    _, state = jax.jit(JobAllocationEnv().reset)(jax.random.key(0), params)
    job = state.job.replace(
        workload=jnp.int32(workload_index(WORKLOAD)),
        gpu_type=jnp.int32(gpu_type_index("T4")),
        epochs=jnp.int32(epochs),
        preference=jnp.asarray([0.6, 0.2, 0.2], jnp.float32),
        sla_targets=state.job.sla_targets.replace(
            deadline_s=jnp.float32(deadline_s), budget_usd=jnp.float32(80.0)
        ),
    )
    return state.replace(job=job), params


def test_lookup_returns_the_known_nearest_record() -> None:
    state, params = query_state()
    table = table_from_records(TINY_STORE)
    index, distance = jax.jit(nearest_record)(table, state, params)
    assert int(index) == 2
    # Only the deadline slack differs: log(99000 / 90000), weight 1.
    np.testing.assert_allclose(float(distance), FEATURE_WEIGHTS[1] * np.log(99_000 / 90_000), rtol=1e-4)
    gpus, cpus = jax.jit(HistoryStart.from_records(TINY_STORE))(state, params)
    assert (int(gpus), int(cpus)) == (8, 32)
    # Jobs of a workload the store lacks still get the nearest record of another.
    only_other = table_from_records(TINY_STORE[:1])
    assert int(nearest_record(only_other, state, params)[0]) == 0


def test_the_jobs_gpu_type_wins_over_any_feature_distance() -> None:
    """A record of the job's workload and GPU type is chosen over one of another type however much
    closer the other's figures: the +10 penalty alone lost to two slacks 1e7 s and $1e5 away."""
    state, params = query_state()
    same_type = HistoryRecord(WORKLOAD, "T4", 60, 1e7, 1e5, (0.6, 0.2, 0.2), 16, 64)
    other_type = HistoryRecord(WORKLOAD, "K80", 60, 99_000.0, 80.0, (0.6, 0.2, 0.2), 2, 8)
    table = table_from_records([other_type, same_type])
    index, distance = nearest_record(table, state, params)
    assert int(index) == 1 and float(distance) > 10.0  # farther than the other type's record


def test_lookup_vmaps_over_jobs() -> None:
    state, params = query_state()
    batch = jax.tree.map(lambda x: jnp.stack([x, x]), state)
    batch = batch.replace(
        job=batch.job.replace(preference=jnp.asarray([[0.6, 0.2, 0.2], [0.0, 1.0, 0.0]], jnp.float32))
    )
    start = HistoryStart.from_records(TINY_STORE)
    gpus, cpus = jax.jit(jax.vmap(start, in_axes=(0, None)))(batch, params)
    assert gpus.tolist() == [8, 1] and cpus.tolist() == [32, 4]


def test_json_and_csv_round_trip(tmp_path: Path) -> None:
    for name in ("store.json", "store.csv"):
        save_records(TINY_STORE, tmp_path / name)
        loaded = load_records(tmp_path / name)
        assert len(loaded) == len(TINY_STORE)
        for a, b in zip(loaded, TINY_STORE, strict=True):
            # every field as saved (budget_usd and best_cpus were not compared), the preference's
            # weights to the six decimals they are written with
            assert dataclasses.replace(a, preference=b.preference) == b, name
            np.testing.assert_allclose(a.preference, b.preference, atol=1e-6)
    (tmp_path / "names.csv").write_text(
        "workload,gpu_type,epochs,deadline_s,budget_usd,preference,best_gpus,best_cpus\n"
        f"{WORKLOAD},T4,60,90000,80,time,4,16\n"
    )
    assert load_records(tmp_path / "names.csv")[0].preference[0] == pytest.approx(0.6)


GOOD = json.loads(json.dumps(record().as_dict()))
BAD_STORES = {
    "missing.json": None,
    "store.txt": json.dumps({"records": [GOOD]}),
    "notjson.json": "{records: oops",
    "empty.json": json.dumps({"records": []}),
    "nolist.json": json.dumps({"rows": [GOOD]}),
    "workload.json": json.dumps([{**GOOD, "workload": "gpt-9"}]),
    "missing_field.json": json.dumps([{k: v for k, v in GOOD.items() if k != "best_gpus"}]),
    "extra_field.json": json.dumps([{**GOOD, "colour": "red"}]),
    "zero_gpus.json": json.dumps([{**GOOD, "best_gpus": 0}]),
    "nan_budget.json": json.dumps([{**GOOD, "budget_usd": "nan"}]),
    "preference.json": json.dumps([{**GOOD, "preference": [1, -1, 0]}]),
    "header.csv": "workload,gpu_type\nx,y\n",
    "short_row.csv": "workload,gpu_type,epochs,deadline_s,budget_usd,preference,best_gpus,best_cpus\n"
    f"{WORKLOAD},T4,60\n",
}


@pytest.mark.parametrize("name", list(BAD_STORES))
def test_bad_stores_are_refused_with_one_line(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    if BAD_STORES[name] is not None:
        (tmp_path / name).write_text(BAD_STORES[name])
    with pytest.raises(ValueError) as err:
        load_records(tmp_path / name)
    assert "\n" not in str(err.value) and name in str(err.value)
    monkeypatch.chdir(tmp_path)
    outcome = call(lambda: history_cli.main(["check", f"--store={name}"]), capsys, tmp_path)
    assert_refused(outcome, name)


CSV_HEADER = "workload,gpu_type,epochs,deadline_s,budget_usd,preference,best_gpus,best_cpus\n"
# Stores whose one bad record holds an allocation outside the default cluster (16 GPUs a job, 48 CPUs
# a node, CPU step 4), and what ``check``'s one line must name: the record and the field.
OUTSIDE_THE_CLUSTER = {
    "gpus.json": (json.dumps([GOOD, {**GOOD, "best_gpus": 1000}]), ["record 1", "best_gpus", "1000 GPUs"]),
    "cpus.json": (json.dumps([{**GOOD, "best_cpus": 100_000}]), ["record 0", "best_cpus", "100000 CPUs"]),
    "off_step.json": (json.dumps([{**GOOD, "best_cpus": 18}]), ["record 0", "best_cpus", "CPU step"]),
    "gpus.csv": (CSV_HEADER + f"{WORKLOAD},T4,60,90000,80,time,64,16\n", ["line 2", "best_gpus", "64 GPUs"]),
}


@pytest.mark.parametrize("name", list(OUTSIDE_THE_CLUSTER))
def test_check_refuses_records_outside_the_cluster(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, phrases = OUTSIDE_THE_CLUSTER[name]
    (tmp_path / name).write_text(text)
    outcome = call(lambda: history_cli.main(["check", f"--store={tmp_path / name}"]), capsys, tmp_path)
    assert_refused(outcome, name, *phrases)


def test_build_refuses_an_unusable_out_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A name the filesystem cannot hold, or one ending in a slash, is one line and exit 2, before the
    checkpoint is read."""
    out = tmp_path / ("n" * 300 + ".json")
    outcome = call(
        lambda: history_cli.main(["build", f"--out={out}", "--checkpoint=no/such/run", "--jobs=2"]),
        capsys,
        tmp_path,
    )
    assert_refused(outcome, "--out", "not a usable path: File name too long")
    for command in ("build", "ingest"):  # a trailing slash names a folder (pathlib would drop it)
        argv = [command, f"--out={tmp_path / 'store.json'}/", "--checkpoint=no/such/run", "--jobs=2"]
        outcome = call(lambda argv=argv: history_cli.main(argv), capsys, tmp_path)
        assert_refused(outcome, "--out", "names a folder: give a file name")
    outcome = call(lambda: history_cli.main(["build", "--out=store.txt", "--jobs=2"]), capsys, tmp_path)
    assert_refused(outcome, "--out 'store.txt': must end in .json or .csv")  # the path as written
    assert list(tmp_path.iterdir()) == []


def test_check_summarises_a_good_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    save_records(TINY_STORE, tmp_path / "store.json")
    outcome = call(
        lambda: history_cli.main(["check", f"--store={tmp_path / 'store.json'}"]), capsys, tmp_path
    )
    assert outcome.code == 0, outcome.report()
    summary = json.loads(outcome.stdout)
    assert summary["records"] == len(TINY_STORE)
    assert set(summary["workloads"]) == {WORKLOAD, OTHER_WORKLOAD}
    assert load_catalog().workload_names  # the names in a summary are catalogue names


def test_build_keeps_an_existing_store_unless_told_to_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``build --out`` onto an existing file exits 2 with one line and leaves the file as it was
    (refused before any job is simulated); ``--overwrite`` is how to replace it."""
    store = tmp_path / "store.json"
    store.write_text("keep me\n")
    outcome = call(lambda: history_cli.main(["build", f"--out={store}", "--jobs=2"]), capsys, tmp_path)
    assert_refused(outcome, "already exists", "--overwrite")
    assert store.read_text() == "keep me\n"


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc, a folder no one can write")
def test_build_refuses_an_out_in_a_folder_it_cannot_write_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The folder exists but takes no new file (``/proc``: even root cannot write there): one line,
    exit 2, before the checkpoint is read (it was found after every job was simulated)."""
    argv = ["build", "--out=/proc/store.json", "--checkpoint=no/such/run", "--jobs=2"]
    assert_refused(call(lambda: history_cli.main(argv), capsys, tmp_path), "--out", "/proc/store.json")


@pytest.mark.parametrize("name", ["store.json", "store.csv"])
def test_a_failed_store_write_leaves_the_old_store_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """A write that fails part way (a full disk) used to leave a cut-short store, the old one lost
    under ``--overwrite``: the store is written to a temporary file and renamed, so the old one stays
    and no temporary file is left."""
    import slamorl_jax.atomic_files as atomic_files

    store = tmp_path / name
    save_records(TINY_STORE[:1], store)
    before = store.read_bytes()

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic_files.os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        save_records(TINY_STORE, store)
    assert store.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == [name]
    monkeypatch.undo()
    save_records(TINY_STORE, store)
    assert len(load_records(store)) == len(TINY_STORE)


GOOD_JSON_RECORD = (
    '"workload": "imagenet-resnet50", "gpu_type": "T4", "epochs": 60, "deadline_s": 90000, '
    '"budget_usd": 80, "preference": "time", "best_gpus": 8, "best_cpus": 32'
)


def json_store(**changes: tuple[str, str]) -> str:
    """A one-record JSON store of :data:`GOOD_JSON_RECORD` with each ``old=new`` text swapped."""
    record = GOOD_JSON_RECORD
    for old, new in changes.values():
        record = record.replace(old, new)
    return '{"records": [{' + record + "}]}"


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        # The last of a repeated field won (the record counted as squad-bert); recommend --job refuses it.
        ('{"records": [{' + GOOD_JSON_RECORD + ', "workload": "squad-bert"}]}', "given twice"),
        (json_store(a=('"epochs": 60', '"epochs": "60"')), "epochs must be a number"),
        (json_store(a=('"time"', '"0.6;0.2;0.2"')), "preference must be"),
        (json_store(a=('"time"', '["1", "0", "0"]')), "weights must be"),
        (json_store(a=("60", "9" * 5000)), "store.json: "),
    ],
)
def test_json_stores_refuse_repeated_fields_and_numbers_as_text(
    tmp_path: Path, text: str, phrase: str
) -> None:
    store = tmp_path / "store.json"
    store.write_text(text)
    with pytest.raises(ValueError, match=phrase) as error:
        load_records(store)
    assert "\n" not in str(error.value)


def test_hand_written_csv_stores_are_read_as_meant(tmp_path: Path) -> None:
    """Spaces after commas, a trailing comma, a quoted preference with commas, old-Mac line endings and
    blank rows: the same record as the plain file."""
    plain = CSV_HEADER + f"{WORKLOAD},T4,60,90000,80,0.6;0.2;0.2,4,16\n"
    spaced = CSV_HEADER.replace(",", ", ").replace("\n", ",\n") + (
        f'\n{WORKLOAD}, T4 , 60, 90000, 80, "0.6, 0.2, 0.2", 4, 16,\n , ,\n'
    )
    stores = {"plain.csv": plain, "spaced.csv": spaced, "mac.csv": plain.replace("\n", "\r")}
    for name, text in stores.items():
        (tmp_path / name).write_text(text, newline="")
    want = load_records(tmp_path / "plain.csv")
    for name in stores:
        assert load_records(tmp_path / name) == want, name


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        ("", "is empty"),
        (" \n\n", "is empty"),
        (CSV_HEADER.replace("budget_usd,", ""), "the CSV header lacks budget_usd (its columns:"),
        (CSV_HEADER.replace("\n", ",colour\n"), 'has unknown "colour"'),
        (CSV_HEADER.replace("\n", ",epochs\n"), "repeats epochs"),
        (CSV_HEADER + f"{WORKLOAD},T4,60,90000,80,time,4,16,extra\n", "line 2: a cell under no column"),
        (CSV_HEADER.replace("\n", ",\n") + f"{WORKLOAD},T4,60,90000,80,time,4,16,x\n", "under no column"),
        (CSV_HEADER + f"{WORKLOAD},T4,60\n", "line 2: expected 8 cells, got 3"),
    ],
)
def test_a_csv_store_it_cannot_read_says_what_is_wrong(tmp_path: Path, text: str, phrase: str) -> None:
    (tmp_path / "store.csv").write_text(text)
    with pytest.raises(ValueError, match=re.escape(phrase)):
        load_records(tmp_path / "store.csv")


def test_a_csv_row_is_named_by_its_file_line(tmp_path: Path) -> None:
    """Blank lines used to shift the reported row (line 5 read as "row 3")."""
    store = tmp_path / "rows.csv"
    good = f"{WORKLOAD},T4,60,90000,80,time,8,32\n"
    store.write_text(CSV_HEADER + "\n" + good + "\n" + good.replace("90000", "-1"))
    with pytest.raises(ValueError, match=r"rows\.csv line 5: deadline_s"):
        load_records(store)


def test_build_keeps_an_out_file_made_while_its_jobs_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The check for an existing --out ran before the jobs only: a file made meanwhile was replaced."""
    from slamorl_jax.history import build

    out = tmp_path / "h.json"
    real = build.oracle_records

    def meanwhile(*args: object, **kwargs: object) -> object:
        out.write_text('{"mine": true}\n')
        return real(*args, **kwargs)

    monkeypatch.setattr(build, "oracle_records", meanwhile)
    outcome = call(lambda: history_cli.main(["build", f"--out={out}", "--jobs=4"]), capsys, tmp_path)
    assert outcome.code == 2 and "was created meanwhile" in outcome.stderr, outcome.report()
    assert out.read_text() == '{"mine": true}\n' and sorted(p.name for p in tmp_path.iterdir()) == ["h.json"]


def test_a_decision_log_splits_lines_at_newlines_only() -> None:
    """``splitlines`` also split at \\x1c inside a line: two decisions on line 1 were accepted and a
    bad one on line 2 was named line 3."""
    from slamorl_jax.history.decisions import decisions_from_text

    first = (Path(__file__).resolve().parent.parent / "docs" / "example_decisions.jsonl").read_text()
    first = first.splitlines()[0]
    with pytest.raises(ValueError, match=r"log\.jsonl is not valid JSON: Extra data \(log line 1"):
        decisions_from_text(first + "\x1c" + first + "\n" + first, "log.jsonl", lines=True)
    assert len(decisions_from_text(first + "\r\n" + first + "\n", "log.jsonl", lines=True)) == 2


def test_records_from_states_refuses_what_a_store_could_not_hold() -> None:
    env = JobAllocationEnv()
    params = env.default_params
    reset = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))  # one program, not one per operation
    _, states = reset(jax.random.split(jax.random.PRNGKey(0), 3), params)
    records = records_from_states(states, jnp.array([1, 2, 4]), jnp.array([4, 8, 16]))
    assert [(r.best_gpus, r.best_cpus) for r in records] == [(1, 4), (2, 8), (4, 16)]
    with pytest.raises(ValueError, match=re.escape("job 1: best_gpus must be a whole number from 1")):
        records_from_states(states, jnp.array([1, 0, 4]), jnp.array([4, 8, 16]))
    with pytest.raises(ValueError, match=re.escape("one count per job (3,), got (2,)")):
        records_from_states(states, jnp.array([1, 2]), jnp.array([4, 8, 16]))
