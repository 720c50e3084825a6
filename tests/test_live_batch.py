"""Many live jobs at once (``live.recommend_many``, ``live_encoding.live_states``): every job gets
the state and the answer it gets alone, whatever the other jobs in the batch report."""

from __future__ import annotations

import dataclasses
import io
import json
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from cli_harness import assert_refused, call, new_job_from

from slamorl_jax import compilation_cache, job_reports
from slamorl_jax import recommend as recommend_cli
from slamorl_jax.env.scenarios import scenario_params
from slamorl_jax.live import live_state, recommend, recommend_many
from slamorl_jax.live_checks import outside_training_many
from slamorl_jax.live_encoding import MIN_RUNS, encode, live_states, padded_size, runs_length
from slamorl_jax.live_job import LiveJob
from slamorl_jax.policy_checkpoint import load_policy
from slamorl_jax.recommend_serve import serve

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = LiveJob.from_dict(json.loads((ROOT / "docs" / "example_job.json").read_text(encoding="utf-8")))
NEW_JOB = LiveJob.from_dict(
    {
        **json.loads((ROOT / "docs" / "example_new_job.json").read_text(encoding="utf-8")),
        "deadline_s": 30_000.0,
    }
    | {"budget_usd": 60.0}
)
# Jobs that differ in what they report: the example (10 measured epochs), a longer history with a
# move and a slow epoch, no history (the last epoch alone), a new job with no readings, one with
# probes, other workloads, preferences and job-so-far figures.
JOBS = (
    EXAMPLE,
    dataclasses.replace(
        EXAMPLE,
        epochs_done=13,
        elapsed_s=20_000.0,
        history=(*EXAMPLE.history, (8, 32, 900.0), (8, 32, 910.0), (8, 32, 1_400.0)),
        gpus=8,
        last_epoch_time_s=1_400.0,
        mean_gpu_util=0.7,
        peak_memory_gib=70.0,
    ),
    dataclasses.replace(EXAMPLE, history=None, preference="cost", reference_throughput=700.0),
    NEW_JOB,
    dataclasses.replace(NEW_JOB, probes=((4, 16, 400.0), (16, 64, 130.0)), preference="balanced"),
    dataclasses.replace(EXAMPLE, workload="squad-bert", gpu_type="V100", epochs_total=20, history=None),
    dataclasses.replace(EXAMPLE, requested_gpus=2, requested_cpus=8, preference=(0.2, 0.5, 0.3)),
)


@pytest.fixture(scope="module")
def policy() -> object:
    return load_policy(ROOT / "checkpoints" / "default")


def test_runs_pad_to_a_few_lengths() -> None:
    assert [runs_length(n) for n in (0, 1, MIN_RUNS, MIN_RUNS + 1, 100)] == [8, 8, 8, 16, 128]
    assert [padded_size(n) for n in (1, 2, 3, 64, 65)] == [1, 2, 4, 64, 128]
    report = encode(JOBS[1])
    assert report.run_valid.sum() == 13 and report.run_valid.shape == (16,)
    assert encode(NEW_JOB).run_valid.sum() == 0  # a new job has measured nothing
    with pytest.raises(ValueError, match="13 runs do not fit a report of 8"):
        encode(JOBS[1], length=8)


def test_a_batch_holds_each_jobs_own_state() -> None:
    """The batched states equal the one-job states (runs padded to the batch's longest)."""
    params = scenario_params("mixed")
    batch = live_states(list(JOBS), params)
    for i, job in enumerate(JOBS):
        alone = live_state(job, params)
        row = jax.tree.map(lambda x, i=i: np.asarray(x)[i], batch)
        for path, got, want in zip(
            jax.tree_util.tree_leaves_with_path(row),
            jax.tree.leaves(row),
            jax.tree.leaves(alone),
            strict=True,
        ):
            np.testing.assert_allclose(
                got, np.asarray(want), rtol=1e-6, atol=1e-6, err_msg=f"job {i} {path[0]}"
            )


def test_recommend_many_gives_each_job_its_own_answer(policy: object) -> None:
    many = recommend_many(policy, list(JOBS))
    assert len(many) == len(JOBS)
    for job, answer in zip(JOBS, many, strict=True):
        alone = recommend(policy, job)
        assert (answer.action, answer.gpus, answer.cpus, answer.relocate) == (
            alone.action,
            alone.gpus,
            alone.cpus,
            alone.relocate,
        )
        assert answer.outside_training == alone.outside_training
        np.testing.assert_allclose(answer.action_probabilities, alone.action_probabilities, atol=1e-5)
        np.testing.assert_allclose(
            list(answer.observation.values()), list(alone.observation.values()), atol=1e-6
        )
    # The answers differ between jobs (the batch does not leak one job's answer into another's).
    assert len({(a.gpus, a.cpus) for a in many}) > 1


@pytest.mark.parametrize(
    ("jobs", "error", "phrase"),
    [
        (EXAMPLE, TypeError, "a sequence of LiveJob, got LiveJob"),
        ((job for job in JOBS), TypeError, "a sequence of LiveJob, got generator"),
        ([EXAMPLE, {"workload": "x"}], TypeError, "jobs[1] must be a LiveJob, got dict"),
        (
            [EXAMPLE, EXAMPLE, dataclasses.replace(EXAMPLE, epochs_done=60, history=None)],
            ValueError,
            "job 2: the job has finished",
        ),
        (
            [dataclasses.replace(EXAMPLE, gpus=1000, history=None)],
            ValueError,
            "job 0: current allocation: 1000",
        ),
    ],
    ids=["one job", "a generator", "a dict", "finished", "outside the cluster"],
)
def test_bad_batches_are_refused_naming_the_job(
    policy: object, jobs: object, error: type[Exception], phrase: str
) -> None:
    with pytest.raises(error) as info:
        recommend_many(policy, jobs)
    assert phrase in str(info.value) and "\n" not in str(info.value)


def _job_dict(job: LiveJob) -> dict:
    """``job`` as the JSON object ``recommend`` reads."""
    data = {k: v for k, v in dataclasses.asdict(job).items() if v is not None}
    for name in ("history", "probes"):
        if name in data:
            data[name] = [dict(zip(("gpus", "cpus", "epoch_time_s"), run, strict=True)) for run in data[name]]
    return data


def test_the_cli_answers_every_job_a_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``recommend --jobs``: JSON Lines (blank lines skipped) or a JSON list in, one answer a line
    out in the jobs' order, each the policy's answer for that job alone."""
    monkeypatch.chdir(tmp_path)
    jobs = [JOBS[0], JOBS[2], JOBS[5]]
    lines = [json.dumps(_job_dict(job)) for job in jobs]
    Path("jobs.jsonl").write_text(f"{lines[0]}\n\n{lines[1]}\n{lines[2]}\n")
    Path("jobs.json").write_text(json.dumps([_job_dict(job) for job in jobs]))
    policy = load_policy(ROOT / "checkpoints" / "default")
    expected = [recommend(policy, job) for job in jobs]
    checkpoint = f"--checkpoint={ROOT / 'checkpoints' / 'default'}"
    # The list as the file's first and only text, after a byte-order mark some editors write.
    Path("bom.json").write_bytes(b"\xef\xbb\xbf" + Path("jobs.json").read_bytes())
    for name, where in (("jobs.jsonl", "line 4"), ("jobs.json", "item 2"), ("bom.json", "item 2")):
        outcome = call(lambda name=name: recommend_cli.main([f"--jobs={name}", checkpoint]), capsys, tmp_path)
        assert outcome.code == 0, outcome.report()
        answers = [json.loads(line) for line in outcome.stdout.splitlines()]
        assert [(a["gpus"], a["cpus"], a["action"]) for a in answers] == [
            (e.gpus, e.cpus, e.action) for e in expected
        ]
        assert f"warning: {where} is outside what the policy was trained on" in outcome.stderr  # squad-bert
    # One job pretty-printed over several lines is one job, not a broken JSON Lines file.
    Path("one.json").write_text(json.dumps(_job_dict(jobs[0]), indent=2))
    outcome = call(lambda: recommend_cli.main(["--jobs=one.json", checkpoint]), capsys, tmp_path)
    assert outcome.code == 0, outcome.report()
    assert json.loads(outcome.stdout)["action"] == expected[0].action


def test_a_refused_job_is_named_by_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A job the policy's cluster cannot hold, or a finished one, is named by its line in the file
    (blank lines counted), not by its index among the jobs."""
    finished = dataclasses.replace(EXAMPLE, epochs_done=60, history=None)
    lines = [json.dumps(_job_dict(job)) for job in (EXAMPLE, EXAMPLE, finished)]
    (tmp_path / "jobs.jsonl").write_text(f"{lines[0]}\n\n{lines[1]}\n{lines[2]}\n")
    argv = [f"--jobs={tmp_path / 'jobs.jsonl'}", f"--checkpoint={ROOT / 'checkpoints' / 'default'}"]
    outcome = call(lambda: recommend_cli.main(argv), capsys, tmp_path)
    assert_refused(outcome, "line 4: the job has finished")


@pytest.mark.parametrize(
    ("text", "flags", "phrase"),
    [
        ("", [], "holds no jobs"),
        ("\n\n", [], "holds no jobs"),
        ("[1]", [], "item 0 must be a JSON object (a job), got a number"),
        ('{"workload": "imagenet-resnet50"}\n{', [], "line 2 is not valid JSON"),
        ('{"workload": "nope"}', [], "line 1: "),  # one job on one line: JSON Lines names it so
        ('\n{\n"workload": "nope"\n}', [], "lines 2-4: "),  # one job over several lines
        (json.dumps(_job_dict(EXAMPLE)) + '\n{"workload": "nope"}', [], "line 2: "),
        ('{"gpus": 4, "gpus": 8}', [], "the field 'gpus' is given twice"),
        ('{\n  "gpus": 4,\n  "gpus": 8\n}', [], "the field 'gpus' is given twice"),
        ("null", [], "line 1 must be a JSON object (a job), got null"),
        (json.dumps(_job_dict(EXAMPLE) | {"workload": "x" * 5000}), [], "more characters)"),
        ("[]", [], "holds no jobs"),
        (
            json.dumps(_job_dict(EXAMPLE)) + '\n{"gpus": ' + "1" * 5000 + "}",
            [],
            "line 2 holds an integer of more digits",
        ),
        ("{}", ["--probe_plan"], "ask for a new job's other starts with --job"),
        ("{}", ["--forecast_start"], "and with --history a new job's first allocation"),
    ],
    ids=[
        "empty",
        "blank",
        "not an object",
        "bad json",
        "bad job",
        "bad job over lines",
        "bad second job",
        "repeated key",
        "repeated key, pretty-printed",
        "null",
        "huge value",
        "empty list",
        "an integer past Python's 4,300 digits",
        "probe plan",
        "forecast start",
    ],
)
def test_bad_jobs_files_are_refused_with_one_line(
    text: str, flags: list[str], phrase: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "jobs.jsonl"
    path.write_text(text)
    outcome = call(lambda: recommend_cli.main([f"--jobs={path}", *flags]), capsys, tmp_path)
    assert_refused(outcome, phrase)


def test_job_and_jobs_are_one_or_the_other(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert_refused(
        call(lambda: recommend_cli.main([]), capsys, tmp_path), "one of the arguments --job --jobs"
    )
    both = ["--job=a.json", "--jobs=b.jsonl"]
    assert_refused(call(lambda: recommend_cli.main(both), capsys, tmp_path), "not allowed with")
    (tmp_path / "list.json").write_text("[1, 2]")
    single = [f"--job={tmp_path / 'list.json'}", "--suggest_slas"]
    assert_refused(call(lambda: recommend_cli.main(single), capsys, tmp_path), "must hold one JSON object")
    for flag in ("--job=", "--jobs="):  # an empty path read "." (Is a directory)
        outcome = call(lambda flag=flag: recommend_cli.main([flag]), capsys, tmp_path)
        assert_refused(outcome, f"{flag[:-1]} is empty: give a file path, or - for standard input")


def test_json_lines_split_at_newlines_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A JSON string may hold U+2028 or U+0085, which ``str.splitlines`` would split a record at."""
    job = _job_dict(EXAMPLE)
    separated = json.dumps({**job, "workload": "x\u2028y\u0085z"}, ensure_ascii=False)
    path = tmp_path / "jobs.jsonl"
    path.write_text(f"{json.dumps(job)}\n{separated}\n", encoding="utf-8")
    located = job_reports.read_jobs(str(path))  # names are checked where a policy reads the job
    assert [where for where, _ in located] == ["line 1", "line 2"]
    assert located[1][1].workload == "x\u2028y\u0085z"  # the record whole


def test_an_empty_history_of_a_running_job_is_refused() -> None:
    """It would drop the last epoch's measurement silently (the answer changed with it)."""
    with pytest.raises(ValueError, match="history is empty but the job has run 10 epochs"):
        dataclasses.replace(EXAMPLE, history=())
    assert dataclasses.replace(NEW_JOB, history=()).history == ()  # a new job has run none


def test_no_jobs_get_no_answers(policy: object) -> None:
    assert recommend_many(policy, []) == [] and recommend_many(policy, ()) == []
    assert outside_training_many([], scenario_params("mixed")) == []


def test_null_runs_are_left_out() -> None:
    """``null`` means a field left out, for ``history`` and ``probes`` as for the readings."""
    data = json.loads((ROOT / "docs" / "example_job.json").read_text(encoding="utf-8"))
    job = LiveJob.from_dict({**data, "history": None, "probes": None})
    assert job.history is None and job.probes is None


def test_serve_answers_each_line_as_it_comes_and_goes_on_after_a_bad_one(policy: object) -> None:
    """``recommend --serve``: one JSON line per non-blank input line, in order, each with its input
    line; a line it cannot answer gets an error line and the next job is answered."""
    good = json.dumps(_job_dict(EXAMPLE))
    outside = json.dumps(_job_dict(dataclasses.replace(EXAMPLE, gpus=1000, history=None)))
    not_utf8 = '{"workload": "caf\udce9"}\n'  # a Latin-1 byte, as serve_stdin decodes it
    lines = [
        good + "\n",
        "\n",
        '{"gpus": 4,\n',
        "[1]\n",
        outside + "\n",
        '{"gpus": 4, "gpus": 8}\n',
        not_utf8,
        good,
    ]
    out = io.StringIO()
    assert serve(policy, lines, out) == 0
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [a["line"] for a in answers] == [1, 3, 4, 5, 6, 7, 8]
    alone = recommend(policy, EXAMPLE)
    for answer in (answers[0], answers[-1]):
        assert (answer["gpus"], answer["cpus"], answer["action"]) == (alone.gpus, alone.cpus, alone.action)
    errors = [a.get("error", "") for a in answers[1:-1]]
    assert errors[0].startswith("the line is not valid JSON: Expecting property name")
    assert "got a list" in errors[1]
    assert "1000 GPUs is outside the policy's cluster" in errors[2]
    assert errors[3] == "the line: the field 'gpus' is given twice"
    assert errors[4] == "the line is not UTF-8 text"  # not the text it decodes to (workload "caf?")
    real_replacement_character = io.StringIO()  # valid UTF-8 text: answered as any other line
    serve(policy, ['{"workload": "caf\ufffd"}\n'], real_replacement_character)
    assert "not UTF-8" not in real_replacement_character.getvalue()


def test_serve_reads_stdin_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(_job_dict(EXAMPLE)) + "\nnot json\n"))
    argv = ["--serve", f"--checkpoint={ROOT / 'checkpoints' / 'default'}"]
    outcome = call(lambda: recommend_cli.main(argv), capsys, tmp_path)
    assert outcome.code == 0, outcome.report()
    first, second = (json.loads(line) for line in outcome.stdout.splitlines())
    assert first["line"] == 1 and "gpus" in first and second["line"] == 2 and "error" in second
    assert_refused(
        call(lambda: recommend_cli.main(["--serve", "--probe_plan"]), capsys, tmp_path), "--serve gives"
    )


@pytest.mark.slow  # a real process (about 10 s: imports, the policy, a compile)
def test_serve_answers_before_its_input_ends() -> None:
    """Each answer comes while standard input is still open: a platform can keep the process."""
    expected = recommend(load_policy(ROOT / "checkpoints" / "default"), EXAMPLE).gpus
    process = subprocess.Popen(
        [sys.executable, "-m", "slamorl_jax.recommend", "--serve"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        for number in (1, 2):
            process.stdin.write(json.dumps(_job_dict(EXAMPLE)) + "\n")
            process.stdin.flush()
            answer = json.loads(process.stdout.readline())
            assert answer["line"] == number and answer["gpus"] == expected
        process.stdin.close()
        assert process.wait(timeout=60) == 0
    finally:
        process.kill()


def test_a_caller_may_name_its_jobs(policy: object) -> None:
    finished = dataclasses.replace(EXAMPLE, epochs_done=60, history=None)
    with pytest.raises(ValueError, match=r"^line 7: the job has finished"):
        recommend_many(policy, [EXAMPLE, finished], names=["line 3", "line 7"])
    with pytest.raises(ValueError, match="names holds 1 names for 2 jobs"):
        recommend_many(policy, [EXAMPLE, EXAMPLE], names=["line 3"])


@pytest.mark.slow  # two real processes (about 9 s); the refusals in-process: the test below
def test_a_new_recommend_process_reads_its_programs_back_from_the_compilation_cache(tmp_path: Path) -> None:
    """A platform that runs ``recommend`` once per job and epoch: the first process fills
    ``--compilation_cache_dir`` with every program it compiled, a second answers the same from them."""
    cache = tmp_path / "cache"
    command = [sys.executable, "-m", "slamorl_jax.recommend", "--job=docs/example_job.json"]
    command.append(f"--compilation_cache_dir={cache}")
    answers = []
    for _ in range(2):
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        answers.append(json.loads(done.stdout))
        if not answers[1:]:
            filled = sorted(cache.iterdir())
            assert len(filled) >= 10, filled  # the small programs too, not only those over a second
    assert answers[0] == answers[1] and sorted(cache.iterdir()) == filled


def test_recommend_refuses_a_cache_folder_that_is_a_file_and_passes_over_an_unwritable_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache folder given that cannot be one is refused, and a default one that cannot be written
    is passed over: the call answers without a cache, as it does with none asked for."""
    job = f"--job={ROOT / 'docs' / 'example_job.json'}"
    uncached = call(lambda: recommend_cli.main([job, "--compilation_cache_dir="]), capsys, tmp_path)
    assert uncached.code == 0, uncached.report()
    (tmp_path / "a_file").write_text("")
    argv = [job, f"--compilation_cache_dir={tmp_path / 'a_file'}"]
    assert_refused(call(lambda: recommend_cli.main(argv), capsys, tmp_path), "is a file, not a directory")
    unwritable = str(tmp_path / "a_file" / "cache")
    monkeypatch.setattr(compilation_cache, "DEFAULT_CACHE_DIR", unwritable)
    outcome = call(lambda: recommend_cli.main([job]), capsys, tmp_path)
    assert outcome.code == 0 and json.loads(outcome.stdout) == json.loads(uncached.stdout), outcome.report()


@pytest.mark.parametrize("argv", [["--serve"], ["--job=-"], ["--jobs=-"]], ids=["serve", "job", "jobs"])
def test_a_closed_standard_input_is_named(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--serve 0<&-`` failed with 'unexpected TypeError', ``--job=- 0<&-`` with AttributeError."""
    monkeypatch.setattr(sys, "stdin", None)  # what Python sets when file descriptor 0 is closed
    outcome = call(lambda: recommend_cli.main(argv), capsys, tmp_path)
    assert_refused(outcome, "standard input, which is closed")


def test_keep_going_answers_every_job_and_names_the_refused_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One refused job (a job that finished between the platform's snapshot and the call, a line
    that is not JSON) failed the whole ``--jobs`` batch: with ``--keep_going`` each job gets its
    line, the refused ones their reason, and the status is 2."""
    example = _job_dict(EXAMPLE)
    finished = {**example, "epochs_done": example["epochs_total"], "history": None}
    path = tmp_path / "jobs.jsonl"
    path.write_text(
        "\n".join([json.dumps(example), "{not json", json.dumps(finished), "[1]", json.dumps(example)])
    )
    outcome = call(lambda: recommend_cli.main([f"--jobs={path}", "--keep_going"]), capsys, tmp_path)
    assert outcome.code == 2 and "3 of 5 jobs refused" in outcome.stderr, outcome.report()
    lines = [json.loads(line) for line in outcome.stdout.splitlines()]
    assert [line.get("at") for line in lines] == [None, "line 2", "line 3", "line 4", None]
    assert "not valid JSON" in lines[1]["error"] and "has finished" in lines[2]["error"]
    assert lines[0] == lines[4] and lines[0]["action_name"]  # the answerable jobs answered
    alone = call(lambda: recommend_cli.main([f"--jobs={path}"]), capsys, tmp_path)
    assert_refused(alone, "line 2 is not valid JSON")  # without the flag: the first refusal, as before
    both = call(lambda: recommend_cli.main(["--job=x.json", "--keep_going"]), capsys, tmp_path)
    assert_refused(both, "--keep_going goes with --jobs")
    # A first line with a repeated key, or a list, was read as the whole file: the batch ended
    # naming no line.
    repeated = json.dumps(example)[:-1] + ', "gpus": 2}'
    for first in (repeated, "[]"):
        path.write_text("\n".join([first, json.dumps(example)]))
        outcome = call(lambda: recommend_cli.main([f"--jobs={path}", "--keep_going"]), capsys, tmp_path)
        lines = [json.loads(line) for line in outcome.stdout.splitlines()]
        assert outcome.code == 2 and [line.get("at") for line in lines] == ["line 1", None], outcome.report()
    # A list written over several lines and cut short is still one broken value (its lines are not
    # objects on their own), refused as a whole.
    path.write_text(json.dumps([example, example], indent=2)[:-40])
    outcome = call(lambda: recommend_cli.main([f"--jobs={path}", "--keep_going"]), capsys, tmp_path)
    assert_refused(outcome, "is not valid JSON")
    # One pretty-printed job with a repeated key is still the whole file, refused for that key.
    path.write_text(json.dumps(json.loads(repeated.replace('"gpus": 2', '"gpus_x": 2')), indent=2))
    path.write_text(path.read_text().replace('"gpus_x"', '"gpus"'))
    outcome = call(lambda: recommend_cli.main([f"--jobs={path}", "--keep_going"]), capsys, tmp_path)
    assert_refused(outcome, "the field 'gpus' is given twice")


def test_compact_prints_the_single_answer_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--job``'s answer is 470 lines at indent 2 (90 probabilities, 351 features); ``--compact``
    gives the same object on one line."""
    job = ROOT / "docs" / "example_job.json"
    pretty = call(lambda: recommend_cli.main([f"--job={job}"]), capsys, tmp_path)
    compact = call(lambda: recommend_cli.main([f"--job={job}", "--compact"]), capsys, tmp_path)
    assert compact.code == pretty.code == 0, compact.report()
    assert len(compact.stdout.splitlines()) == 1 < len(pretty.stdout.splitlines())
    assert json.loads(compact.stdout) == json.loads(pretty.stdout)
    jobs = call(lambda: recommend_cli.main([f"--jobs={job}", "--compact"]), capsys, tmp_path)
    assert_refused(jobs, "--compact goes with --job")


def test_jobs_with_a_history_start_their_new_jobs_from_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A scheduler submitting many jobs at once: ``--jobs --history`` gives each new job (no epoch
    run) its store's first allocation, as ``--job --history`` does, and each running job the
    policy's answer, one line each in the jobs' order; a new job of a workload the store lacks is
    warned about by its line."""
    from slamorl_jax.history.records import HistoryRecord, save_records

    store = tmp_path / "store.json"
    save_records(
        [HistoryRecord("imagenet-resnet50", "T4", 60, 90_000.0, 80.0, (0.6, 0.2, 0.2), 8, 32)], store
    )
    running = _job_dict(EXAMPLE)
    new = new_job_from(running)
    other = {**new, "workload": "squad-bert", "epochs_total": 2}
    path = tmp_path / "jobs.jsonl"
    path.write_text("\n".join(json.dumps(job) for job in (new, running, other)))
    outcome = call(
        lambda: recommend_cli.main([f"--jobs={path}", f"--history={store}", "--brief"]), capsys, tmp_path
    )
    assert outcome.code == 0, outcome.report()
    first, second, third = (json.loads(line) for line in outcome.stdout.splitlines())
    assert (first["source"], first["gpus"], first["cpus"], first["match"]) == (
        "history",
        8,
        32,
        "workload and GPU type",
    )
    assert "action_name" in second and "action_probabilities" not in second  # the policy's, brief
    assert third["match"] == "another workload"
    assert "warning: line 3: the store holds no record of its workload and GPU type" in outcome.stderr
    # A new job the policy's cluster cannot hold is named by its line, or answered by why.
    path.write_text("\n".join(json.dumps(job) for job in (running, {**new, "gpus": 64})))
    outcome = call(lambda: recommend_cli.main([f"--jobs={path}", f"--history={store}"]), capsys, tmp_path)
    assert_refused(outcome, "line 2: current allocation: 64 GPUs is outside the policy's cluster")
    argv = [f"--jobs={path}", f"--history={store}", "--keep_going"]
    outcome = call(lambda: recommend_cli.main(argv), capsys, tmp_path)
    assert outcome.code == 2 and json.loads(outcome.stdout.splitlines()[1])["at"] == "line 2", (
        outcome.report()
    )
    # A store the policy's cluster cannot hold is refused before any job is answered.
    save_records(
        [HistoryRecord("imagenet-resnet50", "T4", 60, 90_000.0, 80.0, (0.6, 0.2, 0.2), 64, 32)], store
    )
    outcome = call(lambda: recommend_cli.main([f"--jobs={path}", f"--history={store}"]), capsys, tmp_path)
    assert_refused(outcome, "--history", "64 GPUs is outside the policy's cluster")
