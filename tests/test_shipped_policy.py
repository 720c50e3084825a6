"""The policy shipped in checkpoints/ loads without training code and acts; export round-trips."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slamorl_jax import checkpoint as ckpt
from slamorl_jax import policy_checkpoint
from slamorl_jax.agent.trainer import env_params_from_config, make_train
from slamorl_jax.env import NUM_ACTIONS, NUM_FEATURES, EnvParams, EnvState, JobAllocationEnv, make
from slamorl_jax.env.action_sets import NUM_MOVES
from slamorl_jax.env.actions import NO_OP_ACTION
from slamorl_jax.env.scenarios import SCENARIO_KINDS, with_scenario
from slamorl_jax.episodes import keep_allocation, run_episodes, summarise_episodes, with_init_strategy
from slamorl_jax.live import Recommendation, recommend
from slamorl_jax.live_job import LiveJob
from slamorl_jax.quality_bar import greedy_policy, objective

REPO = Path(__file__).resolve().parent.parent
SHIPPED = REPO / "checkpoints" / "default"
# The default command with --actions=targets (no relocate), seed 0: the default before 2026-12-03.
TARGETS = REPO / "checkpoints" / "targets"
LEGACY = Path(__file__).resolve().parent / "data" / "legacy-policy-v1"
# The README's example job (imagenet-resnet50 on 4 T4s; its 10 epochs ran at the current allocation),
# the file `python -m slamorl_jax.recommend --job=docs/example_job.json` reads.
EXAMPLE_JOB = REPO / "docs" / "example_job.json"
README_JOB = json.loads(EXAMPLE_JOB.read_text(encoding="utf-8"))


def reset_jobs(env: JobAllocationEnv, params: EnvParams, n: int) -> tuple[jax.Array, EnvState]:
    """``n`` fresh jobs under one jitted reset (eager, every op of the reset compiles on its own)."""
    return jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(jax.random.split(jax.random.key(0), n), params)


def test_shipped_policy_acts_on_env_observations() -> None:
    """``load_policy`` reads the shipped export; greedy and sampled actions are valid for real states."""
    policy = policy_checkpoint.load_policy(SHIPPED)
    env, params = make("mixed")
    obs, state = reset_jobs(env, params, 16)
    greedy = np.asarray(policy(obs, state.weights))
    sampled = np.asarray(policy(obs, state.weights, jax.random.key(1)))
    for actions in (greedy, sampled):
        assert actions.shape == (16,)
        assert np.all((actions >= 0) & (actions < env.num_actions))
    assert policy.values(obs, state.weights).shape == (16, 3)


def test_export_keeps_the_policy_and_refuses_a_used_destination(tmp_path: Path) -> None:
    """Exporting an export gives identical parameters; exporting onto checkpoints fails clearly."""
    exported = policy_checkpoint.export_policy(SHIPPED, tmp_path / "copy")
    original, copy = policy_checkpoint.load_policy(SHIPPED), policy_checkpoint.load_policy(exported)
    assert policy_checkpoint.params_equal(original.params, copy.params)
    assert copy.config == original.config
    obs = jax.random.uniform(jax.random.key(2), (8, NUM_FEATURES))
    weights = jnp.full((8, 3), 1.0 / 3.0)
    np.testing.assert_array_equal(np.asarray(original(obs, weights)), np.asarray(copy(obs, weights)))
    with pytest.raises(ckpt.CheckpointError, match="already holds checkpoints"):
        policy_checkpoint.export_policy(SHIPPED, tmp_path / "copy")


def staged_files(destination: Path) -> list[Path]:
    """The files of a policy save staged beside ``destination`` (``run_dirs.staged_new_folder``)."""
    return [
        f for stage in destination.parent.glob(f".{destination.name}.*.partial") for f in stage.rglob("*")
    ]


@pytest.mark.parametrize("failure", ["full disk", "interrupted", "lost the race"])
@pytest.mark.parametrize("existing", [False, True], ids=["new folder", "empty folder"])
def test_a_failed_export_leaves_its_destination_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: str, existing: bool
) -> None:
    """A policy save that fails or is stopped after writing (orbax reports a full disk as a
    ``ValueError``; a stop signal) used to leave its step behind, so the same command was then
    refused ("must be a new or empty folder") and every reader found no complete checkpoint. It is
    written beside the destination and renamed into it whole: a failure removes what it wrote, with
    the folders it made, and is one ``CheckpointError`` line; a save that finds the destination
    filled by another meanwhile removes only its own files."""
    destination = tmp_path / "new" / "export" if not existing else tmp_path / "export"
    if existing:
        destination.mkdir()
    real_wait = ckpt.ocp.CheckpointManager.wait_until_finished

    def written_then_failed(manager: object) -> None:
        real_wait(manager)
        if not staged_files(destination):  # orbax's own wait before it writes
            return
        if failure == "interrupted":
            raise KeyboardInterrupt
        if failure == "lost the race":
            destination.mkdir(parents=True, exist_ok=True)
            (destination / "theirs").write_text("another run's\n")
            return
        raise ValueError(f"RESOURCE_EXHAUSTED: Error writing {'x' * 400}: Failed [os_error_code='28']")

    monkeypatch.setattr(ckpt.ocp.CheckpointManager, "wait_until_finished", written_then_failed)
    if failure == "interrupted":
        with pytest.raises(KeyboardInterrupt):
            policy_checkpoint.export_policy(SHIPPED, destination)
    else:
        message = (
            "filled by another program" if failure == "lost the race" else r"export: No space left on device$"
        )
        with pytest.raises(ckpt.CheckpointError, match=message):
            policy_checkpoint.export_policy(SHIPPED, destination)
    assert not staged_files(destination) and not list(destination.parent.glob("*.partial"))
    if failure == "lost the race":
        assert [p.name for p in destination.iterdir()] == ["theirs"]
        return
    assert [p.name for p in tmp_path.iterdir()] == (["export"] if existing else [])
    assert not existing or not any(destination.iterdir())
    monkeypatch.undo()
    assert policy_checkpoint.params_equal(
        policy_checkpoint.load_policy(policy_checkpoint.export_policy(SHIPPED, destination)).params,
        policy_checkpoint.load_policy(SHIPPED).params,
    )
    (tmp_path / "plain").mkdir()  # the export has a plain folder's mode (mkdtemp's would be 0700)
    assert destination.stat().st_mode == (tmp_path / "plain").stat().st_mode


# slow: kept out of the default suite's time budget (run with -m slow)
@pytest.mark.slow
def test_an_export_cannot_be_resumed() -> None:
    """An export has no training state: ``restore_state`` says so instead of crashing."""
    config = dataclasses.replace(
        policy_checkpoint.load_policy(SHIPPED).config, num_envs=4, total_timesteps=64, updates_per_chunk=1
    )
    trainer = make_train(config)
    template = trainer.init(jax.random.key(0), env_params_from_config(config))
    with pytest.raises(ckpt.CheckpointError, match="cannot restore training state"):
        ckpt.restore_state(SHIPPED, template)


@pytest.mark.parametrize(
    ("shipped", "eta"),
    [(SHIPPED, 1.5), pytest.param(SHIPPED.parent / "static-weights", 0.0, marks=pytest.mark.slow)],
)
def test_shipped_policies_still_beat_the_request(shipped: Path, eta: float) -> None:
    """Guard against env or observation changes that silently break the shipped policies: on fresh
    jobs each still beats the static request on each kind's objective and meets all SLAs more often
    (the adaptive one, eta = 1.5, and the static-weight ablation, trained with eta = 0)."""
    policy = policy_checkpoint.load_policy(shipped)
    assert policy.config.adapt_strength == eta
    greedy = greedy_policy(policy.network)
    base = env_params_from_config(policy.config)
    env, _ = make("mixed")
    for scenario in SCENARIO_KINDS:
        params = with_init_strategy(with_scenario(base, scenario), "requested")
        key = jax.random.key(11)
        ours = summarise_episodes(run_episodes(env, params, greedy, key, 512, policy.params))
        request = summarise_episodes(run_episodes(env, params, keep_allocation, key, 512))
        assert objective(scenario, ours) < objective(scenario, request) - 0.05, scenario
        assert ours["all_slas_met"] > request["all_slas_met"] + 0.05, scenario


def test_a_checkpoint_from_before_action_sets_still_loads_and_acts() -> None:
    """A policy saved by format 1 before action sets and the forecast block (the former shipped
    default) loads as a ``paper`` policy reading the first 21 features and acts on today's env."""
    policy = policy_checkpoint.load_policy(LEGACY)
    assert policy.config.actions == "paper" and policy.config.observation == "paper"
    assert policy.network.config.obs_dim == 21 and policy.network.config.num_actions == NUM_ACTIONS
    env, params = make("mixed")
    obs, state = reset_jobs(env, params, 16)
    assert obs.shape[-1] == NUM_FEATURES > 21
    actions = np.asarray(policy(obs, state.weights))
    assert np.all((actions >= 0) & (actions < NUM_ACTIONS))
    # It reads only the paper's block: the forecast block does not change its decisions.
    scrambled = obs.at[:, 21:].set(0.5)
    np.testing.assert_array_equal(actions, np.asarray(policy(scrambled, state.weights)))


def _advice(policy: policy_checkpoint.LoadedPolicy, **change: object) -> tuple[int, int]:
    result = _recommendation(policy, **change)
    return result.gpus, result.cpus


def _recommendation(policy: policy_checkpoint.LoadedPolicy, **change: object) -> Recommendation:
    return recommend(policy, LiveJob.from_dict({**README_JOB, **change}))


def _projected_cost(result: Recommendation) -> float | None:
    """The forecast's projected cost / budget feature of the advised candidate (keep or a target);
    None for a one-step move, which has no forecast of its own."""
    if result.action == NO_OP_ACTION:
        return result.observation["keep_cost"]
    if result.action >= NUM_MOVES:
        return result.observation[f"target{result.action - NUM_MOVES}_cost"]
    return None


@pytest.mark.parametrize(
    ("shipped", "hold_below"),
    [(SHIPPED, 0.0), (TARGETS, 0.0), (SHIPPED, 0.5)],
    ids=["default", "targets", "default-holding-0.5"],
)
@pytest.mark.parametrize("preference", ["time", "balanced", "cost"])
def test_shipped_policy_answers_the_readme_job_sensibly(
    shipped: Path, hold_below: float, preference: str
) -> None:
    """Sweep the README's job: a deadline the current allocation cannot meet gets more GPUs; a budget
    it cannot meet gets advice that lowers the projected cost (and meets the budget where some
    candidate's forecast does); a job far below the profile's throughput is not told to keep
    everything. Holding below 0.5 (``--hold_below``, ``agent.decision``) still answers every deadline
    with more GPUs; an answer it holds (the budgets just under what the allocation needs, where the
    policy is less sure) keeps the job and says ``held``, and the other answers are the argmax's.

    Lowering the cost need not mean fewer GPUs: ImageNet ResNet-50 scales almost linearly, so 16
    GPUs at 4 CPUs each are forecast to cost less than the current 4 GPUs at 8 CPUs each, and to
    finish four times sooner; a one-step move (no forecast of its own) must shed resources. The
    default (relocating) policy may answer the slow job by restarting it on other nodes (it is not
    keeping everything). ``checkpoints/targets``, the default before relocation, passes too."""
    policy = policy_checkpoint.load_policy(shipped).holding(hold_below)
    gpus, cpus = README_JOB["gpus"], README_JOB["cpus"]
    # 15,500 s + 50 epochs x 1,550 s = 93,000 s at the current allocation.
    for deadline in (90_000, 70_000, 50_000, 40_000):
        more_gpus, _ = _advice(policy, deadline_s=deadline, budget_usd=1_000, preference=preference)
        assert more_gpus > gpus, (preference, deadline)
    # 14 $ + 50 epochs x 1,550 s x 3.23 $/h = 83.5 $ at the current allocation, which the forecast
    # projects too (the job's epochs ran at the profile's pace).
    checked = held = 0
    for budget in (80, 70, 60, 50):
        result = _recommendation(policy, deadline_s=1_000_000, budget_usd=budget, preference=preference)
        if result.held:
            assert (result.gpus, result.cpus, result.action) == (gpus, cpus, NO_OP_ACTION), (
                preference,
                budget,
            )
            held += 1
            continue
        advised = _projected_cost(result)
        if advised is None:
            assert result.gpus <= gpus and result.cpus <= cpus, (preference, budget)
            assert (result.gpus, result.cpus) != (gpus, cpus), (preference, budget)
            continue
        keep = result.observation["keep_cost"]
        if keep <= 0.5:  # the forecast (corrected by the job's epochs) says it holds where it is
            continue
        assert advised < keep, (preference, budget, advised, keep)
        cheapest = min(v for k, v in result.observation.items() if k.endswith("_cost"))
        if cheapest <= 0.5:  # some candidate is forecast to meet the budget: so is the advice
            assert advised <= 0.5, (preference, budget, advised)
        checked += 1
    assert checked >= (2 if hold_below else 3) and (held == 0 or hold_below > 0), preference
    # A tenth of the README job's throughput over all its epochs (its deadline, budget and
    # throughput SLAs all at risk), its time and spend so far those ten epochs' (a report whose
    # elapsed time is shorter than its epochs is refused).
    slow_epochs = [{**epoch, "epoch_time_s": 15_500} for epoch in README_JOB["history"]]
    so_far = {"elapsed_s": 10 * README_JOB["elapsed_s"], "cost_usd": 10 * README_JOB["cost_usd"]}
    slow = _recommendation(
        policy, throughput=83, last_epoch_time_s=15_500, history=slow_epochs, preference=preference, **so_far
    )
    assert slow.relocate or (slow.gpus, slow.cpus) != (gpus, cpus), preference


def test_the_shipped_policy_relocates_a_job_whose_last_epoch_was_much_slower() -> None:
    """``checkpoints/default`` (``targets_relocate``): the README job, its last epoch 48 % slower
    than the nine before at the same allocation (a slow node, or a noisy neighbour), is told to
    relocate, at the same allocation; with that epoch as fast as the others it is not."""
    policy = policy_checkpoint.load_policy(SHIPPED)
    loose = {"deadline_s": 200_000, "budget_usd": 400, "elapsed_s": 16_250}
    history = [*README_JOB["history"][:-1], {**README_JOB["history"][-1], "epoch_time_s": 2_300}]
    slowed = _recommendation(policy, **loose, last_epoch_time_s=2_300, throughput=560, history=history)
    assert slowed.relocate and (slowed.gpus, slowed.cpus) == (README_JOB["gpus"], README_JOB["cpus"])
    assert not _recommendation(policy, **loose).relocate


def test_readme_live_snippet_runs_on_the_example_job(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's ``LiveJob`` snippet runs as written from the repository root, and its job is
    ``docs/example_job.json``, the job the sweep above and the README's ``recommend`` command use."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```python\n(.*?)```", readme, flags=re.S) if "LiveJob(" in b]
    assert len(blocks) == 1
    assert "--job=docs/example_job.json" in readme
    monkeypatch.chdir(REPO)
    namespace: dict = {"__name__": "readme"}
    exec(compile(blocks[0], "README.md", "exec"), namespace)
    assert namespace["job"] == LiveJob.from_dict(README_JOB)
    advice = namespace["advice"]
    assert capsys.readouterr().out == f"{advice.gpus} {advice.cpus} {advice.action_name}\n"


def test_the_shipped_default_is_what_the_default_command_trains() -> None:
    """``checkpoints/default`` was trained with every default of ``python -m slamorl_jax.train``
    (seed 0) on this version's observation and action grid; re-make it when they change."""
    from slamorl_jax.agent.config import TrainConfig

    meta, _, _ = ckpt.read_meta(SHIPPED)
    assert meta["format_version"] == ckpt.FORMAT_VERSION
    assert meta["observation_dim"] == NUM_FEATURES
    policy = policy_checkpoint.load_policy(SHIPPED)  # refuses another observation layout or action count
    assert policy.config == TrainConfig(seed=0)
    # checkpoints/targets: the same command but for the action set (the default before relocation)
    assert policy_checkpoint.load_policy(TARGETS).config == TrainConfig(seed=0, actions="targets")
    # checkpoints/ungated: the same command before the relocation gate (its config has none: 0)
    assert policy_checkpoint.load_policy(SHIPPED.parent / "ungated").config == TrainConfig(
        seed=0, relocate_gate=0.0, relocate_payback=0.0
    )
    # checkpoints/gated: the same command before the relocation payback rule (its config has none: 0)
    assert policy_checkpoint.load_policy(SHIPPED.parent / "gated").config == TrainConfig(
        seed=0, relocate_payback=0.0
    )
