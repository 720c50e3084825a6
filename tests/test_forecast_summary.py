"""``env/forecast_summary.py`` and the ``forecast`` block of a live answer: the projections in
seconds, dollars and SLAs are the ones the observation's forecast features encode, for keep, the
forecast's first choice and the answer where it is one of the forecast's candidates."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.agent.networks import ActorCritic, init_params
from slamorl_jax.env import action_sets
from slamorl_jax.env.forecast_summary import NOT_PROJECTED, answer_candidate
from slamorl_jax.env.observation import FEATURE_NAMES
from slamorl_jax.env.scenarios import scenario_params
from slamorl_jax.live import Recommendation, live_state, recommend, recommend_many
from slamorl_jax.live_job import LiveJob
from slamorl_jax.policy_checkpoint import LoadedPolicy, load_policy

SHIPPED = Path(__file__).resolve().parent.parent / "checkpoints" / "default"
EXAMPLE = json.loads((SHIPPED.parent.parent / "docs" / "example_job.json").read_text(encoding="utf-8"))
RATIO_CAP = 2.0  # forecast.py: projected time and cost over their targets are clipped to [0, 2], halved


def test_an_answer_is_keep_a_target_or_not_projected() -> None:
    params = scenario_params("mixed")
    job = LiveJob.from_dict(EXAMPLE)
    state = live_state(job, params)
    targets = np.asarray(params.target_allocation)

    def candidate(gpus: int, cpus: int, relocate: bool = False) -> int:
        return int(answer_candidate(state, params, jnp.int32(gpus), jnp.int32(cpus), jnp.asarray(relocate)))

    assert candidate(job.gpus, job.cpus) == 0
    assert candidate(job.gpus, job.cpus, relocate=True) == NOT_PROJECTED  # keep's projection pays no pause
    for k in (0, 1, 2, 37, len(targets) - 1):  # on the default grid targets 0-2 clip to one allocation
        gpus, cpus = map(int, targets[k])
        first = int(np.flatnonzero((targets[:, 0] == gpus) & (targets[:, 1] == cpus))[0])
        expected = 0 if (gpus, cpus) == (job.gpus, job.cpus) else 1 + first
        assert candidate(gpus, cpus) == expected
    held_by_none = next(
        (g, c)
        for g in range(1, 17)
        for c in range(1, 200)
        if not ((targets[:, 0] == g) & (targets[:, 1] == c)).any()
    )
    assert candidate(*held_by_none) == NOT_PROJECTED


def _features(answer: Recommendation, name: str) -> float:
    return answer.observation[name]


def _matches_features(outcome: dict, prefix: str, answer: Recommendation, job: LiveJob) -> None:
    """``outcome`` in seconds and dollars is what the observation's ``prefix`` features encode."""
    time_ratio = min(outcome["time_s"] / job.deadline_s, RATIO_CAP)
    cost_ratio = min(outcome["cost_usd"] / job.budget_usd, RATIO_CAP)
    assert _features(answer, f"{prefix}_time") == pytest.approx(0.5 * time_ratio, rel=1e-5)
    assert _features(answer, f"{prefix}_cost") == pytest.approx(0.5 * cost_ratio, rel=1e-5)
    others = round(4 * _features(answer, f"{prefix}_other_slas"))
    assert outcome["slas_met"] == others + outcome["deadline_met"] + outcome["budget_met"]
    assert outcome["deadline_met"] == (outcome["time_s"] <= job.deadline_s)
    assert outcome["budget_met"] == (outcome["cost_usd"] <= job.budget_usd)


def test_the_readme_jobs_answer_projects_what_its_observation_encodes() -> None:
    """The shipped policy moves the README job to a target: the block's keep and answer are the
    observation's keep and that target's features in the job's units, the first choice is the
    candidate the observation flags, and held or batched the block agrees."""
    policy = load_policy(SHIPPED)
    job = LiveJob.from_dict(EXAMPLE)
    params = scenario_params("mixed")
    answer = recommend(policy, job, params)
    block = answer.forecast
    assert answer.action >= action_sets.NUM_MOVES and not answer.relocate  # a target
    k = answer.action - action_sets.NUM_MOVES
    assert (block["answer"]["gpus"], block["answer"]["cpus"]) == (answer.gpus, answer.cpus)
    _matches_features(block["answer"], f"target{k}", answer, job)
    assert (block["keep"]["gpus"], block["keep"]["cpus"]) == (job.gpus, job.cpus)
    _matches_features(block["keep"], "keep", answer, job)
    assert block["keep"]["time_s"] > job.elapsed_s and block["keep"]["cost_usd"] > job.cost_usd

    flagged = [i for i in range(action_sets.NUM_TARGETS) if _features(answer, f"target{i}_suggested") > 0.5]
    if _features(answer, "keep_suggested") > 0.5:
        assert not flagged and block["first_choice"] == block["keep"]
    else:
        (first,) = flagged
        gpus, cpus = map(int, np.asarray(params.target_allocation)[first])
        assert (block["first_choice"]["gpus"], block["first_choice"]["cpus"]) == (gpus, cpus)
        _matches_features(block["first_choice"], f"target{first}", answer, job)

    held = recommend(policy.holding(1.0), job, params).forecast
    assert held["answer"] == held["keep"] == block["keep"]
    # A batch of three (padded to four with copies of the first): each job its own block, as alone.
    roomy = LiveJob.from_dict({**EXAMPLE, "deadline_s": 200_000, "budget_usd": 500})
    epoch = {"gpus": 4, "cpus": 32, "epoch_time_s": 1550.0}
    later = LiveJob.from_dict(
        {**EXAMPLE, "epochs_done": 30, "elapsed_s": 46_500, "cost_usd": 42, "history": [epoch] * 30}
    )
    batch = [job, roomy, later]
    for many, one in zip(recommend_many(policy, batch, params), batch, strict=True):
        alone = recommend(policy, one, params).forecast
        for name in ("keep", "first_choice"):
            assert {k: v for k, v in many.forecast[name].items() if k not in ("time_s", "cost_usd")} == {
                k: v for k, v in alone[name].items() if k not in ("time_s", "cost_usd")
            }
            for field in ("time_s", "cost_usd"):
                assert many.forecast[name][field] == pytest.approx(alone[name][field], rel=1e-5)
    assert [a.forecast["keep"]["deadline_met"] for a in recommend_many(policy, batch, params)] == [
        False, True, False
    ]  # fmt: skip
    json.dumps(answer.as_dict())


def test_a_relocation_is_not_projected() -> None:
    """Relocate pays a pause keep's projection leaves out: the block has no answer for it."""
    config = TrainConfig(actions="targets_relocate", relocate_gate=0.0, relocate_payback=0.0)
    network = ActorCritic(config.network)
    weights = init_params(network, jax.random.key(0), len(FEATURE_NAMES))
    bias = weights["params"]["actor"]["Dense_0"]["bias"]
    weights["params"]["actor"]["Dense_0"]["bias"] = bias.at[action_sets.RELOCATE_ACTION].set(1e3)
    act = jax.jit(lambda p, obs, w: jnp.argmax(network.apply(p, obs, w)[0], axis=-1))
    policy = LoadedPolicy(config=config, params=weights, network=network, step=0, _act=act)
    answer = recommend(policy, LiveJob.from_dict(EXAMPLE), scenario_params("mixed"))
    assert answer.relocate and answer.forecast["answer"] is None
    assert answer.forecast["keep"]["gpus"] == EXAMPLE["gpus"]
