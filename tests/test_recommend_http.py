"""``recommend --http``: the policy's answers over HTTP are ``recommend``'s answers, and every request it
cannot answer gets a JSON error with the right status (a server in a thread of this process)."""

from __future__ import annotations

import http.client
import json
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_harness import assert_refused, call

from slamorl_jax import recommend as recommend_cli
from slamorl_jax import recommend_http
from slamorl_jax.live import recommend, recommend_many
from slamorl_jax.live_job import LiveJob
from slamorl_jax.policy_checkpoint import LoadedPolicy, load_policy
from slamorl_jax.recommend_http import make_server, parse_address

ROOT = Path(__file__).resolve().parent.parent
JOB = json.loads((ROOT / "docs" / "example_job.json").read_text(encoding="utf-8"))
FINISHED = {**{k: v for k, v in JOB.items() if k != "history"}, "epochs_done": JOB["epochs_total"]}
MAX_BODY_BYTES = 20_000


@pytest.fixture(scope="module")
def policy() -> LoadedPolicy:
    return load_policy(ROOT / "checkpoints" / "default")


@pytest.fixture(scope="module")
def address(policy: LoadedPolicy) -> Iterator[tuple[str, int]]:
    """A server on a free port of this machine, serving from a thread for the module's tests."""
    server = make_server(policy, "127.0.0.1", 0, max_body_bytes=MAX_BODY_BYTES)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[:2]
    server.shutdown()
    server.server_close()


def request(
    address: tuple[str, int], method: str, path: str, body: bytes | None = None, timeout: float = 120
) -> tuple[int, Any]:
    """``(status, the JSON answer)`` of one request."""
    connection = http.client.HTTPConnection(*address, timeout=timeout)
    try:
        connection.request(method, path, body=body)
        response = connection.getresponse()
        assert response.getheader("Content-Type") == "application/json"
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def test_a_posted_job_gets_recommends_answer_and_a_list_gets_recommend_manys(
    address: tuple[str, int], policy: LoadedPolicy
) -> None:
    status, answer = request(address, "POST", "/recommend", json.dumps(JOB).encode())
    expected = json.loads(json.dumps(recommend(policy, LiveJob.from_dict(JOB)).as_dict()))
    assert status == 200 and answer == expected
    other = {**JOB, "deadline_s": 2 * JOB["deadline_s"], "preference": "cost"}
    status, answers = request(address, "POST", "/recommend", json.dumps([JOB, other]).encode())
    many = recommend_many(policy, [LiveJob.from_dict(JOB), LiveJob.from_dict(other)])
    assert status == 200 and answers == json.loads(json.dumps([one.as_dict() for one in many]))
    status, health = request(address, "GET", "/health")
    assert status == 200 and health == {"status": "ok", "step": policy.step, "actions": policy.config.actions}


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "phrase"),
    [
        ("POST", "/recommend", b"{not json", 400, "the body is not valid JSON"),
        # Worded as --job words it, not as Python's parser does (its advice on sys limits).
        pytest.param(
            "POST", "/recommend", b"1" * 5000, 400, "the body holds an integer of more digits", id="long-int"
        ),
        pytest.param(
            "POST", "/recommend", b"[" * 19_000, 400, "the body is nested too deeply to be a job", id="deep"
        ),
        ("POST", "/recommend", b"\xff\xfe{}", 400, "not UTF-8"),
        ("POST", "/recommend", b'"a job"', 400, "got a string"),
        ("POST", "/recommend", b"[]", 400, "got an empty list"),
        ("POST", "/recommend", json.dumps([JOB, 3]).encode(), 400, "item 1 must be a JSON object"),
        ("POST", "/recommend", json.dumps([JOB, {**JOB, "gpus": 10_000}]).encode(), 400, "item 1"),
        (
            "POST",
            "/recommend",
            json.dumps(FINISHED).encode(),
            400,
            "finished",
        ),
        ("POST", "/recommend", json.dumps({**JOB, "surprise": 1}).encode(), 400, "unknown job field"),
        ("POST", "/recommend", b" " * (MAX_BODY_BYTES + 1), 413, "at most 20,000 bytes"),
        ("POST", "/elsewhere", b"{}", 404, "no such path '/elsewhere'"),
        ("GET", "/recommend", None, 405, "GET /recommend is not answered; POST /recommend"),
        ("POST", "/health", b"{}", 405, "POST /health is not answered; GET /health"),
        ("PUT", "/recommend", b"{}", 405, "PUT /recommend is not answered"),
        ("DELETE", "/nowhere?x=1", None, 404, "no such path '/nowhere'; GET /health or POST /recommend"),
    ],
)
def test_a_request_it_cannot_answer_gets_a_one_line_json_error(
    address: tuple[str, int], method: str, path: str, body: bytes | None, status: int, phrase: str
) -> None:
    got, answer = request(address, method, path, body)
    assert got == status and set(answer) == {"error"}, answer
    assert phrase in answer["error"] and "\n" not in answer["error"], answer


@pytest.mark.parametrize(
    ("length", "status", "phrase"),
    [(None, 411, "needs a Content-Length"), ("-5", 400, "number of bytes"), ("ten", 400, "number of bytes")],
)
def test_a_post_without_a_usable_length_is_refused_and_the_server_goes_on(
    address: tuple[str, int], length: str | None, status: int, phrase: str
) -> None:
    connection = http.client.HTTPConnection(*address, timeout=60)
    try:
        connection.putrequest("POST", "/recommend")
        if length is not None:
            connection.putheader("Content-Length", length)
        connection.endheaders()
        response = connection.getresponse()
        assert response.status == status and phrase in json.loads(response.read())["error"]
    finally:
        connection.close()
    assert request(address, "GET", "/health")[0] == 200


def test_a_connection_carries_request_after_request_until_an_error_closes_it(
    address: tuple[str, int],
) -> None:
    connection = http.client.HTTPConnection(*address, timeout=120)
    job = json.dumps(JOB).encode()
    try:
        for method, path, body in (
            ("GET", "/health", None),
            ("POST", "/recommend", job),
            ("GET", "/health", None),
        ):
            connection.request(method, path, body=body)
            response = connection.getresponse()
            assert response.status == 200 and json.loads(response.read()) and not response.will_close
        connection.request("PUT", "/recommend", body=b"{}")
        response = connection.getresponse()
        assert response.status == 405 and response.will_close
        response.read()
    finally:
        connection.close()


def test_a_fault_of_the_servers_own_is_a_500_and_the_server_goes_on(
    address: tuple[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("a bug\nwith a second line")

    monkeypatch.setattr(recommend_http, "answer_jobs", broken)
    status, answer = request(address, "POST", "/recommend", json.dumps(JOB).encode())
    assert status == 500 and answer == {"error": "internal error: a bug"}
    monkeypatch.undo()
    assert request(address, "POST", "/recommend", json.dumps(JOB).encode())[0] == 200


def test_a_client_that_stops_sending_holds_up_no_other(address: tuple[str, int]) -> None:
    """A request whose body never comes waits on its own thread: another client is answered."""
    with socket.create_connection(address, timeout=60) as stalled:
        stalled.sendall(b"POST /recommend HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        # Well inside the stalled request's REQUEST_TIMEOUT_S (60 s), after which it would be dropped.
        status, answer = request(address, "POST", "/recommend", json.dumps(JOB).encode(), timeout=30)
        assert status == 200 and answer["gpus"] >= 1


def test_the_address_flag_is_checked_before_anything_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert parse_address("0.0.0.0:8080") == ("0.0.0.0", 8080)
    assert parse_address(":0") == parse_address("0") == ("127.0.0.1", 0)
    assert parse_address("[::1]:9000") == ("::1", 9000)
    for text, phrase in (("localhost", "HOST:PORT"), ("host:http", "HOST:PORT"), ("h:70000", "[0, 65535]")):
        with pytest.raises(ValueError, match=phrase.replace("[", r"\[")):
            parse_address(text)
        assert_refused(call(lambda t=text: recommend_cli.main([f"--http={t}"]), capsys, tmp_path), phrase)
    refused = call(lambda: recommend_cli.main(["--http=:0", "--forecast_start"]), capsys, tmp_path)
    assert_refused(refused, "--http gives the policy's answer for each job")
    assert_refused(
        call(lambda: recommend_cli.main(["--http=:0", "--job=-"]), capsys, tmp_path), "not allowed with"
    )


def test_an_address_in_use_is_refused_in_one_line(
    address: tuple[str, int], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    taken = f"--http={address[0]}:{address[1]}"
    checkpoint = f"--checkpoint={ROOT / 'checkpoints' / 'default'}"
    outcome = call(lambda: recommend_cli.main([taken, checkpoint]), capsys, tmp_path)
    assert_refused(outcome, "--http cannot listen on")


def test_the_command_says_where_it_listens_and_answers_until_stopped() -> None:
    """``python -m slamorl_jax.recommend --http=127.0.0.1:0`` in a real process: one line names the
    port it took, a job posted there is answered, SIGTERM ends it with 128 + 15 and one line."""
    process = subprocess.Popen(
        [sys.executable, "-m", "slamorl_jax.recommend", "--http=127.0.0.1:0"],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stderr.readline()
        assert line.startswith("python -m slamorl_jax.recommend: listening on http://127.0.0.1:"), line
        port = int(line.rsplit(":", 1)[1])
        status, answer = request(("127.0.0.1", port), "POST", "/recommend", json.dumps(JOB).encode())
        assert status == 200 and answer["gpus"] >= 1
        process.send_signal(signal.SIGTERM)
        _, rest = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 128 + signal.SIGTERM
    assert rest.strip().splitlines()[-1] == "python -m slamorl_jax.recommend: interrupted (SIGTERM)", rest


def raw_exchange(
    address: tuple[str, int], data: bytes, timeout: float = 60
) -> tuple[int, dict[str, str], bytes]:
    """``(status, headers, body)`` of the answer to raw request bytes, read until the server closes."""
    with socket.create_connection(address, timeout=timeout) as connection:
        connection.sendall(data)
        connection.shutdown(socket.SHUT_WR)  # what was sent is all the request there is
        answer = b""
        while chunk := connection.recv(65_536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (h.partition(":") for h in header_lines)}
    return int(status_line.split()[1]), headers, body


POST = b"POST /recommend HTTP/1.1\r\nHost: x\r\n"


@pytest.mark.parametrize(
    ("data", "status", "phrase"),
    [
        # What http.server refuses itself comes back as the same JSON error.
        (b"GARBAGE\r\n\r\n", 400, "Bad request"),
        (b"FOO /health HTTP/1.1\r\nHost: x\r\n\r\n", 501, "Unsupported method"),
        (b"GET /health HTTP/1.1\r\n" + b"X-Long: " + b"a" * 70_000 + b"\r\n\r\n", 431, "Line too long"),
        # Lengths a proxy could read otherwise than the server: refused, never guessed.
        (POST + "Content-Length: \u00b2\r\n\r\n{}".encode("latin-1"), 400, "number of bytes"),
        (POST + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400, "2 Content-Length headers"),
        (POST + b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 411, "Transfer-Encoding"),
        (POST + b"Transfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n{}", 400, "both"),
        (b"GET /health HTTP/1.1\r\nContent-Length: 5\r\n\r\nGET /", 400, "takes no body"),
        # A body that ends before its length (the client closed): the client's fault, not a 500.
        (POST + b"Content-Length: 100\r\n\r\n{}", 400, "the body ended after 2 of its 100 bytes"),
    ],
)
def test_requests_http_server_refuses_get_the_same_json_errors(
    address: tuple[str, int], data: bytes, status: int, phrase: str
) -> None:
    got, headers, body = raw_exchange(address, data)
    assert got == status and headers["content-type"] == "application/json", (got, headers, body)
    error = json.loads(body)["error"]
    assert phrase in error and "\n" not in error, error
    assert request(address, "GET", "/health")[0] == 200  # and the server goes on


def test_a_refused_method_names_the_allowed_ones_and_health_answers_head_and_queries(
    address: tuple[str, int],
) -> None:
    connection = http.client.HTTPConnection(*address, timeout=60)
    try:
        connection.request("GET", "/recommend")
        response = connection.getresponse()
        assert response.status == 405 and response.getheader("Allow") == "POST"
        response.read()
    finally:
        connection.close()
    got, headers, body = raw_exchange(address, b"HEAD /health HTTP/1.1\r\nConnection: close\r\n\r\n")
    assert got == 200 and int(headers["content-length"]) > 0 and body == b""
    got, headers, body = raw_exchange(address, b"POST /health HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
    assert got == 405 and headers["allow"] == "GET, HEAD"
    assert request(address, "GET", "/health?probe=1")[0] == 200


def test_a_body_that_stops_coming_is_a_408(policy: LoadedPolicy) -> None:
    server = make_server(policy, "127.0.0.1", 0, request_timeout_s=0.5)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with socket.create_connection(server.server_address[:2], timeout=60) as stalled:
            stalled.sendall(POST + b"Content-Length: 100\r\n\r\n{")
            answer = b""
            while chunk := stalled.recv(65_536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 408 "), answer
        assert b"the body stopped coming for 0.5 s" in answer
    finally:
        server.shutdown()
        server.server_close()


def test_brief_answers_leave_out_every_probability_and_feature(
    policy: LoadedPolicy, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--brief`` (``Recommendation.as_dict(brief=True)``): the decision, its probability, the
    weights and the forecast, without the 90 probabilities and 351 features (500 lines of JSON), in
    every mode that answers with the policy; a new job's start is not such an answer."""
    from slamorl_jax.recommend_serve import serve

    whole = recommend(policy, LiveJob.from_dict(JOB))
    brief = whole.as_dict(brief=True)
    assert set(whole.as_dict()) - set(brief) == {"action_probabilities", "observation"}
    assert brief["action_probability"] == whole.action_probabilities[whole.action]
    assert {"gpus", "cpus", "action_name", "relocate", "held", "forecast"} <= set(brief)
    job_file = tmp_path / "job.json"
    job_file.write_text(json.dumps(JOB))
    outcome = call(lambda: recommend_cli.main([f"--job={job_file}", "--brief"]), capsys, tmp_path)
    assert outcome.code == 0 and json.loads(outcome.stdout) == json.loads(json.dumps(brief)), outcome.report()
    lines = []
    serve(
        policy,
        [json.dumps(JOB)],
        type("Out", (), {"write": lines.append, "flush": lambda self: None})(),
        True,
    )
    assert json.loads(lines[0]) == json.loads(json.dumps({"line": 1, **brief}))
    server = make_server(policy, "127.0.0.1", 0, brief=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        status, answer = request(server.server_address[:2], "POST", "/recommend", json.dumps(JOB).encode())
    finally:
        server.shutdown()
        server.server_close()
    assert status == 200 and answer == json.loads(json.dumps(brief))
    refused = call(
        lambda: recommend_cli.main([f"--job={job_file}", "--brief", "--forecast_start"]), capsys, tmp_path
    )
    assert_refused(refused, "--brief shortens the policy's answer")
