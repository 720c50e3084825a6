"""``python -m slamorl_jax.recommend --http=HOST:PORT``: the policy's answers over HTTP, in one warm process.

For a platform whose scheduler speaks HTTP rather than a process's standard input (``--serve``):

* ``POST /recommend`` with one job (the JSON object ``--job`` reads) answers with the object ``--job``
  prints; with a JSON list of jobs, with a list of those objects in the same order, from one compiled
  call (``live.recommend_many``, as ``--jobs``);
* ``GET /health`` answers ``{"status": "ok", "step": ..., "actions": ...}`` (the policy's training
  step and action set) once the policy is loaded;
* a request it cannot answer gets ``{"error": "..."}`` (one line) with status 400 (bad JSON, a bad or
  finished job, an allocation the policy's cluster cannot hold, a body shorter than its
  ``Content-Length``, two ``Content-Length`` values, a ``Transfer-Encoding`` beside a
  ``Content-Length``, a ``GET`` with a body, a malformed request; a list's bad job is named by its
  ``item``), 404 (another path), 405 (another method on one of the two paths, with an ``Allow``
  header; ``HEAD /health`` is answered as ``GET``, without the body), 408 (a body that stops coming
  for ``REQUEST_TIMEOUT_S``), 411 (no ``Content-Length``, a ``Transfer-Encoding`` alone included),
  413 (a body over ``max_body_bytes``), 431 (headers too long or too many) or 501 (a method HTTP
  does not name); a fault of the server's own
  gets 500 and one log line. Every error is this JSON object, the ones ``http.server`` itself
  raises included. The query string is ignored (``/health?probe=1`` is ``/health``).

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
import re
import socket
import sys
import threading
import time
import urllib.parse
from typing import TYPE_CHECKING, Any

from slamorl_jax.cli_args import first_line
from slamorl_jax.json_input import json_kind, json_or_reason
from slamorl_jax.recommend_serve import MAX_ERROR_CHARS

if TYPE_CHECKING:
    from slamorl_jax.live_job import LiveJob
    from slamorl_jax.policy_checkpoint import LoadedPolicy

RECOMMEND_PATH = "/recommend"
HEALTH_PATH = "/health"
# Each path and the methods it answers (HEAD: GET's answer without its body, for health checkers).
ROUTES = {HEALTH_PATH: ("GET", "HEAD"), RECOMMEND_PATH: ("POST",)}
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


def answer(policy: LoadedPolicy, body: bytes, brief: bool = False) -> Any:
    """The answer to a ``POST /recommend`` body: one job's answer object, or a list of them for a list
    of jobs; :class:`RequestError` (status 400) for a body that is not one."""
    return answer_jobs(policy, parse_jobs(body), brief)


def parse_jobs(body: bytes) -> LiveJob | list[LiveJob]:
    """The job (or the list of jobs) of a ``POST /recommend`` body, read and checked without the
    policy; :class:`RequestError` (status 400) for a body that is not one. The server runs it outside
    the policy's lock, so parsing a large body holds up no other request's answer."""
    from slamorl_jax.live_job import LiveJob

    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise RequestError(400, "the body is not UTF-8 text") from None
    data, reason = json_or_reason(text)  # worded as --job words it, not as Python's parser does
    if reason is not None:
        raise RequestError(400, f"the body{reason}"[:MAX_ERROR_CHARS])
    try:
        if isinstance(data, dict):
            return LiveJob.from_dict(data)
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
        return jobs
    except ValueError as err:
        raise RequestError(400, first_line(err, MAX_ERROR_CHARS)) from None


def answer_jobs(policy: LoadedPolicy, jobs: LiveJob | list[LiveJob], brief: bool = False) -> Any:
    """The answer object of one job, or the list of a list's answers from one compiled call (a list's
    refused job named by its ``item``); :class:`RequestError` (status 400) for a job the policy
    refuses (finished, an allocation its cluster cannot hold)."""
    from slamorl_jax.live import recommend, recommend_many

    try:
        if not isinstance(jobs, list):
            return recommend(policy, jobs).as_dict(brief)
        names = [f"item {index}" for index in range(len(jobs))]
        return [one.as_dict(brief) for one in recommend_many(policy, jobs, names=names)]
    except ValueError as err:
        raise RequestError(400, first_line(err, MAX_ERROR_CHARS)) from None


def content_length(headers: Any, max_body_bytes: int) -> int:
    """The body's size a request's headers declare; :class:`RequestError` for a body the server will not
    read: 411 (no length, also beside a ``Transfer-Encoding``, which the server does not decode), 400
    (a ``Transfer-Encoding`` with a length, or two or a malformed length: a proxy and this server
    could then split the stream into requests differently) or 413 (over ``max_body_bytes``)."""
    if headers.get_all("Transfer-Encoding"):
        if headers.get("Content-Length") is None:
            raise RequestError(411, "the request needs a Content-Length (Transfer-Encoding is not read)")
        raise RequestError(400, "a request may not carry both a Transfer-Encoding and a Content-Length")
    lengths = headers.get_all("Content-Length") or []
    if not lengths:
        raise RequestError(411, "the request needs a Content-Length")
    if len(lengths) > 1:
        raise RequestError(400, f"the request carries {len(lengths)} Content-Length headers")
    length = lengths[0]
    if not re.fullmatch(r"[0-9]+", length.strip()):
        raise RequestError(400, f"Content-Length must be a number of bytes, got {length!r}")
    size = int(length)
    if size > max_body_bytes:
        raise RequestError(413, f"the body may hold at most {max_body_bytes:,} bytes, got {size:,}")
    return size


def has_body(headers: Any) -> bool:
    """Whether a request's headers announce a body (a ``Content-Length`` other than 0)."""
    return any(length.strip() != "0" for length in headers.get_all("Content-Length") or [])


_LOG_LOCK = threading.Lock()


def log_line(client: str, message: str) -> None:
    """One line of the server's log on stderr: time, client, what happened (whole, under a lock: the
    connections' threads log at once)."""
    line = f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {client} {message}\n"
    with _LOG_LOCK:
        sys.stderr.write(line)
        sys.stderr.flush()


def make_server(
    policy: LoadedPolicy,
    host: str = DEFAULT_HOST,
    port: int = 0,
    max_body_bytes: int = MAX_BODY_BYTES,
    request_timeout_s: float = REQUEST_TIMEOUT_S,
    brief: bool = False,
) -> http.server.HTTPServer:
    """An HTTP server answering for ``policy`` (module docstring), bound to ``(host, port)`` and not yet
    serving: call its ``serve_forever()``; ``server_address`` holds the bound port. A connection that
    sends nothing for ``request_timeout_s`` is dropped (408 mid-body); ``brief`` answers without every
    action's probability and the features (``Recommendation.as_dict``). ``OSError`` when the address
    cannot be bound."""

    policy_lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        server_version = "slamorl_jax"
        protocol_version = "HTTP/1.1"  # a client may keep its connection for the next request
        # A request line without a version (malformed, or HTTP/0.9's) still gets a status line and
        # headers: the standard library's default would answer it with a bare body.
        default_request_version = "HTTP/1.1"
        timeout = request_timeout_s

        def route(self) -> str:
            """The request's path without its query; :class:`RequestError` 404 for a path not served,
            405 for a method the path does not answer."""
            path = urllib.parse.urlsplit(self.path).path
            if path not in ROUTES:
                served = " or ".join(f"{methods[0]} {name}" for name, methods in ROUTES.items())
                raise RequestError(404, f"no such path {path!r}; {served}")
            if self.command not in ROUTES[path]:
                self.allow = ", ".join(ROUTES[path])
                raise RequestError(405, f"{self.command} {path} is not answered; {ROUTES[path][0]} {path}")
            return path

        def handle_request(self) -> None:
            """Answer the request of any method: its route, its body, the policy's answer; every
            refusal as a JSON error."""
            self.allow = None
            try:
                path = self.route()
                if path == HEALTH_PATH:
                    if self.headers.get_all("Transfer-Encoding") or has_body(self.headers):
                        # unread, it would be taken for the connection's next request
                        raise RequestError(400, f"GET {HEALTH_PATH} takes no body")
                    self.reply(200, {"status": "ok", "step": policy.step, "actions": policy.config.actions})
                    return
                jobs = parse_jobs(self.body())
                with policy_lock:
                    result = answer_jobs(policy, jobs, brief)
                self.reply(200, result)
            except RequestError as err:
                self.reply(err.status, {"error": str(err)})
            except Exception as err:  # a fault of ours: the client gets a 500, the server goes on
                log_line(self.address_string(), f"internal error: {first_line(err)}")
                self.reply(500, {"error": f"internal error: {first_line(err, MAX_ERROR_CHARS)}"})

        # The methods HTTP names, all answered by the route (http.server answers others with 501).
        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = handle_request  # noqa: N815

        def body(self) -> bytes:
            size = content_length(self.headers, max_body_bytes)
            try:
                data = self.rfile.read(size)
            except TimeoutError:
                raise RequestError(408, f"the body stopped coming for {request_timeout_s:g} s") from None
            if len(data) < size:
                raise RequestError(400, f"the body ended after {len(data):,} of its {size:,} bytes")
            return data

        def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
            """``http.server``'s own refusals (a malformed request line, headers too long, a method HTTP
            does not name) as the same JSON error as every other."""
            self.allow = None
            self.reply(code, {"error": message or self.responses.get(code, ("error",))[0]})

        def reply(self, status: int, payload: Any) -> None:
            data = (json.dumps(payload) + "\n").encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if getattr(self, "allow", None):
                self.send_header("Allow", self.allow)
            if status >= 400:  # a body may be left unread: the connection cannot carry another request
                self.close_connection = True
                self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":  # an answer to HEAD is its headers alone
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
