"""``dateeval serve`` as the official ``openai`` client and raw HTTP meet it (issue 18 §3).

The model is served in this process (the real default model where numbers
matter, a slow stand-in where the point is time): refused requests leave a
keep-alive connection usable, prompts beyond the context are refused before
any compute, a request whose client left stops, a request that waits too long
for the model is told so, and what the server does not do is refused.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest
import torch

from dateeval.backends.base import Generation
from dateeval.backends.openai_api import MAX_API_STOPS
from dateeval.serve import MAX_BODY, MAX_ECHO_POSITIONS, MAX_STOP_CHARS, WAIT_S, Served, banner, make_server

MODEL = "smollm2-135m"


def _start(served: Served) -> Iterator[str]:
    server = make_server(served, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def real(backend) -> Served:  # noqa: ANN001 - the session's TransformersBackend
    return Served(backend, MODEL, backend.template, threading.Lock())


@pytest.fixture(scope="module")
def real_url(real: Served) -> Iterator[str]:
    yield from _start(real)


def _client(url: str, timeout: float = 120) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key="not-needed", max_retries=0, timeout=timeout)


def _connection(url: str) -> http.client.HTTPConnection:
    host, port = url.removeprefix("http://").split(":")
    return http.client.HTTPConnection(host, int(port), timeout=60)


def _answer(connection: http.client.HTTPConnection) -> tuple[int, dict]:
    response = connection.getresponse()
    assert response.getheader("Content-Type") == "application/json"
    return response.status, json.loads(response.read())


def _models_on(connection: http.client.HTTPConnection) -> None:
    """The next request on the same connection is read as a request (not the last one's unread body)."""
    connection.request("GET", "/v1/models")
    status, body = _answer(connection)
    assert status == 200 and body["data"][0]["id"] == MODEL, body


# Refusals that leave the connection usable.


def test_refused_bodies_are_read_so_the_next_request_on_the_connection_is_answered(real_url: str) -> None:
    connection = _connection(real_url)
    connection.request("POST", "/v1/nothing", body=json.dumps({"model": MODEL, "prompt": "GET / HTTP/1.1\r\n\r\n"}))
    assert _answer(connection)[0] == 404
    _models_on(connection)
    connection.request("POST", "/v1/nothing", body=iter([b'{"model": "', b'x"}']), encode_chunked=True)  # a chunked body
    assert _answer(connection)[0] == 404
    _models_on(connection)
    connection.request("PUT", "/v1/models", body=b"PUT /v1/models HTTP/1.1\r\n\r\n")  # the standard library's own refusal: JSON too
    status, body = _answer(connection)
    assert status == 501 and "error" in body
    _models_on(connection)


def test_a_chunked_body_is_read_as_a_body(real_url: str) -> None:
    connection = _connection(real_url)
    request = json.dumps({"model": MODEL, "prompt": "Hello", "max_tokens": 1, "logprobs": 2}).encode()
    connection.request("POST", "/v1/completions", body=iter([request[:7], request[7:]]), encode_chunked=True)
    status, body = _answer(connection)
    assert status == 200 and body["choices"][0]["logprobs"]["top_logprobs"], body
    _models_on(connection)


def test_an_oversized_body_is_413_and_the_client_goes_on(real_url: str) -> None:
    client = _client(real_url)
    with pytest.raises(openai.APIStatusError) as refused:
        client.completions.create(model=MODEL, prompt="x" * MAX_BODY, max_tokens=1)
    assert refused.value.status_code == 413 and "over this server's limit" in refused.value.message
    assert [model.id for model in client.models.list()] == [MODEL]


def test_a_content_length_that_is_not_a_number_is_400(real_url: str) -> None:
    with socket.create_connection(("127.0.0.1", int(real_url.rsplit(":", 1)[1])), timeout=30) as raw:
        raw.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n")
        answer = b""
        while chunk := raw.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400") and b"Connection: close" in head
    assert "is not a number of bytes" in json.loads(body)["error"]["message"]


# What the model cannot answer, refused before any compute.


def test_prompts_beyond_the_context_are_400_before_any_compute(real: Served, real_url: str) -> None:
    client, limit = _client(real_url), real.backend.context_length
    long_text = " apple" * (limit + 10)
    ids = real.backend.encode([long_text])[0]
    assert len(ids) > limit
    asks = {
        "text": lambda: client.completions.create(model=MODEL, prompt=long_text, max_tokens=1, logprobs=5),
        "echo": lambda: client.completions.create(model=MODEL, prompt=ids, echo=True, max_tokens=0, logprobs=1),
        "chat": lambda: client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": long_text}], max_completion_tokens=1),
        "reply": lambda: client.completions.create(model=MODEL, prompt="Hello", max_tokens=limit),  # the prompt fits, the reply does not
        "10 MB": lambda: client.completions.create(model=MODEL, prompt="apple " * ((10 << 20) // 6), max_tokens=1),  # refused untokenised
    }
    for name, ask in asks.items():
        started = time.monotonic()
        with pytest.raises(openai.BadRequestError) as refused:
            ask()
        assert f"maximum context length is {limit} tokens" in refused.value.message, name
        assert ("is at least" in refused.value.message) == (name == "10 MB"), name
        assert refused.value.code == "context_length_exceeded" and time.monotonic() - started < 10, name


def test_streaming_and_several_choices_are_refused(real_url: str) -> None:
    client = _client(real_url)
    chat = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_completion_tokens": 1}
    for ask, message in [
        (lambda: client.completions.create(model=MODEL, prompt="Hi", max_tokens=1, stream=True), "stream is not supported"),
        (lambda: client.chat.completions.create(**chat, stream=True), "stream is not supported"),
        (lambda: client.completions.create(model=MODEL, prompt="Hi", max_tokens=1, n=2), "n must be 1"),
        (lambda: client.chat.completions.create(**chat, n=2), "n must be 1"),
        (lambda: client.completions.create(model=MODEL, prompt="Hi", max_tokens=1, best_of=3), "best_of must be 1"),
    ]:  # fmt: skip
        with pytest.raises(openai.BadRequestError, match=message):
            ask()
    assert len(client.chat.completions.create(**chat, n=1).choices) == 1


def test_the_banner_names_the_date_chat_requests_get(real: Served) -> None:
    line = banner(real, "127.0.0.1", 8000)
    assert "writes no date" in line and "none date" not in line and line.split(" on ")[-1] == "http://127.0.0.1:8000/v1"


# Time: a slow stand-in model, 50 ms per forward pass.


class SlowModel(torch.nn.Module):
    """Counts its forward passes; each takes 50 ms."""

    def __init__(self) -> None:
        super().__init__()
        self.passes = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(0.05)
        self.passes += 1
        return x


class SlowBackend:
    """What ``serve`` uses of a backend, generating one token per forward pass."""

    context_length = 1000
    tokenizer = ["a", "b", "c"]

    def __init__(self) -> None:
        self.model = SlowModel()

    def encode(self, texts: list[str]) -> list[list[int]]:
        return [[0] * len(text) for text in texts]

    def generate_texts(self, prompts: list[str], settings, batch_size: int) -> list[Generation]:  # noqa: ANN001
        for _ in range(settings.max_new_tokens):
            self.model(torch.zeros(1))
        return [Generation("a" * settings.max_new_tokens, settings.max_new_tokens, len(prompt)) for prompt in prompts]


@pytest.fixture
def slow() -> Iterator[tuple[Served, str]]:
    served = Served(SlowBackend(), "slow", None, threading.Lock(), wait_s=1.0)  # type: ignore[arg-type]
    for url in _start(served):
        yield served, url


def test_a_request_whose_client_left_stops_computing(slow: tuple[Served, str]) -> None:
    served, url = slow
    with pytest.raises(openai.APITimeoutError):
        _client(url, timeout=0.5).completions.create(model="slow", prompt="Hi", max_tokens=200)  # 10 s of work
    assert served.lock.acquire(timeout=10.0)  # freed soon after the hang-up (slack for a loaded machine)
    served.lock.release()
    assert served.backend.model.passes < 100  # of the 200 asked for
    assert _client(url).completions.create(model="slow", prompt="Hi", max_tokens=2).choices[0].text == "aa"


def test_a_waiting_request_times_out_with_a_clear_error(slow: tuple[Served, str]) -> None:
    served, url = slow
    with served.lock:  # the model busy with someone else's request
        started = time.monotonic()
        with pytest.raises(openai.APIStatusError) as busy:
            _client(url, timeout=30).completions.create(model="slow", prompt="Hi", max_tokens=1)
        assert busy.value.status_code == 503 and "the server is busy" in busy.value.message and time.monotonic() - started < 20  # wait_s is 1 s


def test_a_waiting_request_whose_client_left_is_never_computed(slow: tuple[Served, str]) -> None:
    served, url = slow
    served.wait_s = 30.0
    with served.lock:
        with pytest.raises(openai.APITimeoutError):
            _client(url, timeout=0.3).completions.create(model="slow", prompt="Hi", max_tokens=5)
        time.sleep(3)  # the abandoned request notices while it waits (slack for a loaded machine)
    time.sleep(0.5)
    assert served.backend.model.passes == 0


# What one request may ask for (issue 25 §4): bounded, and refused with the limit named before any compute.


def _raw(url: str, path: str, body: bytes) -> tuple[int, dict]:
    connection = _connection(url)
    connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    return _answer(connection)


def test_what_one_request_may_ask_for_is_bounded_and_named(real: Served, real_url: str) -> None:
    client, ids = _client(real_url), real.backend.encode([" apple" * (MAX_ECHO_POSITIONS + 10)])[0][: MAX_ECHO_POSITIONS + 1]
    asks = {
        f"at most {MAX_API_STOPS} stop strings": lambda: client.completions.create(model=MODEL, prompt="Hi", max_tokens=2, stop=["x"] * 10_000),
        f"at most {MAX_STOP_CHARS} characters": lambda: client.completions.create(model=MODEL, prompt="Hi", max_tokens=2, stop=["x" * (MAX_STOP_CHARS + 1)]),
        "non-empty": lambda: client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_completion_tokens=2, stop=[""]),
        f"at most {MAX_ECHO_POSITIONS:,} tokens": lambda: client.completions.create(model=MODEL, prompt=ids, echo=True, max_tokens=0, logprobs=20),
    }
    for limit, ask in asks.items():
        started = time.monotonic()
        with pytest.raises(openai.BadRequestError) as refused:
            ask()
        assert limit in refused.value.message and time.monotonic() - started < 5, (limit, refused.value.message)


def test_a_lone_surrogate_is_400(real_url: str) -> None:
    for path, field in [("/v1/completions", '"prompt": "Hi \\ud800"'), ("/v1/chat/completions", '"messages": [{"role": "user", "content": "\\udfff"}]')]:
        status, body = _raw(real_url, path, f'{{"model": "{MODEL}", {field}, "max_tokens": 1}}'.encode())
        assert status == 400 and "surrogate" in body["error"]["message"], body


def test_invalid_settings_are_400_with_logprobs_too(real_url: str) -> None:
    for bad in [{"temperature": 5}, {"seed": -1}, {"stop": 7}, {"temperature": "hot"}]:
        for scored in [{"logprobs": 2, "max_tokens": 1}, {"logprobs": 1, "max_tokens": 0, "echo": True}]:
            status, body = _raw(real_url, "/v1/completions", json.dumps({"model": MODEL, "prompt": "Hi", **scored, **bad}).encode())
            assert status == 400, (bad, scored, body)
        chat = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_completion_tokens": 1, "logprobs": True, **bad}
        assert _raw(real_url, "/v1/chat/completions", json.dumps(chat).encode())[0] == 400, bad


def test_a_client_that_leaves_is_one_log_line(slow: tuple[Served, str], capsys: pytest.CaptureFixture[str]) -> None:
    _, url = slow
    request = json.dumps({"model": "slow", "prompt": "Hi", "max_tokens": 4}).encode()
    for _ in range(5):  # each sends its request and resets the connection at once
        raw = socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=30)
        raw.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(request), request))
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        raw.close()
    with pytest.raises(openai.APITimeoutError):  # and one that gives up while its request computes
        _client(url, timeout=0.2).completions.create(model="slow", prompt="Hi", max_tokens=40)
    time.sleep(3)
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Error" not in err, err
    lines = err.splitlines()
    assert 1 <= len(lines) <= 6 and all("left before its answer (POST /v1/completions)" in line for line in lines), err


def test_a_burst_of_connections_is_queued_not_dropped(slow: tuple[Served, str]) -> None:
    _, url = slow
    port, answers = int(url.rsplit(":", 1)[1]), []

    def ask() -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
            raw.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answers.append(raw.makefile("rb").read()[:12])

    started = time.monotonic()
    threads = [threading.Thread(target=ask) for _ in range(300)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [b"HTTP/1.1 200"] * 300 and time.monotonic() - started < 1.0  # a dropped connect is retried after 1 s


# Batching (issue 24 §3): requests in flight share forward passes and get what one at a time gets.


def test_requests_in_flight_share_forward_passes_and_get_what_one_at_a_time_gets(real: Served, real_url: str) -> None:
    client, texts = _client(real_url, timeout=600), [f"Question {i}: what is {i} plus {2 * i}? Answer:" for i in range(3)]
    ids = real.backend.encode(texts)
    asks = [lambda t=t: client.completions.create(model=MODEL, prompt=t, max_tokens=1, logprobs=5).choices[0].logprobs.top_logprobs[0] for t in texts]
    asks += [lambda i=i: client.completions.create(model=MODEL, prompt=i, echo=True, max_tokens=1, logprobs=2).choices[0].logprobs.token_logprobs for i in ids]
    asks += [lambda t=t: client.completions.create(model=MODEL, prompt=t, max_tokens=3, temperature=0).choices[0].text for t in texts]
    asks += [lambda t=t: client.completions.create(model=MODEL, prompt=t, max_tokens=3, temperature=1, seed=7).choices[0].text for t in texts[:1]]  # drawn alone
    alone = [ask() for ask in asks]
    rows: list[int] = []
    hook = real.backend.model.register_forward_pre_hook(lambda _, args, kwargs: rows.append(kwargs["input_ids"].shape[0]), with_kwargs=True)
    real.wait_s = 600.0  # a loaded machine may take minutes over the queue
    try:
        with ThreadPoolExecutor(len(asks)) as pool:
            with real.lock:  # the model busy: every request queues, then the batcher takes them together
                answers = [pool.submit(ask) for ask in asks]
                deadline = time.monotonic() + 30
                while len(real.batcher.queue) < len(asks) and time.monotonic() < deadline:
                    time.sleep(0.05)
            together = [answer.result() for answer in answers]
    finally:
        hook.remove()
        real.wait_s = WAIT_S
    assert max(rows) == len(texts)  # one forward pass for each kind's three requests
    for first, second in zip(alone, together):
        if isinstance(first, str):
            assert first == second
        elif isinstance(first, dict):
            assert first.keys() == second.keys() and max(abs(first[t] - second[t]) for t in first) < 1e-4, (first, second)
        else:
            assert max(abs(a - b) for a, b in zip(first[1:], second[1:])) < 1e-4 and first[0] is second[0] is None
