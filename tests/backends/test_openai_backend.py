"""The OpenAI-compatible HTTP backend, against real servers on 127.0.0.1.

Two kinds of server: ``python -m dateeval serve`` (the real model behind a
real endpoint; once with the model's own template, once with GPT-OSS's,
which writes today's date into the system message like a provider that
injects it), and a small misbehaving endpoint in this process that answers
429, 500, hangs, malformed JSON, dropped connections and key-echoing errors.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import select
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT, run_cli_process

from dateeval.backends.base import (
    CONTINUATION_LOGPROBS,
    BackendOptions,
    ContinuationRequest,
    Label,
    LabelRequest,
    LabelScores,
)
from dateeval.backends.openai_api import OpenAIBackend, parse_endpoint
from dateeval.backends.openai_transport import server_date
from dateeval.errors import DateEvalError
from dateeval.probe import CONTROL_DATE, Reply, ServerDay, find_dates, server_day, verdict
from dateeval.prompting import ChatTemplate
from dateeval.explorer.sent import explain
from dateeval.store import Store

if TYPE_CHECKING:
    from dateeval.backends.transformers import TransformersBackend

MODEL = "smollm2-135m"
SECRET = "sk-dateeval-test-7f3a9c"  # what the tests put in the key variable: it must never come back
MESSAGES = ({"role": "user", "content": "Answer:"},)


def _rows(store: Path) -> pd.DataFrame:
    frame, problems = Store(store).read()
    assert not problems.messages()
    return frame


# A misbehaving endpoint: the first path segment picks the behaviour, e.g. http://HOST:PORT/429-then-ok/v1.


def _chat_answer(tokens: dict[str, float]) -> dict:
    entries = [{"token": token, "logprob": value} for token, value in tokens.items()]
    return {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": next(iter(tokens))},
                "logprobs": {"content": [{**entries[0], "top_logprobs": entries}]},
            }
        ],
        "usage": {"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8},
    }


GOOD = _chat_answer({"A": -0.5, "B": -1.5, "C": -2.5, "D": -3.5})


def _completion_answer(text: str, tokens: dict[str, float]) -> dict:
    logprobs = {
        "tokens": [next(iter(tokens))],
        "token_logprobs": [next(iter(tokens.values()))],
        "top_logprobs": [tokens],
        "text_offset": [0],
    }
    return {
        "choices": [{"index": 0, "text": text, "logprobs": logprobs, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8},
    }


# Completions servers that score no prompt: one refuses echo, one echoes a token fewer than it was sent (as if it re-tokenised).
NO_ECHO = {
    "no-echo": (400, {"error": {"message": "echo is not supported"}}),
    "short-echo": (
        200,
        {"choices": [{"index": 0, "text": "x", "logprobs": {"tokens": ["x"], "token_logprobs": [None]}}]},
    ),
}


class Faults(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: dict[str, int] = {}
    authorizations: list[str] = []
    replies: dict[str, str] = {}  # scenario "replies": the reply to a prompt that holds the key

    def do_POST(self) -> None:  # the name BaseHTTPRequestHandler calls for a POST
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        scenario = self.path.split("/")[1]
        count = Faults.seen[scenario] = Faults.seen.get(scenario, 0) + 1
        Faults.authorizations.append(self.headers.get("Authorization", ""))
        first = count == 1
        if scenario == "429-then-ok" and first:
            return self._json(429, {"error": {"message": "rate limited"}}, {"Retry-After": "0"})
        if scenario == "500-then-ok" and first:
            return self._json(500, {"error": {"message": "internal error"}})
        if scenario == "always-500":
            return self._json(500, {"error": {"message": "internal error"}})
        if (scenario == "hang-then-ok" and first) or scenario == "always-hang":
            time.sleep(2.5)
        if (scenario == "drop-then-ok" and first) or scenario == "always-drop":
            self.close_connection = True
            self.connection.shutdown(2)
            return None
        if scenario == "malformed":
            return self._raw(200, b'{"choices": [{"index": 0, "message": ')
        if scenario == "missing-logprobs":
            return self._json(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": "A"}}]})
        if scenario == "label-outside-top-k":
            return self._json(200, _chat_answer({"The": -0.1, "A": -3.0}))
        if scenario in NO_ECHO and body.get("echo"):
            return self._json(*NO_ECHO[scenario])
        if (
            scenario in NO_ECHO
        ):  # a reply with a number and an answer letter; next-token scores where "B" is not among the top
            return self._json(200, _completion_answer("2 + 2 = 4 items. The answer is A.", {"The": -0.1, "A": -3.0}))
        if scenario == "replies":
            asked = json.dumps(body.get("messages"))
            text = next(reply for key, reply in Faults.replies.items() if json.dumps(key)[1:-1] in asked)
            return self._json(
                200,
                {
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                    ],
                    "usage": {"prompt_tokens": 7, "completion_tokens": 9, "total_tokens": 16},
                },
            )
        if scenario == "echo-key":
            return self._json(401, {"error": {"message": f"invalid key in header {self.headers.get('Authorization')}"}})
        return self._json(200, GOOD)

    def _json(self, status: int, payload: dict, headers: dict | None = None) -> None:
        self._raw(status, json.dumps(payload).encode(), headers)

    def _raw(self, status: int, data: bytes, headers: dict | None = None) -> None:
        self.send_response(status)
        for name, value in {
            "Content-Type": "application/json",
            "Content-Length": str(len(data)),
            **(headers or {}),
        }.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # BaseHTTPRequestHandler's signature, `format` included
        pass


@pytest.fixture(scope="module")
def faults() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Faults)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _backend(url: str, **options: object) -> OpenAIBackend:
    settings = {"mode": "chat", "retries": 2, "timeout_s": 1.0, "concurrency": 4, **options}
    return OpenAIBackend(parse_endpoint(f"{url}#m"), BackendOptions(**settings))


def _labels(backend: OpenAIBackend, n: int = 1) -> list[LabelScores]:
    request = LabelRequest(MESSAGES, tuple(Label(letter) for letter in "ABCD"))
    try:
        return backend.label_logprobs([request] * n, batch_size=n)
    finally:
        backend.close()


@pytest.mark.parametrize("scenario", ["429-then-ok", "500-then-ok", "hang-then-ok", "drop-then-ok"])
def test_transient_faults_are_retried(faults: str, scenario: str) -> None:
    (scores,) = _labels(_backend(f"{faults}/{scenario}/v1"))
    np.testing.assert_allclose(scores.logprobs, [-0.5, -1.5, -2.5, -3.5])
    assert Faults.seen[scenario] == 2
    assert scores.usage.api_prompt_tokens == 7 and scores.usage.request_utc and scores.usage.server_date


@pytest.mark.parametrize(
    ("scenario", "message"),
    [
        ("always-500", "HTTP 500: internal error after 3 attempts"),
        ("always-hang", "timed out after 3 attempts"),
        ("always-drop", "connection failed"),
        ("malformed", "the answer is not JSON"),
        ("missing-logprobs", "malformed answer (no choices[0].logprobs)"),
        ("label-outside-top-k", "option label 'B' is not among"),
    ],
)
def test_persistent_faults_end_in_one_clear_error(faults: str, scenario: str, message: str) -> None:
    with pytest.raises(DateEvalError, match=re.escape(message)):
        _labels(_backend(f"{faults}/{scenario}/v1"))


def test_the_key_is_sent_but_never_shown(faults: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATEEVAL_TEST_KEY", SECRET)
    with pytest.raises(DateEvalError) as error:
        _labels(_backend(f"{faults}/echo-key/v1", api_key_env="DATEEVAL_TEST_KEY"))
    assert f"Bearer {SECRET}" in Faults.authorizations
    assert "HTTP 401" in str(error.value) and SECRET not in str(error.value) and "***" in str(error.value)


def test_bad_specs_and_options_are_one_line() -> None:
    for spec, message in [
        ("http://h/v1", "names no model"),
        ("ftp://h/v1#m", "not an http"),
        ("http://u:p@h/v1#m", "carries credentials"),
    ]:
        with pytest.raises(DateEvalError, match=message):
            parse_endpoint(spec)
    with pytest.raises(DateEvalError, match="NO_SUCH_KEY_VARIABLE .* is not set"):
        _backend("http://127.0.0.1:9/v1", api_key_env="NO_SUCH_KEY_VARIABLE")
    with pytest.raises(DateEvalError, match="unknown API mode"):
        _backend("http://127.0.0.1:9/v1", mode="stream")
    with pytest.raises(DateEvalError, match="needs the model's tokenizer"):
        _backend("http://127.0.0.1:9/v1", mode="completions")


def test_a_failed_unit_stores_nothing_and_never_the_key(
    faults: str, tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATEEVAL_TEST_KEY", SECRET)
    common = (
        "--api-mode",
        "chat",
        "--api-key-env",
        "DATEEVAL_TEST_KEY",
        "--retries",
        "1",
        "--request-timeout",
        "1",
        "--dataset",
        "arc_challenge",
        "--limit",
        "3",
        "--data-dir",
        str(data_dir),
        "--dates",
        "2024-01-01",
        "--store",
        str(tmp_path / "store"),
    )
    failed = run_cli_process("run", "--model", f"openai:{faults}/malformed/v1#m", *common)
    assert failed.returncode == 2 and "not JSON" in failed.stderr and "Traceback" not in failed.stderr
    assert not list((tmp_path / "store").rglob("*.parquet"))
    done = run_cli_process("run", "--model", f"openai:{faults}/ok/v1#m", *common)
    assert done.returncode == 0, done.stderr
    rows = _rows(tmp_path / "store")
    assert len(rows) == 3 and (rows["date_control"] == "system-line").all() and (rows["api_prompt_tokens"] == 7).all()
    assert SECRET not in rows.astype(str).to_csv() and SECRET not in done.stdout + done.stderr
    # The label a chat endpoint reads differs from in-process --label-style auto: said when scoring starts, kept in every row.
    assert (rows["label_variant"] == "label").all() and done.stderr.count(
        "chat mode reads the option labels as the bare letters"
    ) == 1


def test_replies_with_nul_bytes_and_lone_surrogates_are_graded_and_stored_as_sent(
    faults: str, tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A NUL byte, a lone surrogate (both in the code) and a plain program whose exception's message is a lone surrogate:
    each reply is graded in the sandbox and stored exactly as the server sent it, with the unit's other rows; a resume
    finds the unit complete (before, each crashed the sweep again on every resume and no row of the unit was kept)."""
    pytest.importorskip("shutil").which("bwrap") or pytest.skip("bubblewrap (bwrap) is not installed")
    from dateeval.tasks import humaneval

    problems = humaneval.load_problems(data_dir)[:4]
    whole = [f"```python\n{p.prompt}{p.canonical_solution}" for p in problems]
    sent = [
        whole[0] + "```",
        whole[1] + "# \0\n```",
        whole[2] + "# \ud800\n```",
        f"```python\ndef {problems[3].entry_point}(operations):\n    raise ValueError(chr(0xD800))\n```",
    ]
    monkeypatch.setattr(Faults, "replies", {f"def {p.entry_point}(": reply for p, reply in zip(problems, sent)})
    command = (
        "run",
        "--model",
        f"openai:{faults}/replies/v1#m",
        "--api-mode",
        "chat",
        "--dataset",
        "humaneval",
        "--limit",
        "4",
        "--data-dir",
        str(data_dir),
        "--dates",
        "2024-01-01",
        "--store",
        str(tmp_path / "store"),
    )
    for attempt in ("run", "resume"):
        done = run_cli_process(*command)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (attempt, done.stderr[-2000:])
        rows = _rows(tmp_path / "store").set_index("item_id").loc[[p.task_id for p in problems]]
        assert rows["output"].tolist() == sent, attempt
        assert rows["outcome"].tolist() == ["passed", "error", "error", "error"], rows["outcome_message"].tolist()
        messages = rows["outcome_message"].tolist()
        assert (
            "null bytes" in messages[1]
            and "surrogates not allowed" in messages[2]
            and messages[3] == "ValueError: \ud800"
        ), messages
    assert Faults.seen["replies"] == 4  # the resume asked nothing again
    assert len(Store(tmp_path / "store").files()) == 1
    # Read again by regrade and export (in this process: the commands' own functions): each reply exact where the
    # format holds it, the surrogate as the text \ud800 in text files.
    from dateeval import results
    from dateeval.cli.outputs import write_export
    from dateeval.regrade import regrade
    from dateeval.results.report import export

    store = Store(tmp_path / "store")
    regraded = regrade(store, str(data_dir), ())
    assert not regraded["changed"].any() and sorted(regraded["parsed"]) == sorted(rows["parsed"])
    export.as_text(regraded).to_csv(tmp_path / "regrade.csv", index=False)
    for suffix in (".parquet", ".csv", ".jsonl"):
        assert write_export(results.open(store)[0], tmp_path / f"rows{suffix}") == 4
    lines = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sorted(row["output"] for row in lines) == sorted([*sent[:2], sent[2].replace("\ud800", "\\ud800"), sent[3]])
    assert "\\ud800" in (tmp_path / "rows.csv").read_text(encoding="utf-8") and "\\ud800" in (
        tmp_path / "regrade.csv"
    ).read_text(encoding="utf-8")


def test_chat_mode_says_once_that_it_reads_bare_labels(faults: str, capsys: pytest.CaptureFixture) -> None:
    backend = _backend(f"{faults}/ok/v1")
    request = LabelRequest(MESSAGES, tuple(Label(letter) for letter in "ABCD"))
    try:
        backend.label_logprobs([request], 1)
        backend.label_logprobs([request], 1)
    finally:
        backend.close()
    warned = capsys.readouterr().err
    assert (
        warned.count("dateeval: warning: chat mode reads the option labels as the bare letters ('A', 'B', 'C', 'D'")
        == 1
    )
    assert "label_variant 'label'" in warned


class OtherClock(Faults):
    """A provider whose clock reads 2026-11-30 (every answer's Date header), whatever this machine's says."""

    def date_time_string(self, timestamp: float | None = None) -> str:
        return "Mon, 30 Nov 2026 12:00:00 GMT"


@pytest.fixture(scope="module")
def other_clock() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), OtherClock)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_server_clock_runs_are_dated_by_the_servers_day(other_clock: str) -> None:
    """The issue's case: this machine at 2026-12-05, the server at 2026-11-30: the server's day, and a warning naming both."""
    model, utc = f"openai:{other_clock}/v1#m", dt.timezone.utc
    mismatch = server_day([model], BackendOptions(), local=dt.datetime(2026, 12, 5, 9, 0, tzinfo=utc))
    assert mismatch.day == dt.date(2026, 11, 30)
    assert (
        "2026-11-30 12:00 UTC and this machine's 2026-12-05 09:00 UTC" in mismatch.warning
        and "dated by the server's day" in mismatch.warning
    )
    agreed = server_day([model], BackendOptions(), local=dt.datetime(2026, 11, 30, 12, 1, tzinfo=utc))
    assert agreed == ServerDay(dt.date(2026, 11, 30), None)


def test_server_clock_is_not_explained_as_injecting_our_date(tmp_path: Path) -> None:
    template = tmp_path / "plain.jinja"
    template.write_text("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}<assistant>")
    server = ChatTemplate.from_file(template)
    assert "dateeval injects" not in explain("server-clock", server) and "adds none" in explain("server-clock", server)
    assert "dateeval injects one into the messages" in explain("chat", server)


def test_server_date_header() -> None:
    assert server_date({"date": "Wed, 03 Dec 2025 10:00:00 GMT"}) == "2025-12-03T10:00:00+00:00"
    assert server_date({"date": "yesterday"}) is None and server_date({}) is None


# The probe's reading of replies (no server needed).


def test_dates_are_found_in_every_common_format() -> None:
    for text in [
        "Today is 2025-12-03.",
        "It is December 3rd, 2025",
        "3 Dec 2025",
        "Wednesday, December 3, 2025",
        "12/03/2025",
    ]:
        assert "2025-12-03" in {found.day for found in find_dates(text)}, text
    assert find_dates("It is 2025-12-03.")[0].format == "%Y-%m-%d"
    assert find_dates("Nothing here, maybe 2023.") == []


def test_verdicts() -> None:
    today = dt.date(2025, 12, 3)

    def said(text: str, system: str | None = None) -> Reply:
        return Reply("q", system, text, find_dates(text))

    control_read = said(f"It is {CONTROL_DATE:%d %b %Y}", "Today Date: ...")
    assert verdict([said("Today is 3 December 2025.")], control_read, {today})[:3] == ("yes", "%-d %B %Y", True)
    assert verdict([said("It is 2025-12-02")], control_read, {today})[:3] == (
        "yes",
        "%Y-%m-%d",
        False,
    )  # a time zone away
    assert verdict([said("It is 2023-01-01")], control_read, {today})[0] == "no"
    assert verdict([said("I cannot know that.")], said("I cannot know that."), {today})[0] == "inconclusive"


# Real servers: the model behind `python -m dateeval serve`.


def _serve(*extra: str) -> Iterator[str]:
    """Start `dateeval serve` on a free port; yield its base URL; stop it."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "dateeval", "serve", "--model", MODEL, "--port", "0", *extra],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ready, _, _ = select.select([process.stdout], [], [], 300)
        line = process.stdout.readline() if ready else ""
        if "serving" not in line:
            process.kill()
            pytest.fail(f"dateeval serve did not start: {line}{process.stderr.read()}")
        yield line.split(" on ")[-1].strip()
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def own_template(shared: Path) -> Iterator[str]:
    yield from _serve()


@pytest.fixture(scope="module")
def injecting(templates_dir: Path) -> Iterator[str]:
    yield from _serve("--chat-template", str(templates_dir / "openai__gpt-oss-20b.jinja"))


def test_completions_mode_matches_the_in_process_backend(
    own_template: str, backend: TransformersBackend, data_dir: Path, tmp_path: Path
) -> None:
    """The same rendered prompts, scored by the server over HTTP and in this process: same predictions, probabilities to 1e-4.

    Bare letters: after this model's assistant header "A" is within the top 20 the server returns, so each item is one
    request; " A" is outside it and scored by echo (next test).
    """
    dates = (
        "--dates",
        "2024-01-01,2024-06-01",
        "--dataset",
        "arc_challenge",
        "--limit",
        "4",
        "--data-dir",
        str(data_dir),
        "--label-style",
        "label",
    )
    http = run_cli_process(
        "run", "--model", f"openai:{own_template}#{MODEL}", *dates, "--store", str(tmp_path / "http")
    )
    local = run_cli_process(
        "run", "--model", MODEL, "--dtype", "float32", "--device", "cpu", *dates, "--store", str(tmp_path / "local")
    )
    assert http.returncode == 0 and local.returncode == 0, http.stderr + local.stderr
    key = ["condition", "item_id"]
    remote, here = (
        _rows(tmp_path / "http").sort_values(key, ignore_index=True),
        _rows(tmp_path / "local").sort_values(key, ignore_index=True),
    )
    assert len(remote) == 8 and list(remote["prompt_hash"]) == list(here["prompt_hash"])  # the very same prompt texts
    assert list(remote["pred"]) == list(here["pred"])
    np.testing.assert_allclose(np.stack(remote["probs"]), np.stack(here["probs"]), atol=1e-4)
    np.testing.assert_allclose(remote["label_mass"], here["label_mass"], atol=1e-4)
    assert (
        set(remote["date_control"]) == {"full"}
        and set(remote["backend"]) == {"openai"}
        and remote["api_prompt_tokens"].notna().all()
    )


def test_labels_outside_the_top_k_are_scored_exactly_over_http(
    own_template: str, data_dir: Path, tmp_path: Path
) -> None:
    """After this model's assistant header " A" is outside the top 20 the server returns: echo reads it, as in this process."""
    args = (
        "--dates",
        "2024-01-01",
        "--dataset",
        "arc_challenge",
        "--limit",
        "2",
        "--data-dir",
        str(data_dir),
        "--label-style",
        "space+label",
    )
    http = run_cli_process("run", "--model", f"openai:{own_template}#{MODEL}", *args, "--store", str(tmp_path / "http"))
    local = run_cli_process(
        "run", "--model", MODEL, "--dtype", "float32", "--device", "cpu", *args, "--store", str(tmp_path / "local")
    )
    assert http.returncode == 0 and local.returncode == 0, http.stderr + local.stderr
    remote, here = _rows(tmp_path / "http").sort_values("item_id"), _rows(tmp_path / "local").sort_values("item_id")
    assert (
        list(remote["pred"]) == list(here["pred"]) and (remote["label_mass"] < 0.5).all()
    )  # the space-letters are unlikely here
    np.testing.assert_allclose(np.stack(remote["probs"]), np.stack(here["probs"]), atol=1e-4)
    np.testing.assert_allclose(remote["label_mass"], here["label_mass"], atol=1e-4)


def test_echo_scores_labels_and_continuations_as_the_in_process_backend(
    own_template: str, backend: TransformersBackend
) -> None:
    """Chain-of-thought answer letters (read from the top 20, or all outside it) and GSM8K answers' numbers, over HTTP and here, to 1e-4."""
    from dateeval.tasks.mcqa import label_tokens

    question = backend.template.render(
        [{"role": "user", "content": "What is 2+2?\nA. 3\nB. 4\nC. 5\nD. 6"}], mode="none"
    ).text
    labels = label_tokens(backend.tokenizer, 4, "space+label").labels
    letters = [
        LabelRequest(question + reasoning, labels)
        for reasoning in ("Two plus two is four. The answer is", "Let me think. Two plus two is four, and")
    ]
    numbers = [
        ContinuationRequest(question + "Two plus two is", " 4"),
        ContinuationRequest(question + "It is", " 4,096 apples"),
    ]
    full = backend.next_token_logprobs(backend.encode([letters[1].prompt]), [list(range(len(backend.tokenizer)))])[0]
    assert all((full > full[label.token_id]).sum() >= 20 for label in labels)  # the top 20 alone cannot read these
    http = OpenAIBackend(parse_endpoint(f"{own_template}#{MODEL}"), BackendOptions(timeout_s=600))
    try:
        assert (
            http.supports(CONTINUATION_LOGPROBS)
            and http.capabilities.exact_labels
            and http.capabilities.scoring_note is None
        )
        np.testing.assert_allclose(
            np.stack([s.logprobs for s in http.label_logprobs(letters, 2)]),
            np.stack([s.logprobs for s in backend.label_logprobs(letters, 2)]),
            atol=1e-4,
        )
        # An echo scores the whole prompt, the in-process path all but its last token: a different forward shape, whose
        # float32 rounding reaches 4.6e-6 of a -32.47 total (1.5e-4) with transformers 5.24; hence the relative bound.
        np.testing.assert_allclose(
            http.continuation_logprobs(numbers, 2), backend.continuation_logprobs(numbers, 2), atol=1e-4, rtol=1e-5
        )
    finally:
        http.close()


@pytest.mark.parametrize(
    ("scenario", "reason"),
    [("no-echo", "HTTP 400: echo is not supported"), ("short-echo", "echo returned 1 prompt log-probabilities")],
)
def test_a_server_that_scores_no_prompt_is_found_when_the_backend_opens(
    faults: str, scenario: str, reason: str
) -> None:
    http = _backend(f"{faults}/{scenario}/v1", mode="completions", tokenizer=MODEL)
    try:
        assert (
            not http.supports(CONTINUATION_LOGPROBS)
            and not http.capabilities.exact_labels
            and reason in http.capabilities.scoring_note
        )
        with pytest.raises(
            DateEvalError, match="option label 'B' is not among .* does not return prompt log-probabilities"
        ):
            http.label_logprobs([LabelRequest("Answer:", (Label("A", 1), Label("B", 2)))], 1)
    finally:
        http.close()


def test_without_echo_generated_answers_are_stored_without_confidence_and_say_why(
    faults: str, data_dir: Path, tmp_path: Path
) -> None:
    """Accuracy still counts; the confidence is NaN with the reason in every row; next-token MCQA ends in one clear error."""
    common = (
        "--model",
        f"openai:{faults}/no-echo/v1#m",
        "--tokenizer",
        MODEL,
        "--limit",
        "2",
        "--data-dir",
        str(data_dir),
        "--dates",
        "2024-01-01",
    )
    for dataset in ("gsm8k", "arc_challenge_cot"):
        run = run_cli_process("run", *common, "--dataset", dataset, "--store", str(tmp_path / dataset))
        assert run.returncode == 0, run.stderr
        rows = _rows(tmp_path / dataset)
        assert len(rows) == 2 and rows["confidence"].isna().all() and rows["parsed"].notna().all(), dataset
        assert (
            rows["confidence_note"]
            .str.contains(
                "does not return prompt log-probabilities (echo: HTTP 400: echo is not supported)", regex=False
            )
            .all()
        )
        _assert_the_explorer_says_why(tmp_path / dataset, dataset)
    mcqa = run_cli_process(
        "run", *common, "--dataset", "arc_challenge", "--label-style", "label", "--store", str(tmp_path / "mcqa")
    )
    assert mcqa.returncode == 2 and "option label 'B' is not among" in mcqa.stderr and "Traceback" not in mcqa.stderr
    assert not list((tmp_path / "mcqa").rglob("*.parquet"))


def _assert_the_explorer_says_why(store: Path, dataset: str) -> None:
    """Every explorer page that reads the store shows, in an info box, why the entry has no confidence and no ECE."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.query_params["store"] = "mine"
    with pytest.MonkeyPatch.context() as patched:
        patched.setenv("DATEEVAL_STORE", str(store))
        at.switch_page("pages/overview.py").run()
    assert not at.exception, [e.message for e in at.exception]
    notes = [box.value for box in at.info if "no confidence and no ECE" in box.value]
    assert len(notes) == 1 and f"on {dataset}" in notes[0] and "echo is not supported" in notes[0], [
        box.value for box in at.info
    ]


def test_server_clock_rows_carry_the_request_date_and_repeat_identically(
    own_template: str, data_dir: Path, tmp_path: Path
) -> None:
    args = (
        "--model",
        f"openai:{own_template}#{MODEL}",
        "--api-mode",
        "server-clock",
        "--dataset",
        "arc_challenge",
        "--limit",
        "2",
        "--data-dir",
        str(data_dir),
        "--store",
        str(tmp_path / "store"),
    )
    first = run_cli_process("run", *args, "--repeat", "1")
    assert first.returncode == 0, first.stderr
    rows = _rows(tmp_path / "store")
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    assert (
        set(rows["date"]) == {today}
        and set(rows["date_mode"]) == {"default"}
        and set(rows["factor"]) == {"date", "repeat"}
    )
    assert rows["request_utc"].str.startswith(today).all() and rows["server_date"].str.startswith(today).all()
    assert set(rows["system_prompt"]) == {""} and rows["date_text"].isna().all()
    by_run = rows.pivot_table(index="item_id", columns="factor", values="confidence")
    np.testing.assert_array_equal(by_run["date"], by_run["repeat"])  # the paper's check: identical at a fixed date
    again = run_cli_process(
        "run", *args, "--repeat", "1"
    )  # a second run on the same day resumes: nothing is asked again
    assert again.returncode == 0 and "0 item-dates" in again.stdout
    refused = run_cli_process("run", *args, "--dates", "2024-01-01")
    assert refused.returncode == 2 and "server-clock mode sends no date of ours" in refused.stderr


def test_injecting_provider_server_clock_rows_and_probe(injecting: str, data_dir: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    run = run_cli_process(
        "run",
        "--model",
        f"openai:{injecting}#{MODEL}",
        "--api-mode",
        "server-clock",
        "--dataset",
        "arc_challenge_cot",
        "--max-new-tokens",
        "4",
        "--limit",
        "2",
        "--data-dir",
        str(data_dir),
        "--store",
        str(store),
    )
    assert run.returncode == 0, run.stderr
    rows = _rows(store)
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    assert (
        set(rows["date"]) == {today}
        and rows["request_utc"].str.startswith(today).all()
        and rows["api_completion_tokens"].notna().all()
    )
    probe = run_cli_process("probe", "--model", f"openai:{injecting}#{MODEL}", "--json", "--request-timeout", "600")
    assert probe.returncode == 0, probe.stderr
    report = json.loads(probe.stdout)
    assert report["injects"] == "yes" and report["matches_today"] is True and report["format"] == "%Y-%m-%d", (
        probe.stdout
    )


def test_probe_reports_a_template_without_a_date_as_not_injecting(own_template: str) -> None:
    probe = run_cli_process("probe", "--model", f"openai:{own_template}#{MODEL}", "--request-timeout", "600")
    assert probe.returncode == 0, probe.stderr
    assert "does NOT inject the date" in probe.stdout and f"{CONTROL_DATE:%d %b %Y}" in probe.stdout


def test_a_server_clock_run_is_filed_under_the_servers_day(other_clock: str, data_dir: Path, tmp_path: Path) -> None:
    """This machine's clock says today; the server's says 2026-11-30: the rows carry the server's day, and the run says so."""
    run = run_cli_process(
        "run",
        "--model",
        f"openai:{other_clock}/v1#m",
        "--api-mode",
        "server-clock",
        "--dataset",
        "arc_challenge",
        "--limit",
        "2",
        "--data-dir",
        str(data_dir),
        "--store",
        str(tmp_path / "store"),
    )
    assert run.returncode == 0, run.stderr
    assert "dateeval: warning: the server's clock reads 2026-11-30 12:00 UTC" in run.stderr
    rows = _rows(tmp_path / "store")
    assert set(rows["date"].astype(str)) == {"2026-11-30"} and rows["server_date"].str.startswith("2026-11-30").all()
