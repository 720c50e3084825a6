"""Build hook: the wheel carries the shipped policy.

The policy lives in the repository at ``checkpoints/default`` (one copy, re-made with the env and
learner), not inside the package. ``build_py`` copies it into the built package as
``slamorl_jax/shipped/default`` so that an installed wheel answers ``recommend`` and ``evaluate``
with their default ``--checkpoint`` from any folder (``slamorl_jax.shipped_policy``). Everything
else about the build is in ``pyproject.toml``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

#: The shipped policy in the repository, and where the built package holds its copy (the same paths
#: as ``slamorl_jax.shipped_policy.SHIPPED_POLICY`` and ``INSTALLED_POLICY``; tests check both).
REPOSITORY_POLICY = Path("checkpoints") / "default"
PACKAGED_POLICY = Path("slamorl_jax") / "shipped" / "default"


class BuildWithShippedPolicy(build_py):
    """``build_py`` that also copies the shipped policy into the built package (not for an editable
    install, which finds it in the checkout)."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        source = Path(__file__).resolve().parent / REPOSITORY_POLICY
        if not source.is_dir():
            raise SystemExit(f"cannot build: the shipped policy {REPOSITORY_POLICY} is missing")
        destination = Path(self.build_lib) / PACKAGED_POLICY
        shutil.rmtree(destination, ignore_errors=True)
        shutil.copytree(source, destination)


if __name__ == "__main__":
    setup(cmdclass={"build_py": BuildWithShippedPolicy})
