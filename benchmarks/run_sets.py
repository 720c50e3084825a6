"""The training runs a benchmark compares, checked to belong together before any is evaluated.

A spread over training seeds means something only when every run finished its budget and the runs
differ in their seed alone; an ablation's forms only when they differ in what is ablated. Two
benchmarks take existing runs (``training_seeds --runs`` and ``weights_ablation --runs``): a run
stopped part-way, or one of another command (another reward, action set or env), went into the
figures without a word, and the ablation evaluated every form on the first run's env.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from slamorl_jax.cli_args import fail

#: What the runs of one form (one training command over seeds) may differ in.
SEED_ONLY = ("seed",)


@dataclasses.dataclass(frozen=True)
class Run:
    """One finished run: its folder, its config and the update its newest checkpoint holds."""

    path: Path
    config: Any  # slamorl_jax.agent.config.TrainConfig (imported lazily: it loads JAX)
    update: int

    def as_dict(self, settings: Sequence[str]) -> dict[str, Any]:
        """The run's folder, update and the named settings, for a report."""
        return {
            "run": str(self.path),
            "update": self.update,
            **{n: getattr(self.config, n) for n in settings},
        }


def read_run(path: Path) -> Run:
    """The run in ``path`` (a run folder with ``checkpoints/``): ``CheckpointError`` for one with no
    complete checkpoint or a damaged meta."""
    from slamorl_jax.agent.config import TrainConfig
    from slamorl_jax.checkpoint import read_meta

    meta, _, step = read_meta(path / "checkpoints")
    return Run(path, TrainConfig.from_dict(meta["config"]), step)


#: Env settings whose ``None`` means the scenario's or the env's own value: ``None`` and that value,
#: spelt out, train the same env.
ENV_DEFAULTED = ("preference", "event_share", "reallocation_pause_s")


def differences(a: Any, b: Any, may_differ: Sequence[str]) -> list[str]:
    """The settings two configs differ in beyond ``may_differ``, each as ``name=a vs b``; an
    ``ENV_DEFAULTED`` setting only where the env it gives differs (``None`` against its value spelt
    out is no difference)."""
    names = [
        field.name
        for field in dataclasses.fields(a)
        if field.name not in may_differ and getattr(a, field.name) != getattr(b, field.name)
    ]
    spelt = [
        name
        for name in names
        if name in ENV_DEFAULTED and _same_env(a, dataclasses.replace(a, **{name: getattr(b, name)}))
    ]
    names = [name for name in names if name not in spelt]
    return [f"{name}={getattr(a, name)!r} vs {getattr(b, name)!r}" for name in names]


def _same_env(a: Any, b: Any) -> bool:
    """Whether two configs train on the same env (``env_params_from_config``, leaf by leaf, as this
    version builds it: a run that left a setting unset when the env's own value was another is
    judged by today's)."""
    from slamorl_jax.agent.trainer import env_params_from_config
    from slamorl_jax.policy_checkpoint import params_equal

    try:
        first, second = (env_params_from_config(config) for config in (a, b))
    except (KeyError, TypeError, ValueError):  # a config today's env cannot build: named as a difference
        return False
    return params_equal(first, second)


def checked_runs(
    forms: dict[str, list[Path]], prog: str, forms_may_differ: Sequence[str] = ()
) -> dict[str, list[Run]]:
    """Every form's runs read and checked, or exit 2 with one line naming the form and the run: each
    finished (its newest checkpoint at its config's last update), no run or seed twice in a form, a
    form's runs of one command but the seed, and every form of the first form's command but the seed
    and ``forms_may_differ``. A form named ``""`` is the runs of ``--runs`` itself."""
    from slamorl_jax.checkpoint import CheckpointError

    read: dict[str, list[Run]] = {}
    for name, paths in forms.items():
        flag = f"--runs {name}".rstrip()
        runs = []
        for path in paths:
            try:
                run = read_run(path)
            except CheckpointError as err:
                fail(f"{flag}: {err}", prog)
            if run.update < run.config.num_updates:
                fail(
                    f"{flag}: {path} stopped at update {run.update:,} of {run.config.num_updates:,}; "
                    "finish it (train --resume) or leave it out",
                    prog,
                )
            runs.append(run)
        _check_distinct(flag, runs, prog)
        for run in runs[1:]:
            differ = differences(runs[0].config, run.config, SEED_ONLY)
            if differ:
                fail(
                    f"{flag}: {run.path} was trained with other settings than {runs[0].path} "
                    f"({'; '.join(differ)}); a form's runs differ in their seed only",
                    prog,
                )
        read[name] = runs
    first_name, first = next(iter(read.items()))
    for name, runs in read.items():
        differ = differences(first[0].config, runs[0].config, (*SEED_ONLY, *forms_may_differ))
        if differ:
            allowed = ", ".join((*SEED_ONLY, *forms_may_differ))
            fail(
                f"--runs {name}: its runs were trained with other settings than {first_name}'s "
                f"({'; '.join(differ)}); forms differ in {allowed} only",
                prog,
            )
    return read


def _check_distinct(flag: str, runs: list[Run], prog: str) -> None:
    """Exit 2 when a form names one run twice or two runs of one seed (a spread of one seed)."""
    folders: dict[Path, Path] = {}
    seeds: dict[int, Path] = {}
    for run in runs:
        if run.path.resolve() in folders:
            fail(f"{flag}: {run.path} is named twice", prog)
        if run.config.seed in seeds:
            fail(
                f"{flag}: {seeds[run.config.seed]} and {run.path} were both trained with "
                f"--seed={run.config.seed}; a spread needs one run per seed",
                prog,
            )
        folders[run.path.resolve()] = run.path
        seeds[run.config.seed] = run.path
