"""Evaluation: start rules and the oracle, headline and front figures, and the evaluate command."""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slamorl_jax import evaluate
from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.env import (
    FEATURE_NAMES,
    NUM_FEATURES,
    EnvParams,
    EnvState,
    JobAllocationEnv,
    scenario_params,
)
from slamorl_jax.env.action_sets import RELOCATE_ACTION, WIDEST_ACTION_SET
from slamorl_jax.env.actions import NO_OP_ACTION, cpu_cap
from slamorl_jax.env.episode_figures import FIGURE_NAMES, episode_figures
from slamorl_jax.env.params import WEIGHT_MODES, max_gpus
from slamorl_jax.episodes import keep_allocation, run_episode_batches, summarise_episodes
from slamorl_jax.evaluation import baselines, headline, pareto
from slamorl_jax.evaluation.methods import FORECAST_START, NO_RELOCATE, compared_method, policy_methods
from slamorl_jax.evaluation.report import to_csv, to_markdown
from slamorl_jax.evaluation.suite import SuiteConfig, run_suite, world_difference
from slamorl_jax.history.records import HistoryRecord, save_records
from slamorl_jax.policy_checkpoint import load_policy
from slamorl_jax.quality_bar import greedy_policy, greedy_policy_without

SHIPPED = Path(__file__).resolve().parent.parent / "checkpoints" / "default"


@functools.cache
def _batched_reset(env: JobAllocationEnv):
    """``env.reset`` over a batch of keys, jitted once per env (an eager vmap of the reset compiles
    every primitive on its own: about twice the time)."""
    return jax.jit(jax.vmap(env.reset, in_axes=(0, None)))


def _reset_batch(env: JobAllocationEnv, scenario: str, n: int, seed: int = 0):
    params = scenario_params(scenario, env.catalog)
    _, state = _batched_reset(env)(jax.random.split(jax.random.key(seed), n), params)
    return params, state


def test_place_at_the_request_reproduces_the_reset_state(env: JobAllocationEnv) -> None:
    """Placing a fresh job where reset put it (the request) changes nothing but float rounding."""
    params, state = _reset_batch(env, "mixed", 64)
    placed = jax.vmap(env.place, in_axes=(0, 0, 0, None))(state, state.gpus, state.cpus, params)
    for got, want in zip(jax.tree.leaves(placed), jax.tree.leaves(state), strict=True):
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=1e-5)


def test_the_figure_names_are_the_episode_figures_keys_in_order(env: JobAllocationEnv) -> None:
    """``FIGURE_NAMES``, which the Gymnasium wrapper hands on, name exactly what
    ``episode_figures`` returns, in its order (shapes only: nothing is compiled)."""
    _, state = jax.eval_shape(env.reset, jax.random.key(0), scenario_params("mixed", env.catalog))
    names: list[str] = []  # the dict's own order (a traced output's keys come back sorted)
    jax.eval_shape(lambda s: names.extend(episode_figures(s)), state)
    assert tuple(names) == FIGURE_NAMES


# slow: kept out of the default suite's time budget (run with -m slow)
@pytest.mark.slow
def test_place_clips_to_the_cluster_and_reads_the_new_allocation(env: JobAllocationEnv) -> None:
    """An oversized allocation is clipped like an action's; readings follow the new allocation."""
    params, state = _reset_batch(env, "mixed", 8)
    big = jnp.full(8, 1000, jnp.int32)
    placed = jax.vmap(env.place, in_axes=(0, 0, 0, None))(state, big, big * 100, params)
    g_max = int(max_gpus(params))
    cap = int(cpu_cap(g_max, int(params.gpus_per_node), int(params.cpus_per_node), int(params.cpu_step)))
    assert np.all(np.asarray(placed.gpus) == g_max) and np.all(np.asarray(placed.cpus) == cap)
    assert np.all(np.asarray(placed.epoch) == 0) and np.all(np.asarray(placed.elapsed_s) == 0)
    np.testing.assert_array_equal(np.asarray(placed.job.workload), np.asarray(state.job.workload))
    assert np.any(np.asarray(placed.price_per_hour) > np.asarray(state.price_per_hour))


@functools.partial(jax.jit, static_argnums=(0, 1))
def _static_rule_scores(
    env: JobAllocationEnv, oracle: baselines.BestStatic, state: EnvState, params: EnvParams
) -> list[tuple[jax.Array, jax.Array]]:
    """Per job, (expected SLAs met, objective) of the oracle's, the request's, the min, max and
    heuristic allocations; one compiled function for every scenario (params are traced)."""
    rules = [oracle, baselines.requested, baselines.minimum, baselines.maximum, baselines.reference_heuristic]

    def outcome(rule, job_state):
        gpus, cpus = rule(job_state, params)
        placed = env.place(job_state, gpus, cpus, params)
        met, objective = baselines.expected_static_outcomes(
            job_state, placed.gpus[None], placed.cpus[None], params
        )
        return jnp.sum(met.astype(jnp.int32)), objective[0]

    return [jax.vmap(lambda s, r=rule: outcome(r, s))(state) for rule in rules]


@pytest.mark.parametrize("scenario", ["deadline-critical", "budget-constrained", "balanced"])
def test_oracle_is_at_least_as_good_as_every_static_baseline_by_its_criterion(
    env: JobAllocationEnv, scenario: str
) -> None:
    """Per job, the oracle's allocation meets at least as many expected SLAs as the request, min,
    max and heuristic allocations, and on a tie has no worse a weighted time and cost."""
    params, state = _reset_batch(env, scenario, 128, seed=3)
    scores = _static_rule_scores(env, baselines.BestStatic.for_params(params), state, params)
    best_count, best_objective = (np.asarray(x) for x in scores[0])
    for count, objective in scores[1:]:
        count, objective = np.asarray(count), np.asarray(objective)
        assert np.all(best_count >= count)
        tie = best_count == count
        assert np.all(best_objective[tie] <= objective[tie] * (1 + 1e-6))


def test_oracle_beats_the_request_on_real_runs(env: JobAllocationEnv) -> None:
    """With noise and contention, the oracle's static runs meet all SLAs more often than the request's
    and are faster on deadline-critical jobs."""
    params = scenario_params("deadline-critical", env.catalog)
    key = jax.random.key(5)
    starts = (baselines.BestStatic.for_params(params), baselines.requested)
    figures = run_episode_batches(env, (params, params), keep_allocation, key, 512, starts=starts)
    oracle, request = (summarise_episodes(one) for one in figures)
    assert oracle["all_slas_met"] > request["all_slas_met"] + 0.2
    assert oracle["time_vs_request"] < request["time_vs_request"]


def _relocate_even_jobs(policy_params: None, obs: jax.Array, weights: jax.Array, key: jax.Array) -> jax.Array:
    """Relocate at every decision on even-numbered jobs, keep on the others."""
    even = jnp.arange(obs.shape[0]) % 2 == 0
    return jnp.where(even, RELOCATE_ACTION, NO_OP_ACTION).astype(jnp.int32)


def test_episode_figures_count_relocations_among_the_reallocations(env: JobAllocationEnv) -> None:
    """Each relocation is one re-allocation and is counted apart: a job that relocates before every
    epoch relocated once per epoch; a job that keeps, never."""
    assert env.action_set == WIDEST_ACTION_SET
    params = scenario_params("balanced", env.catalog)
    (figures,) = run_episode_batches(env, (params,), _relocate_even_jobs, jax.random.key(3), 16)
    assert figures["finished"].all()
    even = np.arange(16) % 2 == 0
    np.testing.assert_array_equal(figures["relocations"][even], figures["epochs"][even])
    np.testing.assert_array_equal(figures["relocations"], figures["reallocations"])
    assert np.all(figures["relocations"][~even] == 0)
    expected = np.mean(figures["epochs"][even]) / 2
    assert summarise_episodes(figures)["relocations"] == pytest.approx(expected)


def test_batched_runs_need_runs_and_one_start_rule_per_params(env: JobAllocationEnv) -> None:
    """``run_episode_batches`` refuses no runs, and start rules that do not pair up with the params
    (before it compiles anything)."""
    params = scenario_params("deadline-critical", env.catalog)
    with pytest.raises(ValueError, match="1 start rules for 2 params"):
        run_episode_batches(env, (params, params), keep_allocation, jax.random.key(0), 4, starts=(None,))
    with pytest.raises(ValueError, match="no runs"):
        run_episode_batches(env, (), keep_allocation, jax.random.key(0), 4)


# slow: kept out of the default suite's time budget (run with -m slow)
@pytest.mark.slow
def test_reference_heuristic_follows_the_preference(env: JobAllocationEnv) -> None:
    """Time jobs never get less than they asked for, cost jobs never more, balanced jobs exactly it;
    the time rule's scale-up (+2 GPUs) happens for some jobs."""
    expectations = {"deadline-critical": 1, "budget-constrained": -1, "balanced": 0}
    for scenario, sign in expectations.items():
        params, state = _reset_batch(env, scenario, 256, seed=7)
        gpus, cpus = jax.vmap(baselines.reference_heuristic, in_axes=(0, None))(state, params)
        placed = jax.vmap(env.place, in_axes=(0, 0, 0, None))(state, gpus, cpus, params)
        dg = np.asarray(placed.gpus) - np.asarray(state.job.requested_gpus)
        dc = np.asarray(placed.cpus) - np.asarray(state.job.requested_cpus)
        if sign == 0:
            assert np.all(dg == 0) and np.all(dc == 0)
        else:
            assert np.all(sign * dg >= 0) and np.all(sign * dc >= 0)
            assert np.any(dg != 0)
        if sign > 0:
            assert np.any(dg == baselines.HEURISTIC_TIME_UP[0])


def test_hypervolume_and_front_by_hand() -> None:
    """Known areas; dominated and out-of-box points add nothing; utility is the grid mean."""
    assert pareto.hypervolume(np.array([[1.0, 1.0]])) == pytest.approx(1.0)
    two = np.array([[0.5, 1.5], [1.5, 0.5]])
    assert pareto.hypervolume(two) == pytest.approx(1.25)
    with_dominated = np.concatenate([two, [[1.6, 1.6], [3.0, 0.1]]])
    assert pareto.hypervolume(with_dominated) == pytest.approx(1.25)
    assert pareto.hypervolume(np.array([[2.5, 0.5]])) == 0.0
    np.testing.assert_array_equal(pareto.nondominated(with_dominated), [True, True, False, True])
    share, vectors = pareto.preference_grid(3)
    np.testing.assert_allclose(vectors.sum(axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(vectors[:, 0], [0.0, 0.4, 0.8], atol=1e-7)
    assert pareto.expected_utility(share, 1.0, 2.0) == pytest.approx(-1.5)
    with pytest.raises(ValueError, match="at least 2"):
        pareto.preference_grid(1)


def _figures(values: list[float], workloads: list[int], finished: list[bool] | None = None) -> dict:
    n = len(values)
    return {
        "episode_time_s": np.array(values),
        "episode_cost_usd": np.array(values),
        "sla_compliance": np.array(values),
        "workload": np.array(workloads),
        "finished": np.array(finished if finished is not None else [True] * n),
    }


def test_paired_reduction_averages_over_jobs_and_workloads() -> None:
    """Job average vs workload average differ when workloads have different job counts; unfinished
    pairs are left out."""
    ours = _figures([1.0, 1.0, 1.0, 9.0], [0, 0, 0, 1], [True, True, True, False])
    baseline = _figures([2.0, 2.0, 4.0, 1.0], [0, 0, 0, 1])
    baseline["workload"] = ours["workload"]
    ours_b = _figures([3.0], [1])
    base_b = _figures([4.0], [1])
    merged_ours = {k: np.concatenate([ours[k], ours_b[k]]) for k in ours}
    merged_base = {k: np.concatenate([baseline[k], base_b[k]]) for k in baseline}
    got = headline.paired_reduction(merged_ours, merged_base, "episode_time_s")
    # finished pairs: workload 0 -> 0.5, 0.5, 0.75; workload 1 -> 0.25
    assert got["job_average"] == pytest.approx((0.5 + 0.5 + 0.75 + 0.25) / 4)
    assert got["workload_average"] == pytest.approx(((0.5 + 0.5 + 0.75) / 3 + 0.25) / 2)
    results = {"s": {"ours": _figures([0.9, 0.6], [0, 1]), "base": _figures([0.6, 0.6], [0, 1])}}
    gain = headline.compliance_gain(results, "ours", "base")["job_average"]
    assert gain["relative"] == pytest.approx(0.25) and gain["points"] == pytest.approx(15.0)


def _main_exit(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        evaluate.main(argv)
    return info.value.code, capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["--episodes=0"],
        ["--scenarios=deadline-critical,nope"],
        ["--front_points=1"],
        ["--front_points=0", "--front_scenario=mixed"],  # no front: the scenario was silently unused
        ["--front_points=0", "--front_scenario=balanced"],  # given, even at its default
        ["--seeds=x"],
        ["--checkpoint=/no/such/checkpoint"],
        ["--compare=no-equals-sign"],
        ["--compare=a=/no/such/checkpoint"],
        [f"--compare=a={SHIPPED},a={SHIPPED}"],
        ["--history=/no/such/store.json"],
        ["--history=store.txt"],
    ],
)
def test_bad_flags_exit_2_with_one_line(
    argv: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Bad flags: exit status 2 and one line on stderr, nothing written."""
    code, err = _main_exit([*argv, f"--out_dir={tmp_path / 'out'}"], capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "error" in err
    if "--front_scenario" in " ".join(argv):
        assert "--front_scenario has no effect with --front_points=0" in err
    assert not (tmp_path / "out").exists()


def test_a_history_store_outside_the_policys_cluster_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The rule of ``history check`` and ``recommend --history``: a best allocation the policy's
    cluster cannot hold is one line and exit 2 (it was clipped to the cluster before)."""
    store = tmp_path / "outside.json"
    record = HistoryRecord("imagenet-resnet50", "T4", 60, 90_000.0, 80.0, (0.6, 0.2, 0.2), 8, 32)
    save_records([record, dataclasses.replace(record, best_gpus=40)], store)
    code, err = _main_exit([f"--history={store}", f"--out_dir={tmp_path / 'out'}"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "record 1" in err and "40 GPUs" in err and "outside the policy's cluster" in err
    assert not (tmp_path / "out").exists()


def test_evaluate_end_to_end_and_never_overwrites(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tiny evaluation of the shipped policy writes JSON/Markdown/CSV/PNG with every method, the
    headline and the gaps to both anchors (the policy compared with itself gives identical
    figures); a second run into the same directory is refused and leaves the results untouched."""
    import slamorl_jax.evaluation.suite as suite

    recorded: list[tuple] = []  # what run_suite returned
    real_run_suite = suite.run_suite

    def recording_run_suite(*args: object, **kwargs: object) -> tuple:
        recorded.append(real_run_suite(*args, **kwargs))
        return recorded[-1]

    monkeypatch.setattr(suite, "run_suite", recording_run_suite)
    out = tmp_path / "eval"
    store = tmp_path / "store.json"
    history_record = HistoryRecord("imagenet-resnet50", "T4", 60, 90_000.0, 80.0, (0.6, 0.2, 0.2), 8, 32)
    save_records([history_record, dataclasses.replace(history_record, best_gpus=1, best_cpus=4)], store)
    argv = [
        f"--checkpoint={SHIPPED}",
        f"--history={store}",
        "--episodes=16",
        "--seeds=2",
        "--scenarios=deadline-critical,budget-constrained",
        "--front_points=2",
        "--plots=yes",
        f"--compare=again={SHIPPED}",
        "--no-progress",
        "--compilation_cache_dir=",
        f"--out_dir={out}",
    ]
    assert evaluate.main(argv) == 0
    payload = json.loads((out / "evaluation.json").read_text())
    methods = set(payload["methods"])
    assert {
        "policy",
        "static_request",
        "static_max",
        "best_static_oracle",
        "best_reachable_paper",
        "policy_from_oracle",
        "policy_from_forecast",
        "policy_from_history",
        "policy_without_relocate",  # the shipped policy relocates
    } <= methods
    assert payload["config"]["history"] == str(store)
    # The same checkpoint compared to itself: run alone, it gives what it gives batched with the
    # other start rules and ablations (``run_methods``), up to float rounding.
    for scenario, rows in payload["summaries"].items():
        assert rows["policy[again]"] == pytest.approx(rows["policy"], rel=1e-6), scenario
        assert rows["policy_without_relocate"]["relocations"] == 0.0, scenario
    for scenario in ("deadline-critical", "budget-constrained"):
        assert set(payload["summaries"][scenario]) == methods
        assert len(payload["per_seed_objective"][scenario]["policy"]) == 2
        by_workload = payload["per_workload_objective"][scenario]
        jobs = sum(row["jobs"] for row in by_workload.values())
        assert jobs == payload["summaries"][scenario]["policy"]["episodes"]
    assert {"time_reduction", "cost_reduction", "sla_compliance_gain"} <= set(
        payload["headline"]["static_request"]
    )
    assert set(payload["front"]["figures"]) >= {"policy", "best_static_oracle", "static_request"}
    assert set(payload["oracle_gap"]) == {"time_over_oracle", "cost_over_oracle"}
    assert set(payload["forecast_start_oracle_gap"]) == {"time_over_oracle", "cost_over_oracle"}
    assert set(payload["reachable_gap"]) == {"time_over_anchor", "cost_over_anchor"}
    for gap in payload["reachable_gap"].values():
        assert np.isfinite(gap["job_average"]) and gap["job_average"] > 0
    per_workload_methods = {"best_reachable_paper", "best_static_profile", NO_RELOCATE, FORECAST_START}
    assert all(per_workload_methods <= set(row) for row in by_workload.values())
    csv_lines = (out / "evaluation.csv").read_text().strip().splitlines()
    assert len(csv_lines) == 1 + 2 * len(methods)
    markdown = (out / "evaluation.md").read_text()
    assert "## Headline figures" in markdown and "(reachable anchor)" in markdown
    assert "- policy time / anchor time:" in markdown and "best_reachable_paper" in markdown
    workload_header = "| workload | jobs | policy | policy_without_relocate | policy_from_forecast |"
    assert workload_header in markdown  # where relocating and the start pay, per workload
    assert payload["config"]["relocate_payback"] == 1.0 and "relocation payback rule" in markdown
    for plot in ("scenarios.png", "front.png"):
        assert (out / plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        # readable as the text files are (mkstemp's 0600 stayed on the plots)
        assert (out / plot).stat().st_mode & 0o777 == (out / "evaluation.json").stat().st_mode & 0o777
    # strict JSON: an undefined figure is null, never NaN (which strict parsers refuse)
    json.loads((out / "evaluation.json").read_text(), parse_constant=lambda name: pytest.fail(name))
    capsys.readouterr()

    before = (out / "evaluation.json").read_bytes()
    code, err = _main_exit(argv, capsys)
    assert code == 2 and "--overwrite" in err
    assert (out / "evaluation.json").read_bytes() == before

    # --overwrite without plots: the earlier evaluation's plots go with it (they stayed, beside
    # results they did not show). What is written is what matters here, so the evaluation itself
    # is the first one's results less a scenario (run_suite stubbed; it ran above).
    smaller_payload = copy.deepcopy(recorded[0][0])
    del smaller_payload["summaries"]["budget-constrained"]

    def smaller_run(policy: object, config: SuiteConfig, **kwargs: object) -> tuple:
        assert config.scenarios == ("deadline-critical",) and config.front_points == 0  # as asked
        return smaller_payload, recorded[0][1]

    monkeypatch.setattr(suite, "run_suite", smaller_run)
    smaller = ["--scenarios=deadline-critical", "--front_points=0", "--plots=no"]
    assert evaluate.main([*argv, *smaller, "--overwrite"]) == 0
    assert set(json.loads((out / "evaluation.json").read_text())["summaries"]) == {"deadline-critical"}
    assert not (out / "scenarios.png").exists() and not (out / "front.png").exists()


def test_evaluate_hands_its_threshold_to_every_policy_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--hold_below`` reaches the policy and every ``--compare``d one (``run_suite`` stubbed: what
    it does with them is the slow test below); without it they decide by the plain argmax."""
    import slamorl_jax.evaluation.suite as suite

    seen: list[dict[str, float]] = []

    def stub(policy: object, config: object, compare: dict, **kwargs: object) -> None:
        seen.append({"policy": policy.hold_below, **{n: p.hold_below for n, p in compare.items()}})
        raise SystemExit(9)

    monkeypatch.setattr(suite, "run_suite", stub)
    base = [f"--compare=again={SHIPPED}", "--no-progress", "--compilation_cache_dir=", "--plots=no"]
    for extra, expected in (([], 0.0), (["--hold_below=0.5"], 0.5)):
        with pytest.raises(SystemExit) as info:
            evaluate.main([*base, *extra, f"--out_dir={tmp_path / 'out'}"])
        assert info.value.code == 9 and seen.pop() == {"policy": expected, "again": expected}
    capsys.readouterr()


# slow: kept out of the default suite's time budget (run with -m slow)
@pytest.mark.slow
def test_suite_payload_renders_without_the_cli() -> None:
    """``run_suite`` from Python gives a payload that ``to_markdown`` and ``to_csv`` render as is."""
    policy = load_policy(SHIPPED)
    config = SuiteConfig(scenarios=("balanced",), episodes=48, seeds=1, front_points=0)
    payload, results = run_suite(policy, config)
    markdown = to_markdown(payload)
    assert "## balanced" in markdown and "(given in Python)" in markdown
    assert payload["reachable_gap"] == {}  # no deadline-critical or budget-constrained jobs
    assert "- balanced, all six SLAs met: policy" in markdown
    assert set(results["balanced"]) == set(payload["methods"])
    assert to_csv(payload).count("\n") == 1 + len(payload["methods"])
    # Holding every decision (a threshold no top probability reaches but 1 itself) keeps every job
    # at its request: the policy's figures are the request's, and the report says so.
    held, _ = run_suite(policy.holding(1.0), config)
    assert held["config"]["hold_below"] == 1.0 and "below 1 (`--hold_below`)" in to_markdown(held)
    rows = held["summaries"]["balanced"]
    assert rows["policy"]["reallocations"] == 0.0
    for figure in ("time_vs_request", "cost_vs_request", "all_slas_met"):
        assert rows["policy"][figure] == pytest.approx(rows["static_request"][figure], rel=1e-6), figure


def test_the_policy_without_relocate_takes_its_best_other_action() -> None:
    """The ablation's policy never relocates and acts as the greedy policy wherever that does not
    relocate; only a policy that can relocate gets the ablation among its methods."""
    policy = load_policy(SHIPPED)
    greedy = greedy_policy(policy.network)
    masked = greedy_policy_without(policy.network, RELOCATE_ACTION)
    assert masked is greedy_policy_without(load_policy(SHIPPED).network, RELOCATE_ACTION)
    obs = jax.random.uniform(jax.random.key(4), (256, NUM_FEATURES))
    weights = jax.random.dirichlet(jax.random.key(5), jnp.ones(3), (256,))
    # A slow last epoch on half the rows (none on the others), and a relocate gain raised so that the
    # greedy policy relocates there whatever the shipped policy learned.
    column = FEATURE_NAMES.index("surprise")
    surprise = obs.at[::2, column].set(1.0).at[1::2, column].set(0.5)
    params = jax.tree.map(lambda x: x, policy.params)
    gain = params["params"]["actor"]["relocate_gain"]
    params["params"]["actor"]["relocate_gain"] = {**gain, "bias": gain["bias"] + 100.0}
    key = jax.random.key(0)
    first, second = (np.asarray(f(params, surprise, weights, key)) for f in (greedy, masked))
    assert np.any(first == RELOCATE_ACTION) and not np.any(second == RELOCATE_ACTION)
    keeps = first != RELOCATE_ACTION
    np.testing.assert_array_equal(first[keeps], second[keeps])
    with_ablation = [m.name for m in policy_methods(greedy, baselines.requested, masked)]
    without = [m.name for m in policy_methods(greedy, baselines.requested)]
    assert NO_RELOCATE in with_ablation and NO_RELOCATE not in without


def test_holding_keeps_the_ablation_where_the_policy_holds() -> None:
    """With a threshold, the policy without relocate still acts as the (holding) greedy policy
    wherever that does not relocate, holds included, and never relocates."""
    policy = load_policy(SHIPPED)
    obs = jax.random.uniform(jax.random.key(6), (256, NUM_FEATURES))
    weights = jax.random.dirichlet(jax.random.key(7), jnp.ones(3), (256,))
    column = FEATURE_NAMES.index("surprise")
    obs = obs.at[::2, column].set(1.0).at[1::2, column].set(0.5)
    key = jax.random.key(0)
    greedy = greedy_policy(policy.network, 0.5)
    masked = greedy_policy_without(policy.network, RELOCATE_ACTION, 0.5)
    first, second = (np.asarray(f(policy.params, obs, weights, key)) for f in (greedy, masked))
    plain = np.asarray(greedy_policy(policy.network)(policy.params, obs, weights, key))
    assert np.any(first == NO_OP_ACTION) and np.any(first != plain)  # some decisions held
    assert not np.any(second == RELOCATE_ACTION)
    keeps = first != RELOCATE_ACTION
    np.testing.assert_array_equal(first[keeps], second[keeps])


def test_the_report_names_each_policys_threshold() -> None:
    """One sentence when every policy holds alike, each named when they differ, none without holding."""
    from slamorl_jax.evaluation.report import _holding_note

    assert _holding_note({"hold_below": 0.0, "compare_hold_below": {"b": 0.0}}) == ""
    assert "Every policy holds" in _holding_note({"hold_below": 0.5, "compare_hold_below": {"b": 0.5}})
    note = _holding_note({"hold_below": 0.5, "compare_hold_below": {"b": 0.0}})
    assert "the policy below 0.5" in note and "`policy[b]` below 0" in note
    assert _holding_note({"hold_below": 0.0}) == ""  # a report from before holding existed


def test_the_report_names_the_policys_payback_rule_where_it_has_one() -> None:
    from slamorl_jax.evaluation.report import _payback_note

    assert "at least 1 pause(s)" in _payback_note({"relocate_payback": 1.0})
    for cfg in ({"relocate_payback": 0.0}, {"relocate_payback": None}, {}):  # off, or a report from before
        assert _payback_note(cfg) == ""


def test_checkpoints_of_one_architecture_share_one_greedy_policy() -> None:
    """Two loads of a checkpoint (or two runs with the same network) get the same policy function,
    so evaluation compiles one runner for both; another architecture gets its own."""
    first, second = load_policy(SHIPPED), load_policy(SHIPPED)
    assert greedy_policy(first.network) is greedy_policy(second.network)
    assert (
        greedy_policy(first.network) is greedy_policy(second.network, 0) is greedy_policy(first.network, 0.0)
    )
    other = first.network.clone(config=dataclasses.replace(first.network.config, hidden_sizes=(8,)))
    assert greedy_policy(other) is not greedy_policy(first.network)


def test_a_compared_policy_trained_in_another_world_is_named_so() -> None:
    """A compared checkpoint trained without the fresh-nodes rule is judged in the main policy's
    world, and its method's description says both; one trained in the same world says nothing."""
    main_config = TrainConfig()
    other = dataclasses.replace(main_config, moves_leave_contention=False)
    assert world_difference(main_config, main_config) is None
    difference = world_difference(other, main_config)
    assert difference == "moves_leave_contention=False"
    priced = dataclasses.replace(other, prices="reference-code")
    assert world_difference(priced, main_config) == "moves_leave_contention=False, prices=reference-code"
    slow_restarts = dataclasses.replace(main_config, reallocation_pause_s=120.0)
    assert world_difference(slow_restarts, main_config) == "reallocation_pause_s=120.0"
    described = compared_method("old", lambda *a: None, {}, other, difference).description
    assert "trained with moves_leave_contention=False, judged in this run's world" in described
    assert "trained with" not in compared_method("same", lambda *a: None, {}, main_config).description


def test_a_compared_dual_policy_runs_with_its_own_dual_settings(env: JobAllocationEnv) -> None:
    """A compared checkpoint trained with other dual-weight settings is fed the weights it was
    trained with (step and decay), not the main policy's, and its description names them."""
    trained = TrainConfig(adapt_strength=3.0, weights="dual", dual_step=2.5, dual_decay=0.05)
    method = compared_method("tuned", lambda *a: None, {}, trained)
    ran = method.env_params(scenario_params("conflict", env.catalog))
    assert float(ran.dual_step) == 2.5 and float(ran.dual_decay) == np.float32(0.05)
    assert float(ran.adapt_strength) == 3.0 and WEIGHT_MODES[int(ran.weights_mode)] == "dual"
    assert "dual weights, eta = 3, dual step 2.5, decay 0.05" in method.description


def test_a_headline_figure_of_a_method_not_run_names_it() -> None:
    """``oracle_gap(results, "policy", "oracle")`` (the method is ``best_static_oracle``) raised a
    bare KeyError; a scenario left out still gives no figure, not an error."""
    results = {"deadline-critical": {"policy": {}, "best_static_oracle": {}}}
    with pytest.raises(ValueError, match="no 'oracle' in the deadline-critical results; they hold policy, "):
        headline.oracle_gap(results, "policy", "oracle")
    with pytest.raises(ValueError, match="no 'static_max' in the deadline-critical results"):
        headline.headline_figures(results, "policy", ("static_max",))
    assert headline.oracle_gap({"balanced": {}}, "policy", "oracle") == {}
    with pytest.raises(ValueError, match="results; they hold no method"):
        headline.oracle_gap({"deadline-critical": {}}, "policy", "oracle")
