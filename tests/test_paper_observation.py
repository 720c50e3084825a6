"""``--observation=paper``: a policy of the paper's design reads the paper's 21 features alone."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slamorl_jax.agent.config import TrainConfig
from slamorl_jax.agent.config_checks import validate_config
from slamorl_jax.agent.networks import ActorCritic, init_params
from slamorl_jax.checkpoint import read_meta
from slamorl_jax.env.observation import NUM_FEATURES, NUM_PAPER_FEATURES
from slamorl_jax.policy_checkpoint import load_policy, save_policy

PAPER = TrainConfig(actions="paper", observation="paper", paper_suggestion_prior=False)


def test_the_network_reads_the_paper_features_alone() -> None:
    network = ActorCritic(validate_config(PAPER).network)
    params = init_params(network, jax.random.key(0), NUM_FEATURES)
    assert (
        params["params"]["actor"]["Dense_0"]["kernel"].shape[0] == NUM_PAPER_FEATURES + 3
    )  # and the weights
    obs = jax.random.normal(jax.random.key(1), (4, NUM_FEATURES))
    weights = jnp.full((4, 3), 1 / 3)
    changed = obs.at[:, NUM_PAPER_FEATURES:].set(7.0)  # the forecast block: read by nothing
    for a, b in zip(
        network.apply(params, obs, weights), network.apply(params, changed, weights), strict=True
    ):
        np.testing.assert_array_equal(a, b)
    assert TrainConfig().network.obs_dim is None  # the default reads every feature


@pytest.mark.parametrize(
    ("changes", "remedy"),
    [
        ({"actions": "paper"}, "add --paper_suggestion_prior=false"),
        ({"actions": "targets"}, "add --suggestion_prior=false"),
        ({"actions": "targets_relocate"}, "add --suggestion_prior=false"),
        ({"actions": "targets", "target_head": True}, "leave out --target_head"),
    ],
)
def test_a_prior_that_reads_the_forecast_block_is_refused(changes: dict, remedy: str) -> None:
    with pytest.raises(ValueError, match=f"--observation=paper: .* reads the forecast block: {remedy}$"):
        validate_config(TrainConfig(observation="paper", **changes))
    with pytest.raises(ValueError, match="--observation must be one of full, paper"):
        validate_config(TrainConfig(observation="forecast"))


def test_its_checkpoint_records_and_loads_the_21_features(tmp_path: Path) -> None:
    """The meta records the features the network reads, so the policy loads (and resumes) as trained;
    configs saved before the setting read every feature."""
    network = ActorCritic(PAPER.network)
    params = init_params(network, jax.random.key(0), NUM_FEATURES)
    save_policy(tmp_path / "policy", params, PAPER)
    meta, _, _ = read_meta(tmp_path / "policy")
    assert meta["observation_dim"] == NUM_PAPER_FEATURES
    policy = load_policy(tmp_path / "policy")
    assert policy.config.observation == "paper" and policy.network.config.obs_dim == NUM_PAPER_FEATURES
    obs = jnp.zeros((2, NUM_FEATURES))
    assert policy(obs, jnp.full((2, 3), 1 / 3)).shape == (2,)
    saved = dataclasses.asdict(TrainConfig())
    del saved["observation"]
    assert TrainConfig.from_dict(saved).observation == "full"
