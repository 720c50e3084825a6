"""``python -m slamorl_jax.recommend --http=HOST:PORT``: the policy's answers over HTTP, in one warm process.

For a platform whose scheduler speaks HTTP rather than a process's standard input (``--serve``):

* ``POST /recommend`` with one job (the JSON object ``--job`` reads) answers with the object ``--job``
  prints; with a JSON list of jobs, with a list of those objects in the same order, from one compiled
  call (``live.recommend_many``, as ``--jobs``);
* ``GET /health`` answers ``{"status": "ok", "step": ..., "actions": ...}`` (the policy's training
  step and action set) once the policy is loaded;
* a request it cannot answer gets ``{"error": "..."}`` (one line) with status 400 (bad JSON, a bad or
  finished job, an allocation the policy's cluster cannot hold; a list's bad job is named by its
  ``item``), 404 (another path), 405 (``PUT``, ``DELETE``, ``PATCH``), 411 (no ``Content-Length``)
  or 413 (a body over ``max_body_bytes``); a fault of the server's own gets 500 and one log line.

A connection carries request after request (HTTP/1.1 keep-alive) until an error answer closes it.
Each connection is read and answered on a thread of its own, so a slow client holds up no other
(it is dropped after ``REQUEST_TIMEOUT_S``), while the policy answers one request at a time (a lock
around its compiled calls); an answer takes milliseconds once the first of its shape compiled.
The server has no TLS and no authentication: bind it to ``127.0.0.1`` (the default host) or to a
network only the platform reaches, behind the platform's own proxy.
"""

from __future__ import annotations

import http.server
import json
import socket
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from slamorl_jax.cli_args import first_line
from slamorl_jax.json_input import json_kind, loads_strict
from slamorl_jax.recommend_serve import MAX_ERROR_CHARS

if TYPE_CHECKING:
    from slamorl_jax.checkpoint import LoadedPolicy

RECOMMEND_PATH = "/recommend"
HEALTH_PATH = "/health"
DEFAULT_HOST = "127.0.0.1"
MAX_BODY_BYTES = 16 * 1024 * 1024  # a list of some tens of thousands of jobs
REQUEST_TIMEOUT_S = 60  # a client that stops sending mid-request is dropped after this


class RequestError(ValueError):
    """A request answered with an HTTP error status and a one-line reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``:PORT`` / ``PORT`` for :data:`DEFAULT_HOST`) as ``(host, port)``; port 0 asks
    the system for a free one. ``ValueError`` naming what is wrong."""
    host, _, port_text = text.rpartition(":")
    host = host.strip("[]") or DEFAULT_HOST  # [::1]:8080 names an IPv6 host
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"--http must be HOST:PORT, got {text!r}") from None
    if not 0 <= port <= 65_535:
        raise ValueError(f"--http port must be in [0, 65535], got {port}")
    return host, port


def answer(policy: LoadedPolicy, body: bytes) -> Any:
    """The answer to a ``POST /recommend`` body: one job's answer object, or a list of them for a list
    of jobs; :class:`RequestError` (status 400) for a body that is not one."""
    from slamorl_jax.live import LiveJob, recommend, recommend_many

    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise RequestError(400, "the body is not UTF-8 text") from None
    try:
        data = loads_strict(text)
    except (ValueError, RecursionError) as err:
        raise RequestError(400, f"the body is not JSON: {first_line(err, MAX_ERROR_CHARS)}") from None
    try:
        if isinstance(data, dict):
            return recommend(policy, LiveJob.from_dict(data)).as_dict()
        if not isinstance(data, list) or not data:
            what = "an empty list" if data == [] else json_kind(data)
            raise ValueError(f"the body must be a job (a JSON object) or a list of jobs, got {what}")
        jobs = []
        for index, item in enumerate(data):
            if not isinstance(item, dict):
                raise ValueError(f"item {index} must be a JSON object (a job), got {json_kind(item)}")
            try:
                jobs.append(LiveJob.from_dict(item))
            except ValueError as err:
                raise ValueError(f"item {index}: {err}") from None
        names = [f"item {index}" for index in range(len(jobs))]
        return [one.as_dict() for one in recommend_many(policy, jobs, names=names)]
    except ValueError as err:
        raise RequestError(400, first_line(err, MAX_ERROR_CHARS)) from None


def log_line(client: str, message: str) -> None:
    """One line of the server's log on stderr: time, client, what happened."""
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {client} {message}", file=sys.stderr, flush=True)


def make_server(
    policy: LoadedPolicy, host: str = DEFAULT_HOST, port: int = 0, max_body_bytes: int = MAX_BODY_BYTES
) -> http.server.HTTPServer:
    """An HTTP server answering for ``policy`` (module docstring), bound to ``(host, port)`` and not yet
    serving: call its ``serve_forever()``; ``server_address`` holds the bound port. ``OSError`` when
    the address cannot be bound."""

    policy_lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        server_version = "slamorl_jax"
        protocol_version = "HTTP/1.1"  # a client may keep its connection for the next request
        timeout = REQUEST_TIMEOUT_S

        def do_GET(self) -> None:
            if self.path == HEALTH_PATH:
                self.reply(200, {"status": "ok", "step": policy.step, "actions": policy.config.actions})
            else:
                self.reply(404, {"error": f"no such path {self.path!r}; GET {HEALTH_PATH}"})

        def do_POST(self) -> None:
            try:
                if self.path != RECOMMEND_PATH:
                    raise RequestError(404, f"no such path {self.path!r}; POST {RECOMMEND_PATH}")
                body = self.body()
                with policy_lock:
                    result = answer(policy, body)
                self.reply(200, result)
            except RequestError as err:
                self.reply(err.status, {"error": str(err)})
            except Exception as err:  # a fault of ours: the client gets a 500, the server goes on
                log_line(self.address_string(), f"internal error: {first_line(err)}")
                self.reply(500, {"error": f"internal error: {first_line(err, MAX_ERROR_CHARS)}"})

        def refuse_method(self) -> None:
            self.reply(
                405, {"error": f"{self.command} is not answered; GET {HEALTH_PATH} or POST {RECOMMEND_PATH}"}
            )

        do_PUT = do_DELETE = do_PATCH = refuse_method  # noqa: N815 (the names http.server calls)

        def body(self) -> bytes:
            length = self.headers.get("Content-Length")
            if length is None:
                raise RequestError(411, "the request needs a Content-Length")
            size = int(length) if length.strip().isdigit() else -1
            if size < 0:
                raise RequestError(400, f"Content-Length must be a number of bytes, got {length!r}")
            if size > max_body_bytes:
                raise RequestError(413, f"the body may hold at most {max_body_bytes:,} bytes, got {size:,}")
            return self.rfile.read(size)

        def reply(self, status: int, payload: Any) -> None:
            data = (json.dumps(payload) + "\n").encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if status >= 400:  # a body may be left unread: the connection cannot carry another request
                self.close_connection = True
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            log_line(self.address_string(), format % args)

    class Server(http.server.ThreadingHTTPServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        daemon_threads = True  # a connection left open does not keep the process from ending

        def handle_error(self, request: Any, client_address: Any) -> None:
            # A client that went away before its answer (a broken pipe): one line, not a traceback.
            log_line(str(client_address[0]), f"connection error: {first_line(sys.exc_info()[1])}")

    return Server((host, port), Handler)
