"""Many hosts on JAX's own multi-controller runtime (``jax.distributed.initialize``).

Every process runs the same program on the same global arrays; the device mesh of
:mod:`slamorl_jax.sharding` spans the devices of all processes, so a process holds only its share
of the env batch and the partitioner's collectives cross the processes. Settings come from flags,
else from the environment (``JAX_COORDINATOR_ADDRESS``, ``JAX_NUM_PROCESSES``, ``JAX_PROCESS_ID``),
else from JAX's cluster detection (SLURM, Open MPI, Kubernetes, Cloud TPU).

Only process 0 logs, draws the progress bar and writes files of its own; every process takes part in
orbax's checkpoint saves and restores, which orbax coordinates (process 0 writes the shared files).
A process that stops answering is caught by the coordination service's heartbeat: after
``heartbeat_timeout_s`` the others are told and end with an error instead of waiting forever.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import socket
import threading

import jax
import numpy as np
from jax.experimental import multihost_utils

ENV_NUM_PROCESSES = "JAX_NUM_PROCESSES"
ENV_PROCESS_ID = "JAX_PROCESS_ID"
ENV_COORDINATOR = "JAX_COORDINATOR_ADDRESS"
MAX_PROCESSES = 1_000_000
MAX_TIMEOUT_S = 7 * 86_400


@dataclasses.dataclass(frozen=True)
class DistributedOptions:
    """How to join a multi-process run (``None`` fields: from the environment or the cluster)."""

    enabled: bool | None = None  # --distributed; None: not given (a coordinator address turns it on)
    coordinator_address: str | None = None
    num_processes: int | None = None
    process_id: int | None = None
    heartbeat_timeout_s: int = 100
    initialization_timeout_s: int = 300


def _env_int(name: str) -> int | None:
    """An integer environment variable, ``None`` when unset (one-line ``ValueError`` when not a number)."""
    text = os.environ.get(name)
    if text is None or text == "":
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"environment variable {name} must be an integer, got {text!r}") from None


def resolve(options: DistributedOptions) -> DistributedOptions:
    """``options`` with unset fields taken from the environment, checked (one-line ``ValueError``).

    A coordinator address in flags or environment turns the multi-process run on by itself, unless
    ``--nodistributed`` was given (then the environment's settings do not apply). A value from the
    environment that is not usable is named by its variable, not by the flag it stands in for.
    """
    if options.enabled is False and options.coordinator_address:
        raise ValueError("--coordinator_address needs --distributed, and --nodistributed was given")
    env_address = None if options.enabled is False else os.environ.get(ENV_COORDINATOR) or None
    address = options.coordinator_address or env_address
    if not (options.enabled or address):  # a single-process run: the environment's counts don't apply
        for name, value in (("--num_processes", options.num_processes), ("--process_id", options.process_id)):
            if value is not None:
                raise ValueError(f"{name} needs --distributed or --coordinator_address")
        options = dataclasses.replace(options, enabled=False)
        check(options)
        return options
    names = dict(FLAG_NAMES)
    if options.coordinator_address is None and address is not None:
        names["coordinator_address"] = f"environment variable {ENV_COORDINATOR}"
    count, index = options.num_processes, options.process_id
    if count is None and (count := _env_int(ENV_NUM_PROCESSES)) is not None:
        names["num_processes"] = f"environment variable {ENV_NUM_PROCESSES}"
    if index is None and (index := _env_int(ENV_PROCESS_ID)) is not None:
        names["process_id"] = f"environment variable {ENV_PROCESS_ID}"
    resolved = dataclasses.replace(
        options, enabled=True, coordinator_address=address, num_processes=count, process_id=index
    )
    check(resolved, names)
    return resolved


#: How :func:`check` names each setting: by its flag, unless the value came from elsewhere.
FLAG_NAMES = {
    "num_processes": "--num_processes",
    "process_id": "--process_id",
    "coordinator_address": "--coordinator_address",
}


def check(options: DistributedOptions, names: dict[str, str] | None = None) -> None:
    """The settings are usable: counts positive, the id in range, timeouts at least a second, the
    address ``host:port``. ``names``: how to name each of :data:`FLAG_NAMES`' settings."""
    name = {**FLAG_NAMES, **(names or {})}
    count, index = options.num_processes, options.process_id
    if count is not None and not 1 <= count <= MAX_PROCESSES:
        raise ValueError(f"{name['num_processes']} must be in [1, {MAX_PROCESSES:,}], got {count}")
    if index is not None:
        if index < 0:
            raise ValueError(f"{name['process_id']} must be >= 0, got {index}")
        if count is not None and index >= count:
            raise ValueError(
                f"{name['process_id']}={index} must be less than {name['num_processes']}={count}"
            )
    for flag, value in (
        ("--distributed_heartbeat_s", options.heartbeat_timeout_s),
        ("--distributed_init_timeout_s", options.initialization_timeout_s),
    ):
        if not 1 <= value <= MAX_TIMEOUT_S:
            raise ValueError(f"{flag} must be in [1, {MAX_TIMEOUT_S:,}] seconds, got {value}")
    if options.coordinator_address is not None and not _is_host_port(options.coordinator_address):
        raise ValueError(
            f"{name['coordinator_address']} must be host:port with a port in [1, 65535], "
            f"got {options.coordinator_address!r}"
        )


def _is_host_port(address: str) -> bool:
    """``address`` is ``host:port`` (an IPv6 host in brackets) with a port JAX's coordinator can
    bind: XLA aborts the whole process on any other port instead of raising."""
    host, colon, port = address.rpartition(":")
    return bool(host and colon) and port.isascii() and port.isdigit() and 1 <= int(port) <= 65535


class CoordinatorError(ValueError):
    """The coordinator address cannot serve the run: its host has no address this machine can
    resolve, or (for process 0, which runs the coordinator) its port is taken. JAX would wait out
    the join timeout and abort, or gRPC would end process 0 with a segmentation fault."""


def port_in_use(port: int) -> bool:
    """Whether a listening socket holds ``port`` on every interface of this machine (where the
    coordinator binds it: ``[::]``, or ``0.0.0.0`` without IPv6); a port in ``TIME_WAIT`` is free."""
    for family, host in ((socket.AF_INET6, "::"), (socket.AF_INET, "")):
        try:
            probe = socket.socket(family, socket.SOCK_STREAM)
        except OSError:  # no IPv6 on this machine: the IPv4 bind is the coordinator's
            continue
        with probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)  # IPv4 too, as gRPC
            try:
                probe.bind((host, port))
            except OSError as err:
                return err.errno == errno.EADDRINUSE
            return False
    return False


def check_coordinator(address: str, runs_it: bool) -> None:
    """:class:`CoordinatorError` unless ``address``'s host resolves and, where this process runs the
    coordinator (``runs_it``), its port is free."""
    host, _, port_text = address.rpartition(":")
    try:
        socket.getaddrinfo(host.strip("[]"), int(port_text), type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as err:  # socket.gaierror is an OSError
        reason = getattr(err, "strerror", None) or err
        raise CoordinatorError(
            f"--coordinator_address {address!r}: its host does not resolve ({reason})"
        ) from None
    if runs_it and port_in_use(int(port_text)):
        raise CoordinatorError(
            f"--coordinator_address {address!r}: port {port_text} is in use on this machine, where "
            "process 0 runs the coordinator; choose another port"
        )


def initialize(options: DistributedOptions) -> bool:
    """Join the multi-process run ``options`` describes; ``False`` (nothing done) when not enabled.

    Call before anything touches a JAX device. JAX fills what is still unset from the cluster it
    detects, and raises when it finds none. The coordinator's host must resolve, and its port be free
    on process 0, which runs it (:class:`CoordinatorError`).
    """
    if not options.enabled:
        return False
    if options.coordinator_address is not None:
        check_coordinator(options.coordinator_address, runs_it=options.process_id == 0)
    outcome: list[BaseException] = []

    def connect() -> None:
        try:
            jax.distributed.initialize(
                coordinator_address=options.coordinator_address,
                num_processes=options.num_processes,
                process_id=options.process_id,
                initialization_timeout=options.initialization_timeout_s,
                heartbeat_timeout_seconds=options.heartbeat_timeout_s,
            )
        except BaseException as err:  # handed to the caller's thread
            outcome.append(err)

    # The join blocks in C++ until every process is there (up to --distributed_init_timeout_s), and
    # Python runs signal handlers only between bytecodes of the main thread: joined on a thread of
    # its own, with the main thread waking every 0.2 s, Ctrl-C ends the process at once.
    joining = threading.Thread(target=connect, name="jax-distributed-join", daemon=True)
    joining.start()
    while joining.is_alive():
        joining.join(0.2)
    if outcome:
        raise outcome[0]
    return True


def is_primary() -> bool:
    """Whether this is process 0, the one that logs and writes files of its own."""
    return jax.process_index() == 0


def any_process(flag: bool) -> bool:
    """Whether ``flag`` holds on any process (a small collective that every process must call at
    the same point; just ``flag`` in a single-process run)."""
    if jax.process_count() == 1:
        return flag
    return bool(np.any(multihost_utils.process_allgather(np.asarray(flag, np.int32))))


def sync_processes(name: str) -> None:
    """Wait until every process reaches this point (the barrier ``name``); nothing in a
    single-process run."""
    if jax.process_count() > 1:
        multihost_utils.sync_global_devices(name)


def join(options: DistributedOptions) -> None:
    """:func:`initialize` unless this process already joined (at start-up); a clear error when JAX's
    backend has started first (multi-process runs must be started as ``python -m slamorl_jax.train``)."""
    if jax.distributed.is_initialized():
        return
    try:
        initialize(options)
    except RuntimeError as err:
        if "must be called before" not in str(err):
            raise
        raise ValueError(
            "a --distributed run must join before JAX starts: run it as python -m slamorl_jax.train"
        ) from None
