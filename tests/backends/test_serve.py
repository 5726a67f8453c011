"""``dateeval serve`` as the official ``openai`` client and raw HTTP meet it (issue 18 §3).

The model is served in this process (the real default model where numbers
matter, a slow stand-in where the point is time): refused requests leave a
keep-alive connection usable, prompts beyond the context are refused before
any compute, a request whose client left stops (mid-generation and mid-pass
too, its batch-mates' replies unchanged), a request that waits too long for
the model is told so, bodies and connections held at once are bounded, and
what the server does not do is refused.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import openai
import pytest
import torch

from dateeval.backends.base import Generation, GenerationSettings
from dateeval.backends.interrupt import abandoned_when
from dateeval.backends.openai_transport import MAX_API_STOPS
from dateeval.serve import (
    BODY_BUDGET,
    MAX_BODY,
    MAX_ECHO_POSITIONS,
    MAX_STOP_CHARS,
    SMALL_BODY,
    UNSTATED_CONTEXT,
    WAIT_S,
    BodyBudget,
    Served,
    Server,
    banner,
    make_server,
)

if TYPE_CHECKING:
    from dateeval.backends.transformers import TransformersBackend

MODEL = "smollm2-135m"
COUNTING = "1, 2, 3, 4, 5,"  # greedy, the model counts on: no end of sequence for hundreds of tokens


def _start(served: Served) -> Iterator[Server]:
    server = make_server(served, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _url(server: Server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _until(condition: Callable[[], bool], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.005)


def _sent(url: str, body: dict, path: str = "/v1/completions") -> socket.socket:
    """A connection whose request is sent and whose answer is not read yet: closing it is a client leaving."""
    raw = socket.create_connection(("127.0.0.1", _port(url)), timeout=30)
    data = json.dumps(body).encode()
    raw.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (path.encode(), len(data), data))
    return raw


@pytest.fixture(scope="module")
def real(backend: TransformersBackend) -> Served:
    return Served(backend, MODEL, backend.template, threading.Lock())


@pytest.fixture(scope="module")
def real_url(real: Served) -> Iterator[str]:
    for server in _start(real):
        yield _url(server)


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
    connection.request(
        "POST", "/v1/nothing", body=iter([b'{"model": "', b'x"}']), encode_chunked=True
    )  # a chunked body
    assert _answer(connection)[0] == 404
    _models_on(connection)
    connection.request(
        "PUT", "/v1/models", body=b"PUT /v1/models HTTP/1.1\r\n\r\n"
    )  # the standard library's own refusal: JSON too
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
    with socket.create_connection(("127.0.0.1", _port(real_url)), timeout=30) as raw:
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
        "chat": lambda: client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": long_text}], max_completion_tokens=1
        ),
        "reply": lambda: client.completions.create(
            model=MODEL, prompt="Hello", max_tokens=limit
        ),  # the prompt fits, the reply does not
        "10 MB": lambda: client.completions.create(
            model=MODEL, prompt="apple " * ((10 << 20) // 6), max_tokens=1
        ),  # refused untokenised
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
        (
            lambda: client.completions.create(model=MODEL, prompt="Hi", max_tokens=1, stream=True),
            "stream is not supported",
        ),
        (lambda: client.chat.completions.create(**chat, stream=True), "stream is not supported"),
        (lambda: client.completions.create(model=MODEL, prompt="Hi", max_tokens=1, n=2), "n must be 1"),
        (lambda: client.chat.completions.create(**chat, n=2), "n must be 1"),
        (lambda: client.completions.create(model=MODEL, prompt="Hi", max_tokens=1, best_of=3), "best_of must be 1"),
    ]:
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

    def interruptible(
        self, stop: Callable[[], bool], error: type[BaseException]
    ) -> contextlib.AbstractContextManager[None]:
        return abandoned_when(self.model, stop, error)

    def generate_texts(
        self,
        prompts: list[str],
        settings: GenerationSettings,
        batch_size: int,
        should_stop: Callable[[int], bool] | None = None,
    ) -> list[Generation]:
        for _ in range(settings.max_new_tokens):
            self.model(torch.zeros(1))
            if should_stop is not None and all(should_stop(i) for i in range(len(prompts))):
                break
        return [Generation("a" * settings.max_new_tokens, settings.max_new_tokens, len(prompt)) for prompt in prompts]


@pytest.fixture
def slow_server() -> Iterator[Server]:
    yield from _start(Served(SlowBackend(), "slow", None, threading.Lock(), wait_s=1.0))  # type: ignore[arg-type]


@pytest.fixture
def slow(slow_server: Server) -> tuple[Served, str]:
    return slow_server.RequestHandlerClass.served, _url(slow_server)


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
        assert (
            busy.value.status_code == 503
            and "the server is busy" in busy.value.message
            and time.monotonic() - started < 20
        )  # wait_s is 1 s


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
    client, ids = (
        _client(real_url),
        real.backend.encode([" apple" * (MAX_ECHO_POSITIONS + 10)])[0][: MAX_ECHO_POSITIONS + 1],
    )
    asks = {
        f"at most {MAX_API_STOPS} stop strings": lambda: client.completions.create(
            model=MODEL, prompt="Hi", max_tokens=2, stop=["x"] * 10_000
        ),
        f"at most {MAX_STOP_CHARS} characters": lambda: client.completions.create(
            model=MODEL, prompt="Hi", max_tokens=2, stop=["x" * (MAX_STOP_CHARS + 1)]
        ),
        "non-empty": lambda: client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_completion_tokens=2, stop=[""]
        ),
        f"at most {MAX_ECHO_POSITIONS:,} tokens": lambda: client.completions.create(
            model=MODEL, prompt=ids, echo=True, max_tokens=0, logprobs=20
        ),
    }
    for limit, ask in asks.items():
        started = time.monotonic()
        with pytest.raises(openai.BadRequestError) as refused:
            ask()
        assert limit in refused.value.message and time.monotonic() - started < 5, (limit, refused.value.message)


def test_a_lone_surrogate_is_400(real_url: str) -> None:
    for path, field in [
        ("/v1/completions", '"prompt": "Hi \\ud800"'),
        ("/v1/chat/completions", '"messages": [{"role": "user", "content": "\\udfff"}]'),
    ]:
        status, body = _raw(real_url, path, f'{{"model": "{MODEL}", {field}, "max_tokens": 1}}'.encode())
        assert status == 400 and "surrogate" in body["error"]["message"], body


def test_invalid_settings_are_400_with_logprobs_too(real_url: str) -> None:
    for bad in [{"temperature": 5}, {"seed": -1}, {"stop": 7}, {"temperature": "hot"}]:
        for scored in [{"logprobs": 2, "max_tokens": 1}, {"logprobs": 1, "max_tokens": 0, "echo": True}]:
            status, body = _raw(
                real_url, "/v1/completions", json.dumps({"model": MODEL, "prompt": "Hi", **scored, **bad}).encode()
            )
            assert status == 400, (bad, scored, body)
        chat = {
            "model": MODEL,
            "messages": [{"role": "user", "content": "Hi"}],
            "max_completion_tokens": 1,
            "logprobs": True,
            **bad,
        }
        assert _raw(real_url, "/v1/chat/completions", json.dumps(chat).encode())[0] == 400, bad


def test_a_client_that_leaves_is_one_log_line(slow: tuple[Served, str], capsys: pytest.CaptureFixture[str]) -> None:
    _, url = slow
    for _ in range(5):  # each sends its request and resets the connection at once
        raw = _sent(url, {"model": "slow", "prompt": "Hi", "max_tokens": 4})
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        raw.close()
    with pytest.raises(openai.APITimeoutError):  # and one that gives up while its request computes
        _client(url, timeout=0.2).completions.create(model="slow", prompt="Hi", max_tokens=40)
    time.sleep(3)
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Error" not in err, err
    lines = err.splitlines()
    assert 1 <= len(lines) <= 6 and all("left before its answer (POST /v1/completions)" in line for line in lines), err


def test_a_stalled_body_is_one_log_line(slow_server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    slow_server.RequestHandlerClass.timeout = 0.5  # IDLE_S, shortened
    with socket.create_connection(("127.0.0.1", slow_server.server_address[1]), timeout=30) as raw:
        raw.sendall(
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"
        )  # 1 byte of 100, then nothing
        assert raw.recv(1024) == b""  # closed, unanswered
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("left before its answer (POST /v1/completions)") == 1, err


def test_a_burst_of_connections_is_queued_not_dropped(slow: tuple[Served, str]) -> None:
    _, url = slow
    port, answers = _port(url), []

    def ask() -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
            raw.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answers.append(raw.makefile("rb").read()[:12])

    dropped = _listen_drops()
    threads = [threading.Thread(target=ask) for _ in range(300)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [b"HTTP/1.1 200"] * 300
    assert _listen_drops() == dropped  # no connect dropped by a full accept queue (and retried a second later)


def _listen_drops() -> int:
    """The kernel's count of connections dropped because a listen queue was full (TcpExt ListenDrops): no clock involved."""
    with open("/proc/net/netstat") as netstat:
        names, values = [line.split() for line in netstat if line.startswith("TcpExt:")][:2]
    return int(values[names.index("ListenDrops")])


# Batching (issue 24 §3): requests in flight share forward passes and get what one at a time gets.


def test_requests_in_flight_share_forward_passes_and_get_what_one_at_a_time_gets(real: Served, real_url: str) -> None:
    client, texts = (
        _client(real_url, timeout=600),
        [f"Question {i}: what is {i} plus {2 * i}? Answer:" for i in range(3)],
    )
    ids = real.backend.encode(texts)
    asks = [
        lambda t=t: (
            client.completions.create(model=MODEL, prompt=t, max_tokens=1, logprobs=5)
            .choices[0]
            .logprobs.top_logprobs[0]
        )
        for t in texts
    ]
    asks += [
        lambda i=i: (
            client.completions.create(model=MODEL, prompt=i, echo=True, max_tokens=1, logprobs=2)
            .choices[0]
            .logprobs.token_logprobs
        )
        for i in ids
    ]
    asks += [
        lambda t=t: client.completions.create(model=MODEL, prompt=t, max_tokens=3, temperature=0).choices[0].text
        for t in texts
    ]
    asks += [
        lambda t=t: (
            client.completions.create(model=MODEL, prompt=t, max_tokens=3, temperature=1, seed=7).choices[0].text
        )
        for t in texts[:1]
    ]  # drawn alone
    alone = [ask() for ask in asks]
    rows: list[int] = []
    hook = real.backend.model.register_forward_pre_hook(
        lambda _, args, kwargs: rows.append(kwargs["input_ids"].shape[0]), with_kwargs=True
    )
    real.wait_s = 600.0  # a loaded machine may take minutes over the queue
    try:
        with ThreadPoolExecutor(len(asks)) as pool:
            with real.lock:  # the model busy: every request queues, then the batcher takes them together
                answers = [pool.submit(ask) for ask in asks]
                deadline = time.monotonic() + 30
                while len(real.requests.queue) < len(asks) and time.monotonic() < deadline:
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
            assert first.keys() == second.keys() and max(abs(first[t] - second[t]) for t in first) < 1e-4, (
                first,
                second,
            )
        else:
            assert max(abs(a - b) for a, b in zip(first[1:], second[1:])) < 1e-4 and first[0] is second[0] is None


def test_clients_with_one_request_in_flight_stay_in_one_batch(
    real: Served, real_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four clients, each sending its next request once answered, one of them 0.3 s later than the others (far past
    GATHER_S): every batch holds all four, where without waiting for the connections just answered the late one is
    left behind and the two groups alternate, a batch each. REJOIN_S is long here so that a loaded machine's slow
    clients still count as coming back; GET /v1/stats reports the batches."""
    from dateeval.serve import queue

    monkeypatch.setattr(queue, "REJOIN_S", 30.0)
    clients, rounds = 4, 4
    ready = threading.Barrier(clients + 1)

    def keep_asking(index: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", _port(real_url), timeout=600)
        ready.wait()
        for turn in range(rounds):
            if turn and index == clients - 1:
                time.sleep(0.3)
            body = json.dumps(
                {"model": MODEL, "prompt": f"Client {index}, turn {turn}: 2 + 2 =", "max_tokens": 1, "logprobs": 3}
            )
            connection.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
            answer = connection.getresponse()
            assert answer.status == 200, answer.read()
            answer.read()
        connection.close()

    before = dict(real.requests.sizes.get("top", {}))
    with ThreadPoolExecutor(clients) as pool:
        with real.lock:  # the model busy: the first requests all queue, so the first batch holds all four
            asked = [pool.submit(keep_asking, index) for index in range(clients)]
            ready.wait()
            _until(lambda: len(real.requests.queue) == clients)
        for done in asked:
            done.result()
    sizes = {
        size: count - before.get(size, 0)
        for size, count in real.requests.sizes["top"].items()
        if count > before.get(size, 0)
    }
    assert sizes == {clients: rounds}
    connection = http.client.HTTPConnection("127.0.0.1", _port(real_url), timeout=60)
    connection.request("GET", "/v1/stats")
    assert json.loads(connection.getresponse().read())["batches"]["top"] == {
        str(k): v for k, v in real.requests.sizes["top"].items()
    }


# A client that leaves stops its work within a second, even mid-generation and mid-pass (issue 25 §4).


def _counting(model: torch.nn.Module) -> tuple[list[float], Callable[[], None]]:
    """When each forward pass of ``model`` (a model, or one layer of it) started, and how to stop counting."""
    starts: list[float] = []
    hook = model.register_forward_pre_hook(lambda *_: starts.append(time.monotonic()))
    return starts, hook.remove


def _freed(served: Served) -> float:
    """When the model was free again (its lock taken and given back)."""
    assert served.lock.acquire(timeout=300)
    served.lock.release()
    return time.monotonic()


def test_a_stopped_row_leaves_the_other_replies_as_they_were(backend: TransformersBackend) -> None:
    prompts, settings, asked = [COUNTING, "The capital of France is", "Hello"], GenerationSettings(max_new_tokens=8), []

    def after_three_steps(index: int) -> bool:  # asked after every decoding step, for each row
        asked.append(index)
        return index == 0 and asked.count(0) >= 3

    whole = backend.generate_texts(prompts, settings, batch_size=3)
    cut = backend.generate_texts(prompts, settings, batch_size=3, should_stop=after_three_steps)
    assert cut[1:] == whole[1:]
    assert whole[0].text.startswith(cut[0].text) and len(cut[0].text) < len(whole[0].text), (cut[0], whole[0])


def test_a_client_that_leaves_mid_generation_frees_the_model_within_a_second(real: Served, real_url: str) -> None:
    passes, stop_counting = _counting(real.backend.model)
    try:
        raw = _sent(real_url, {"model": MODEL, "prompt": COUNTING, "max_tokens": 2000, "temperature": 0})
        _until(lambda: len(passes) >= 3)  # the prompt's pass and two decoding steps
        raw.close()
        left = time.monotonic()
        freed = _freed(real)
    finally:
        stop_counting()
    assert freed - left < 1.0 and len(passes) < 20, (freed - left, len(passes))  # of 2,000 steps


def test_a_batch_mate_who_stays_gets_the_reply_it_would_have_got(real: Served, real_url: str) -> None:
    """The leaver's row stops: the batch ends with the mate's reply (not after the leaver's 400 tokens), and that reply is unchanged."""
    mate = [{"role": "user", "content": "Say hi."}]
    reference = real.backend.generate_texts(
        [COUNTING, real.template.render(mate, mode="default").text], GenerationSettings(max_new_tokens=32), 2
    )[1]
    assert reference.n_tokens < 32  # it ends within 32 tokens, so a longer max_tokens changes nothing
    client, passes, stop_counting = _client(real_url, timeout=600), *_counting(real.backend.model)
    real.wait_s = 600.0
    try:
        with ThreadPoolExecutor(1) as pool:
            with real.lock:  # both queue, then share one batch (same settings)
                raw = _sent(real_url, {"model": MODEL, "prompt": COUNTING, "max_tokens": 400, "temperature": 0})
                stays = pool.submit(
                    lambda: client.chat.completions.create(
                        model=MODEL, messages=mate, max_completion_tokens=400, temperature=0
                    )
                )
                _until(lambda: len(real.requests.queue) == 2)
            _until(lambda: len(passes) >= 3)
            raw.close()
            reply = stays.result()
            answered = time.monotonic()
        freed = _freed(real)
    finally:
        stop_counting()
        real.wait_s = WAIT_S
    assert reply.choices[0].message.content == reference.text and reply.usage.completion_tokens == reference.n_tokens
    assert len(passes) <= reference.n_tokens + 1 and freed - answered < 1.0, (len(passes), reference.n_tokens)


def test_a_client_that_leaves_during_a_long_forward_pass_stops_it_between_layers(real: Served, real_url: str) -> None:
    layers = real.backend.model.model.layers
    ids = real.backend.encode([" apple banana" * 1000])[0][:MAX_ECHO_POSITIONS]
    counted = [_counting(layer) for layer in layers]
    try:
        raw = _sent(real_url, {"model": MODEL, "prompt": ids, "echo": True, "max_tokens": 0, "logprobs": 1})
        _until(lambda: bool(counted[0][0]))  # the pass began
        raw.close()
        left = time.monotonic()
        freed = _freed(real)
    finally:
        for _, stop_counting in counted:
            stop_counting()
    started = sum(bool(starts) for starts, _ in counted)
    assert started < len(layers) // 2 and freed - left < 5.0, (started, freed - left)  # one layer, not the pass


# Memory across requests (issue 25 §4): bodies held at once, connections served at once, replies of a model without a stated context.


class RecordedBudget(BodyBudget):
    """A body budget that records the most bytes it held at once, and when a body asked for room."""

    def __init__(self) -> None:
        super().__init__(BODY_BUDGET)
        self.most, self.asked = 0, threading.Event()

    def take(self, size: int, wait_s: float) -> bool:
        self.asked.set()
        taken = super().take(size, wait_s)
        self.most = max(self.most, self.held)
        return taken


BIG = json.dumps({"model": "nobody", "prompt": "x" * (MAX_BODY - 100)}).encode()  # read, parsed, then refused (404)


def test_bodies_held_at_once_stay_within_the_budget(slow_server: Server) -> None:
    url, budget = _url(slow_server), RecordedBudget()
    slow_server.bodies, slow_server.body_wait_s = budget, 120.0
    with ThreadPoolExecutor(8) as pool:  # twice what the budget holds, at once: all answered, at most four held
        statuses = [status for status, _ in pool.map(lambda _: _raw(url, "/v1/completions", BIG), range(8))]
    assert statuses == [404] * 8 and BODY_BUDGET >= budget.most >= len(BIG) and budget.held == 0, budget.most


def test_a_body_that_finds_no_room_waits_then_is_503_with_the_budget_named(slow_server: Server) -> None:
    # others' bodies: room for less than this one (whose first SMALL_BODY bytes are read before it asks for room)
    url, budget, others = _url(slow_server), RecordedBudget(), BODY_BUDGET - (len(BIG) - SMALL_BODY) + 1
    slow_server.bodies, slow_server.body_wait_s = budget, 0.5
    assert budget.take(others, 0)
    status, body = _raw(url, "/v1/completions", BIG)
    assert status == 503 and f"at most {BODY_BUDGET:,} bytes of request bodies" in body["error"]["message"], body
    assert (
        _raw(url, "/v1/completions", json.dumps({"model": "slow", "prompt": "Hi", "max_tokens": 1}).encode())[0] == 200
    )  # small ones fit
    slow_server.body_wait_s = 120.0
    budget.asked.clear()
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(_raw, url, "/v1/completions", BIG)
        assert budget.asked.wait(60)
        time.sleep(0.2)  # it waits for room
        budget.give(others)
        assert waiting.result()[0] == 404  # read and answered once room came


def test_connections_past_the_bound_wait_for_a_thread(slow_server: Server) -> None:
    url = _url(slow_server)
    slow_server.slots = threading.BoundedSemaphore(2)
    idle = [
        socket.create_connection(("127.0.0.1", _port(url)), timeout=30) for _ in range(2)
    ]  # accepted first: each holds a thread
    try:
        with ThreadPoolExecutor(1) as pool:
            third = pool.submit(lambda: _client(url).models.list().data[0].id)
            time.sleep(1.0)
            assert not third.done()
            idle[0].close()
            assert third.result(timeout=30) == "slow"
    finally:
        for connection in idle:
            connection.close()


def test_a_model_that_states_no_context_length_is_served_within_a_stated_one(slow: tuple[Served, str]) -> None:
    served, url = slow
    served.backend.context_length = None
    status, body = _raw(
        url, "/v1/completions", json.dumps({"model": "slow", "prompt": "Hi", "max_tokens": UNSTATED_CONTEXT}).encode()
    )
    assert status == 400 and f"(whose config states none) is {UNSTATED_CONTEXT} tokens" in body["error"]["message"], (
        body
    )
    assert _client(url).completions.create(model="slow", prompt="Hi", max_tokens=2).choices[0].text == "aa"


# Issue 36 §3 and §8: stalled uploads, HTTP framing, half-closed clients.


def _raw_exchange(server: Server, request: bytes, half_close: bool = False) -> tuple[bytes, bool, bytes]:
    """Send ``request`` bytes as they are; the status line of the final answer, whether the server then closed, its body."""
    with socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=30) as raw:
        raw.sendall(request)
        if half_close:
            raw.shutdown(socket.SHUT_WR)
        reader = raw.makefile("rb")
        status = reader.readline()
        while status.startswith(b"HTTP/1.1 100"):  # an interim answer (RFC 9110 §15.2): skipped, as clients do
            while reader.readline().strip():
                pass
            status = reader.readline()
        length = 0
        while (line := reader.readline()).strip():
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        body = reader.read(length)
        raw.settimeout(5)
        try:
            closed = reader.read(1) == b""
        except TimeoutError:
            closed = False
        return status, closed, body


def test_stalled_uploads_do_not_block_a_small_request(slow_server: Server) -> None:
    """Four connections that declare 16 MiB and send one byte reserved the whole body budget: a 79-byte completion waited
    BODY_WAIT_S and got 503. Now room is taken as bytes come, and a body has BODY_READ_S in all however it trickles."""
    url = _url(slow_server)
    slow_server.body_read_s = 2.0
    stalled = [socket.create_connection(("127.0.0.1", _port(url)), timeout=30) for _ in range(4)]
    try:
        for raw in stalled:
            raw.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n{" % MAX_BODY)
        time.sleep(0.5)
        start = time.monotonic()
        status, body = _raw(
            url, "/v1/completions", json.dumps({"model": "slow", "prompt": "Hi", "max_tokens": 1}).encode()
        )
        assert status == 200 and time.monotonic() - start < 5, body
        trickle, began = stalled[0], time.monotonic()
        with contextlib.suppress(OSError):  # a byte every half second: each read is quick, the body as a whole is not
            while time.monotonic() - began < 30:
                trickle.sendall(b" ")
                time.sleep(0.5)
        assert (
            time.monotonic() - began < 15
        )  # closed once its BODY_READ_S passed (the server reset the trickling sender)
    finally:
        for raw in stalled:
            raw.close()


@pytest.mark.parametrize(
    ("headers", "status", "says"),
    [
        (b"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n", b"400", b"both Transfer-Encoding and Content-Length"),
        (b"Transfer-Encoding: xchunked\r\n", b"501", b"'xchunked' is not supported"),
        (b"Transfer-Encoding: gzip, chunked\r\n", b"501", b"'gzip, chunked' is not supported"),
        (b"Content-Length: 2\r\nContent-Length: 3\r\n", b"400", b"Content-Lengths that disagree"),
        (b"Content-Length: 2, 3\r\n", b"400", b"Content-Lengths that disagree"),
    ],
)
def test_ambiguous_framing_is_refused_and_the_connection_closed(
    slow_server: Server, headers: bytes, status: bytes, says: bytes
) -> None:
    """RFC 9112 §6: where a body ends must be certain, or a smuggled request could follow it; these got 200 on a
    connection that stayed open (or were read by the first of their lengths)."""
    request = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n2\r\n{}\r\n0\r\n\r\n"
    line, closed, body = _raw_exchange(slow_server, request)
    assert line.split()[1] == status and closed and says in body, (line, body)


def test_a_client_that_half_closes_after_its_request_is_answered(slow_server: Server) -> None:
    """RFC 9112 §9.6: a client may shut down its sending side and read the answer; it used to get nothing (taken for gone)."""
    body = json.dumps({"model": "slow", "prompt": "Hi", "max_tokens": 4}).encode()
    request = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    line, _, _ = _raw_exchange(slow_server, request, half_close=True)
    assert line.startswith(b"HTTP/1.1 200"), line


def test_served_requests_are_planned_by_the_models_scheduler(
    real: Served, real_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """serve batches nothing itself: a scored request and a generated one reach the model through the backend's
    scheduler, the one a sweep's requests go through, and its answer is the in-process backend's."""
    scheduler, planned = real.backend.scheduler, []
    score, generate = scheduler.label_logprobs, scheduler.generate
    monkeypatch.setattr(scheduler, "label_logprobs", lambda *args: planned.append("score") or score(*args))
    monkeypatch.setattr(scheduler, "generate", lambda *args: planned.append("generate") or generate(*args))
    client = _client(real_url)
    top = client.completions.create(model=MODEL, prompt="The capital of France is", max_tokens=1, logprobs=1).choices[0]
    text = client.completions.create(model=MODEL, prompt=COUNTING, max_tokens=4, temperature=0).choices[0].text
    assert planned == ["score", "generate"]
    assert text == real.backend.generate_texts([COUNTING], GenerationSettings(max_new_tokens=4), 1)[0].text
    assert top.logprobs.top_logprobs[0] and top.text in top.logprobs.top_logprobs[0]
