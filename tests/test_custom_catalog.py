"""A run on a catalogue of one's own (``train --catalog``): the checkpoint carries it, so the policy,
its export, ``--resume``, ``recommend`` and ``history build`` use its workloads and prices wherever
the file is; bad catalogue files are refused in one line.

The catalogue here is the shipped one with its workloads renamed and its GPU prices halved:
the same shapes, so the run reuses TINY's compiled update from the suite's cache.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import signal
from pathlib import Path

import numpy as np
import pytest
from cli_harness import TRAIN_ERROR, assert_refused, call
from learner_fixtures import TINY, cli_flags, shared_trainer, train_tiny
from test_train_cli import stop_after_first_chunk, train_in_process

from slamorl_jax import recommend, train, train_flags, training_loop
from slamorl_jax.agent.trainer import env_params_from_config
from slamorl_jax.checkpoint import CheckpointError
from slamorl_jax.checkpoint_catalog import CATALOG_KEY, catalog_meta, stored_catalog
from slamorl_jax.env import default_params
from slamorl_jax.env.catalog import CATALOG_PATH, is_shipped, load_catalog, parse_catalog
from slamorl_jax.evaluation.suite import check_compared_policies
from slamorl_jax.history import __main__ as history_cli
from slamorl_jax.history.records import HistoryRecord, save_records
from slamorl_jax.live import recommend_many
from slamorl_jax.live_job import LiveJob
from slamorl_jax.policy_checkpoint import export_policy, load_policy, save_policy

REPO = Path(__file__).resolve().parent.parent
SHIPPED = REPO / "checkpoints" / "default"
EXAMPLE_JOB = REPO / "docs" / "example_job.json"
OURS = "our-cifar10-resnet18"  # the first workload, renamed as every other is


def own_catalog_raw() -> dict:
    """The shipped catalogue with every workload renamed (``our-`` before its name) and every GPU
    price halved."""
    raw = json.loads(CATALOG_PATH.read_text())
    raw["workloads"] = [{**w, "name": f"our-{w['name']}"} for w in raw["workloads"]]
    raw["prices"] = {**raw["prices"], "gpu_hour": {k: v / 2 for k, v in raw["prices"]["gpu_hour"].items()}}
    return raw


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """TINY trained on its own catalogue: (the run folder, the catalogue file, removed afterwards)."""
    shared_trainer(TINY)  # compiled once for the suite; the run loads it from the cache
    root = tmp_path_factory.mktemp("own_catalog")
    catalog_file = root / "ours.json"
    catalog_file.write_text(json.dumps(own_catalog_raw()))
    run_dir = root / "run"
    train_tiny([f"--catalog={catalog_file}", f"--run_dir={run_dir}"])
    return run_dir, catalog_file


def test_the_run_carries_its_catalogue_and_its_policy_runs_on_it_wherever_loaded(
    trained: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir, catalog_file = trained
    policy = load_policy(run_dir / "checkpoints")
    assert policy.config.catalog == str(catalog_file)  # recorded absolute
    assert policy.catalog.workload_names[0] == OURS and not is_shipped(policy.catalog)
    shipped = default_params()
    np.testing.assert_allclose(
        policy.env_params.gpu_price_per_hour, shipped.gpu_price_per_hour / 2, rtol=1e-6
    )

    # The export carries it too, and neither needs the file any more.
    exported = tmp_path / "exported"
    export_policy(run_dir / "checkpoints", exported)
    moved = tmp_path / "ours.json"
    shutil.move(catalog_file, moved)
    try:
        again = load_policy(exported)
        assert again.catalog.workload_names == policy.catalog.workload_names
        job_file = tmp_path / "job.json"
        job_file.write_text(json.dumps({**json.loads(EXAMPLE_JOB.read_text()), "workload": OURS}))
        answered = call(
            lambda: recommend.main([f"--checkpoint={exported}", f"--job={job_file}", "--brief"]),
            capsys,
            tmp_path,
        )
        assert answered.code == 0 and json.loads(answered.stdout)["gpus"] >= 1, answered.report()
        # The shipped policy does not know the name, and says which it knows.
        refused = call(
            lambda: recommend.main([f"--checkpoint={SHIPPED}", f"--job={job_file}"]), capsys, tmp_path
        )
        assert_refused(refused, f"unknown workload '{OURS}'", "cifar10-resnet18")

        # --resume reads the copy its checkpoint carries, not the (moved) file.
        resumed = train_in_process(["--resume", f"--run_dir={run_dir}"], capsys, tmp_path)
        assert resumed.code == 0 and "nothing to train" in resumed.stderr, resumed.report()
        # Named at its new path it is the run's catalogue still; another catalogue is not.
        again = train_in_process(["--resume", f"--run_dir={run_dir}", f"--catalog={moved}"], capsys, tmp_path)
        assert again.code == 0 and "nothing to train" in again.stderr, again.report()
        other = train_in_process(
            ["--resume", f"--run_dir={run_dir}", f"--catalog={CATALOG_PATH}"], capsys, tmp_path
        )
        assert_refused(other, "--resume: flags differ from the checkpoint's config: catalog")
    finally:
        shutil.move(moved, catalog_file)


def test_a_run_started_from_its_policy_on_another_catalogue_says_so(
    trained: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fine-tuning in another world is allowed, but a run continued with ``--init_from`` and without
    its ``--catalog`` would otherwise move to the shipped catalogue unnoticed."""
    run_dir, catalog_file = trained
    start = [
        *cli_flags(TINY),
        f"--init_from={run_dir / 'checkpoints'}",
        "--total_timesteps=512",
        "--eval_episodes=0",
    ]
    moved = train_in_process([*start, f"--run_dir={tmp_path / 'shipped'}"], capsys, tmp_path)
    assert moved.code == 0, moved.report()
    note = f"note: --init_from's policy was trained on another catalogue (--catalog={catalog_file}); this run"
    assert f"{note} trains on the shipped catalogue" in moved.stderr, moved.report()
    kept = train_in_process(
        [*start, f"--catalog={catalog_file}", f"--run_dir={tmp_path / 'kept'}"], capsys, tmp_path
    )
    assert kept.code == 0 and "another catalogue" not in kept.stderr, kept.report()
    assert load_policy(tmp_path / "kept" / "checkpoints").catalog.workload_names[0] == OURS


def test_history_stores_of_its_jobs_are_built_and_checked_in_its_catalogue(
    trained: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir, _ = trained
    checkpoint = f"--checkpoint={run_dir / 'checkpoints'}"
    store = tmp_path / "store.json"
    build = ["build", checkpoint, f"--out={store}", "--jobs=8"]
    built = call(lambda: history_cli.main(build), capsys, tmp_path)
    assert built.code == 0, built.report()
    checked = call(lambda: history_cli.main(["check", f"--store={store}", checkpoint]), capsys, tmp_path)
    assert checked.code == 0, checked.report()
    assert all(name.startswith("our-") for name in json.loads(checked.stdout)["workloads"])
    # Without the policy the names are the shipped catalogue's, which lacks them.
    refused = call(lambda: history_cli.main(["check", f"--store={store}"]), capsys, tmp_path)
    assert_refused(refused, "unknown workload 'our-")


NEW_OURS = {  # a job of the renamed catalogue before its first epoch
    "workload": OURS,
    "gpu_type": "T4",
    "gpus": 4,
    "cpus": 32,
    "epochs_done": 0,
    "epochs_total": 60,
    "deadline_s": 90_000.0,
    "budget_usd": 80.0,
}
WITHOUT_SLAS = {k: v for k, v in NEW_OURS.items() if k not in ("deadline_s", "budget_usd")}


@pytest.mark.parametrize(
    ("job", "flags", "source"),
    [
        (NEW_OURS, ["--probe_plan"], "probe_plan"),
        (NEW_OURS, ["--forecast_start"], "forecast"),
        (WITHOUT_SLAS, ["--suggest_slas"], "forecast_slas"),
        (NEW_OURS, ["--history=store.json"], "history"),
    ],
)
def test_every_new_job_answer_reads_the_job_in_the_policys_catalogue(
    job: dict,
    flags: list[str],
    source: str,
    trained: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run_dir, _ = trained
    policy = load_policy(run_dir / "checkpoints")
    record = HistoryRecord(OURS, "T4", 60, 90_000.0, 80.0, (0.6, 0.2, 0.2), 8, 32)
    save_records([record], tmp_path / "store.json", catalog=policy.catalog)
    (tmp_path / "job.json").write_text(json.dumps(job))
    argv = [f"--checkpoint={run_dir / 'checkpoints'}", f"--job={tmp_path / 'job.json'}", *flags]
    argv = [flag.replace("store.json", str(tmp_path / "store.json")) for flag in argv]
    outcome = call(lambda: recommend.main(argv), capsys, tmp_path)
    assert outcome.code == 0 and json.loads(outcome.stdout)["source"] == source, outcome.report()


def test_keep_going_answers_the_policys_names_and_refuses_others_by_line(
    trained: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir, _ = trained
    running = {**json.loads(EXAMPLE_JOB.read_text()), "workload": OURS}
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(f"{json.dumps(running)}\n{json.dumps({**running, 'workload': 'cifar10-resnet18'})}\n")
    argv = [f"--checkpoint={run_dir / 'checkpoints'}", f"--jobs={jobs}", "--keep_going", "--brief"]
    outcome = call(lambda: recommend.main(argv), capsys, tmp_path)
    answered, refused = (json.loads(line) for line in outcome.stdout.splitlines())
    assert outcome.code == 2 and "gpus" in answered, outcome.report()
    assert refused["at"] == "line 2" and "unknown workload 'cifar10-resnet18'" in refused["error"]


def test_a_resumed_run_trains_on_and_saves_the_catalogue_it_carries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Stopped after its first chunk, the run resumes with its file gone: the steps it saves then
    still carry the catalogue."""
    catalog_file = tmp_path / "ours.json"
    catalog_file.write_text(json.dumps(own_catalog_raw()))
    run_dir = tmp_path / "run"
    real_summarise = training_loop.summarise
    stop_after_first_chunk(monkeypatch, signal.SIGTERM)
    args = [*cli_flags(TINY), f"--catalog={catalog_file}", f"--run_dir={run_dir}", "--eval_episodes=0"]
    stopped = train_in_process(args, capsys, tmp_path)
    assert stopped.code == 128 + signal.SIGTERM, stopped.report()
    monkeypatch.setattr(training_loop, "summarise", real_summarise)
    catalog_file.unlink()
    resumed = train_in_process(["--resume", f"--run_dir={run_dir}"], capsys, tmp_path)
    assert resumed.code == 0 and "resume: from update" in resumed.stderr, resumed.report()
    policy = load_policy(run_dir / "checkpoints")
    assert policy.step == TINY.num_updates and policy.catalog.workload_names[0] == OURS


def test_ingest_records_finished_jobs_in_the_policys_catalogue(
    trained: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir, _ = trained
    finished = {**json.loads(EXAMPLE_JOB.read_text()), "workload": OURS, "epochs_total": 10}
    (tmp_path / "done.jsonl").write_text(json.dumps(finished) + "\n")
    store = tmp_path / "store.json"
    argv = ["ingest", f"--jobs={tmp_path / 'done.jsonl'}", f"--out={store}"]
    assert_refused(call(lambda: history_cli.main(argv), capsys, tmp_path), f"unknown workload '{OURS}'")
    ingested = call(
        lambda: history_cli.main([*argv, f"--checkpoint={run_dir / 'checkpoints'}"]), capsys, tmp_path
    )
    assert ingested.code == 0, ingested.report()
    assert [r["workload"] for r in json.loads(store.read_text())["records"]] == [OURS]


def test_params_of_another_catalogue_of_the_same_size_are_noted_first() -> None:
    """Params built on the shipped catalogue with its workloads in reverse order read the README job
    (imagenet-resnet50) as pong-a3c, silently: 1 GPU x 4 CPUs, with notes blaming the job's epochs.
    The policy's own params, or params rebuilt on its catalogue, get no such note."""
    from slamorl_jax.live import recommend

    policy = load_policy(SHIPPED)
    job = LiveJob.from_dict(json.loads(EXAMPLE_JOB.read_text()))
    raw = json.loads(CATALOG_PATH.read_text())
    reversed_params = default_params(parse_catalog({**raw, "workloads": raw["workloads"][::-1]}))
    notes = recommend(policy, job, reversed_params).outside_training
    assert notes[0].startswith(f"params' figures for {job.workload} on {job.gpu_type} (samples_per_epoch"), (
        notes
    )
    assert "differ from the policy's catalogue's: edited, or built on another catalogue" in notes[0]
    for params in (None, policy.env_params, default_params(policy.catalog)):
        assert not any("params' figures" in n for n in recommend(policy, job, params).outside_training)


def test_a_catalogue_file_written_again_is_read_again(tmp_path: Path) -> None:
    """``load_catalog`` was cached by the path alone: a file edited in a notebook kept giving its
    old values. Unchanged, it is the same object; written again, it is read anew."""
    path = tmp_path / "ours.json"
    path.write_text(json.dumps(own_catalog_raw()))
    first = load_catalog(str(path))
    assert load_catalog(str(path)) is first and load_catalog(path) is first
    text = path.read_text()
    gamma = f'"gamma": {own_catalog_raw()["workloads"][0]["gamma"]}'
    edited = text.replace(gamma, gamma.replace('"gamma": 2.', '"gamma": 1.'), 1)  # the same size
    assert len(edited) == len(text) and edited != text
    path.write_text(edited)  # at once: within the file system's time step, as a program may
    assert load_catalog(str(path)).gamma[0] == pytest.approx(first.gamma[0] - 1.0)
    with pytest.raises(TypeError, match="load_catalog takes a file path, got dict"):
        load_catalog(own_catalog_raw())


def test_a_catalogue_of_other_size_answers_jobs_by_its_own_names() -> None:
    """A policy on a catalogue of five workloads (its table five rows, not thirteen) reads a job of
    its fifth in its own indices."""
    raw = own_catalog_raw()
    five = parse_catalog({**raw, "workloads": raw["workloads"][:5]})
    policy = dataclasses.replace(load_policy(SHIPPED), catalog=five)
    job = LiveJob.from_dict({**json.loads(EXAMPLE_JOB.read_text()), "workload": five.workload_names[4]})
    (answer,) = recommend_many(policy, [job])
    assert answer.gpus >= 1 and int(np.shape(policy.env_params.workloads.gamma)[0]) == 5
    with pytest.raises(ValueError, match="unknown workload 'cifar10-resnet18'"):
        recommend_many(policy, [dataclasses.replace(job, workload="cifar10-resnet18")])


@pytest.mark.slow
def test_imitate_like_a_policy_pretrains_in_its_catalogue(
    trained: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from slamorl_jax import imitate

    run_dir, _ = trained
    argv = [f"--like={run_dir / 'checkpoints'}", "--oracle_jobs=8", "--steps=2", f"--out={tmp_path / 'p'}"]
    outcome = call(lambda: imitate.main(argv), capsys, tmp_path)
    assert outcome.code == 0, outcome.report()
    assert load_policy(tmp_path / "p").catalog.workload_names[0] == OURS


def test_the_shipped_catalogue_is_not_copied_into_checkpoints(tmp_path: Path) -> None:
    """A copy of the shipped file counts as the shipped one: nothing is stored, nothing changes."""
    copy = tmp_path / "copy.json"
    copy.write_text(CATALOG_PATH.read_text())
    assert catalog_meta(None) == {} and catalog_meta(load_catalog(str(copy))) == {}
    assert stored_catalog({}, tmp_path) is load_catalog()
    own = parse_catalog(own_catalog_raw())
    assert stored_catalog(catalog_meta(own), tmp_path).workload_names[0] == OURS


def test_a_carried_catalogue_this_version_cannot_read_is_a_checkpoint_error(tmp_path: Path) -> None:
    meta = {CATALOG_KEY: {**own_catalog_raw(), "format_version": 99}}
    with pytest.raises(CheckpointError, match=r"its catalogue cannot be read \(format_version=99"):
        stored_catalog(meta, tmp_path)


def test_save_policy_keeps_the_catalogue_given_and_needs_no_param_digests(tmp_path: Path) -> None:
    """The Python path: params built on one's own catalogue, saved with it, load and run on it."""
    own = parse_catalog(own_catalog_raw())
    template = load_policy(SHIPPED)
    params = env_params_from_config(template.config, own)
    save_policy(tmp_path / "p", template.params, template.config, env_params=params, catalog=own)
    policy = load_policy(tmp_path / "p")
    assert policy.trained_env_params is None  # its config on its catalogue builds the same params
    assert policy.catalog.workload_names[0] == OURS
    policy.check_env_params(params)
    np.testing.assert_array_equal(policy.env_params.gpu_price_per_hour, params.gpu_price_per_hour)


def test_policies_of_other_catalogues_are_not_compared_in_one_evaluation() -> None:
    policy = load_policy(SHIPPED)
    other = dataclasses.replace(policy, catalog=parse_catalog(own_catalog_raw()))
    with pytest.raises(ValueError, match="--compare ours: trained on another catalogue"):
        check_compared_policies(policy, {"ours": other})


def test_params_of_a_catalogue_with_other_workloads_are_refused() -> None:
    """The job's names are read in the policy's catalogue; params holding another table of workloads
    would index it wrongly."""
    raw = own_catalog_raw()
    fewer = parse_catalog({**raw, "workloads": raw["workloads"][:3]})
    policy = load_policy(SHIPPED)
    job = LiveJob.from_dict(json.loads(EXAMPLE_JOB.read_text()))
    with pytest.raises(ValueError, match="params hold 3 workloads, the policy's catalogue 13"):
        recommend_many(policy, [job], env_params_from_config(policy.config, fewer))


def bad_catalogue(root: Path, case: str) -> Path:
    """A ``--catalog`` file (or folder) that must be refused, by ``case``."""
    path = root / "bad.json"
    raw = own_catalog_raw()
    if case == "missing":
        return root / "none.json"
    if case == "a folder":
        path.mkdir()
    elif case == "not JSON":
        path.write_text("{workloads: ")
    elif case == "another format version":
        path.write_text(json.dumps({**raw, "format_version": 7}))
    elif case == "a workload without its fields":
        path.write_text(json.dumps({**raw, "workloads": [{"name": "x"}]}))
    elif case == "no workloads":
        path.write_text(json.dumps({**raw, "workloads": []}))
    elif case == "a workload named twice":
        path.write_text(json.dumps({**raw, "workloads": [raw["workloads"][0], *raw["workloads"]]}))
    elif case == "epochs beyond int32":
        path.write_text(json.dumps({**raw, "workloads": [{**raw["workloads"][0], "epochs_min": 1e12}]}))
    elif case == "a speed beyond float32":
        speeds = {**raw["workloads"][1]["compute_speed"], "V100": 1e300}
        workloads = [raw["workloads"][0], {**raw["workloads"][1], "compute_speed": speeds}]
        path.write_text(json.dumps({**raw, "workloads": workloads}))
    elif case == "a price not a number":
        path.write_text(json.dumps({**raw, "prices": {**raw["prices"], "vcpu_hour": float("nan")}}))
    elif case == "a boolean given as text":
        path.write_text(json.dumps({**raw, "workloads": [{**raw["workloads"][0], "data_parallel": "false"}]}))
    elif case == "a number given as a boolean":
        path.write_text(json.dumps({**raw, "workloads": [{**raw["workloads"][0], "gamma": True}]}))
    elif case == "no request mix":
        path.write_text(json.dumps({**raw, "requested_cpus_per_gpu": {"values": [], "probs": []}}))
    elif case == "request mix not a distribution":
        mix = {**raw["requested_cpus_per_gpu"], "probs": [2.0] * len(raw["requested_cpus_per_gpu"]["probs"])}
        path.write_text(json.dumps({**raw, "requested_cpus_per_gpu": mix}))
    return path


BAD_CATALOGUES = {
    "missing": "is missing",
    "a folder": "cannot read",
    "not JSON": "not JSON text",
    "another format version": "format_version=7",
    "a workload without its fields": "workload 'x' lacks",
    "no workloads": "workloads must be a non-empty list",
    "a workload named twice": "gives the workload name 'our-cifar10-resnet18' twice",
    "epochs beyond int32": "epochs_min must be numbers (our-cifar10-resnet18: 1e+12 is not an integer",
    # A NumPy overflow warning and a line holding the whole array, before.
    "a speed beyond float32": "(our-imagenet-resnet50, V100: 1e+300 is not a finite float32)",
    "a price not a number": "vcpu_hour price must be numbers (nan is not a finite float64)",
    "a boolean given as text": "data_parallel must be true or false (got text)",
    "a number given as a boolean": "workloads' gamma must be numbers (got true or false)",
    "no request mix": "requested_cpus_per_gpu values must be a non-empty list",
    "request mix not a distribution": "requested_cpus_per_gpu_probs",
}


@pytest.mark.filterwarnings("error::RuntimeWarning")  # NumPy's overflow in a cast: a second line
@pytest.mark.parametrize("case", list(BAD_CATALOGUES))
def test_a_bad_catalogue_file_is_refused_in_one_line_before_anything_is_written(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = tmp_path / "files"
    files.mkdir()
    path = bad_catalogue(files, case)
    run_dir = tmp_path / "run"
    outcome = train_in_process(
        [f"--catalog={path}", f"--run_dir={run_dir}"], capsys, run_dir.parent / "files"
    )
    assert_refused(outcome, "--catalog", BAD_CATALOGUES[case])
    assert outcome.stderr.startswith(TRAIN_ERROR) and not run_dir.exists(), outcome.report()


@pytest.mark.slow
@pytest.mark.parametrize("whose", ["the policy's own", "given by --catalog"])
def test_evaluate_judges_on_the_catalogue_and_names_its_workloads(
    whose: str, trained: tuple[Path, Path], tmp_path: Path
) -> None:
    """The suite's jobs are the catalogue's: the policy's own (a ``train --catalog`` run's), or
    another given by ``--catalog`` (the shipped policy judged on renamed, cheaper workloads); the
    per-workload figures carry its names (they were the shipped catalogue's)."""
    from slamorl_jax import evaluate

    run_dir, catalog_file = trained
    own = whose == "the policy's own"
    out = tmp_path / "eval"
    argv = [
        f"--checkpoint={run_dir / 'checkpoints' if own else SHIPPED}",
        *([] if own else [f"--catalog={catalog_file}"]),
        "--episodes=8",
        "--seeds=1",
        "--scenarios=deadline-critical",
        "--front_points=0",
        "--plots=no",
        "--no-progress",
        f"--out_dir={out}",
    ]
    assert evaluate.main(argv) == 0
    payload = json.loads((out / "evaluation.json").read_text())
    names = set(payload["per_workload_objective"]["deadline-critical"])
    assert names and all(name.startswith("our-") for name in names)
    assert payload["config"]["catalog"] == str(catalog_file)


def test_evaluate_refuses_a_catalogue_it_cannot_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from slamorl_jax import evaluate
    from slamorl_jax.env import feasibility

    argv = [f"--checkpoint={SHIPPED}", f"--catalog={tmp_path / 'none.json'}", f"--out_dir={tmp_path / 'e'}"]
    assert_refused(call(lambda: evaluate.main(argv), capsys, tmp_path), "--catalog", "is missing")
    path = bad_catalogue(tmp_path, "request mix not a distribution")  # read, but its params refused
    argv = [f"--checkpoint={SHIPPED}", f"--catalog={path}", f"--out_dir={tmp_path / 'e'}"]
    assert_refused(
        call(lambda: evaluate.main(argv), capsys, tmp_path), "--catalog: ", "requested_cpus_per_gpu_probs"
    )
    # An empty path (an unset shell variable) said "cannot read  (Is a directory)".
    for command in (
        lambda: evaluate.main([f"--checkpoint={SHIPPED}", "--catalog=", f"--out_dir={tmp_path / 'e'}"]),
        lambda: recommend.main([f"--checkpoint={SHIPPED}", "--catalog=", f"--job={EXAMPLE_JOB}"]),
        lambda: feasibility.main(["--catalog=", "--num-jobs=4"]),
    ):
        assert_refused(call(command, capsys, tmp_path), "--catalog must name a calibration file")


@pytest.mark.parametrize("case", ["missing", "not JSON", "request mix not a distribution"])
def test_feasibility_refuses_a_bad_catalogue_in_one_line(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from slamorl_jax.env import feasibility

    path = bad_catalogue(tmp_path, case)
    outcome = call(lambda: feasibility.main([f"--catalog={path}", "--num-jobs=4"]), capsys, tmp_path)
    assert_refused(outcome, "--catalog", BAD_CATALOGUES[case])


@pytest.mark.slow
def test_feasibility_reports_on_the_catalogue_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The table is the report of the catalogue given (the shipped one's differs)."""
    from slamorl_jax.env import feasibility
    from slamorl_jax.env.scenarios import scenario_params

    path = tmp_path / "ours.json"
    path.write_text(json.dumps(own_catalog_raw()))
    own = parse_catalog(own_catalog_raw())
    expected = feasibility.feasibility_report(scenario_params("budget-constrained", own), 256, 0)
    feasibility.main([f"--catalog={path}", "--num-jobs=256"])
    lines = capsys.readouterr().out.splitlines()
    row = next(line for line in lines if line.startswith("| budget-constrained |"))
    assert row.split("|")[3].strip() == f"{expected['feasible_fraction']:.1%}", row
    assert row.split("|")[4].strip() == f"{expected['requested_meets_all_fraction']:.1%}", row


def test_processes_of_one_run_agree_on_the_catalogues_content_not_its_path(tmp_path: Path) -> None:
    """One file mounted at two paths starts; two files at one path would train apart (refused)."""
    first, second, other = (tmp_path / name for name in ("a.json", "b.json", "c.json"))
    first.write_text(json.dumps(own_catalog_raw()))
    second.write_text(first.read_text())
    other.write_text(CATALOG_PATH.read_text())

    def settings(path: Path) -> dict:
        try:
            train.parse_flags(["slamorl_jax.train", f"--catalog={path}"])
            config = train.train_checks.checked_catalog(train_flags.config_from_flags())
            return train.agreed_settings(config, tmp_path / "c", tmp_path / "l")
        finally:
            train.FLAGS.unparse_flags()

    assert settings(first) == settings(second)
    assert settings(first)["catalog"] != settings(other)["catalog"]


def test_the_shipped_policy_answers_a_job_of_a_workload_profiled_in_another_catalogue(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``recommend --catalog``: the job is read in that catalogue, and the answer says the policy
    never trained on its workload."""
    own = tmp_path / "ours.json"
    own.write_text(json.dumps(own_catalog_raw()))
    job = tmp_path / "job.json"
    job.write_text(json.dumps({**json.loads(EXAMPLE_JOB.read_text()), "workload": OURS}))
    argv = [f"--checkpoint={SHIPPED}", f"--catalog={own}", f"--job={job}"]
    outcome = call(lambda: recommend.main(argv), capsys, tmp_path)
    assert outcome.code == 0, outcome.report()
    notes = json.loads(outcome.stdout)["outside_training"]
    assert f"the policy never trained on {OURS} jobs (its profile comes from another catalogue)" in notes
    shipped_name = json.loads(EXAMPLE_JOB.read_text())["workload"]
    refused = call(lambda: recommend.main([*argv[:2], f"--job={EXAMPLE_JOB}"]), capsys, tmp_path)
    assert_refused(refused, f"unknown workload '{shipped_name}'", OURS)
    bad = bad_catalogue(tmp_path, "request mix not a distribution")  # read, but its params refused
    refused = call(lambda: recommend.main([argv[0], f"--catalog={bad}", argv[2]]), capsys, tmp_path)
    assert_refused(refused, "--catalog: ", "requested_cpus_per_gpu_probs")
    policy = load_policy(SHIPPED)
    assert policy.on_catalog(None) is policy and policy.untrained_names(shipped_name, "T4") == ()
    with pytest.raises(TypeError, match="catalog must be a Catalog"):
        policy.on_catalog(str(own))


def test_a_workload_of_a_known_name_profiled_anew_is_outside_training() -> None:
    """The same names with other figures (a workload re-profiled, a GPU re-priced): the note names
    the figures that differ, and only for the jobs they shape."""
    raw = json.loads(CATALOG_PATH.read_text())
    first, second = raw["workloads"][0], raw["workloads"][1]
    raw["workloads"][0] = {**first, "compute_alpha_s": first["compute_alpha_s"] * 2}
    raw["prices"] = {**raw["prices"], "gpu_hour": {**raw["prices"]["gpu_hour"], "V100": 9.0}}
    policy = load_policy(SHIPPED)
    moved = policy.on_catalog(parse_catalog(raw))
    note = moved.untrained_names(first["name"], "T4")
    assert len(note) == 1 and "other figures for" in note[0], note
    assert "(compute_alpha_s differ in this catalogue)" in note[0], note
    assert moved.untrained_names(second["name"], "T4") == ()
    assert "gpu_price_per_hour differ" in moved.untrained_names(second["name"], "V100")[0]
    assert policy.on_catalog(load_catalog()).untrained_names(first["name"], "V100") == ()
    # Prices as the policy's preset bills them: the AWS list for the shipped one, not the
    # reference code's constants; a reference-code policy the other way round.
    reference = dataclasses.replace(
        policy, config=dataclasses.replace(policy.config, prices="reference-code")
    )
    assert reference.on_catalog(parse_catalog(raw)).untrained_names(second["name"], "V100") == ()
    raw["prices"] = {**raw["prices"], "reference_code": {**raw["prices"]["reference_code"], "gpu_hour": 30.0}}
    assert moved.on_catalog(parse_catalog(raw)).untrained_names(second["name"], "T4") == ()
    note = reference.on_catalog(parse_catalog(raw)).untrained_names(second["name"], "T4")
    assert "(gpu_price_per_hour differ in this catalogue)" in note[0], note
    # A name the catalogue it runs on lacks is for check_recommendable to refuse: no note, no error.
    assert moved.untrained_names("no-such-workload", "T4") == ()
