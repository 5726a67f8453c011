"""A minimal OpenAI-compatible endpoint over the in-process model: ``python -m dateeval serve``.

Why it exists: the HTTP backend must be tested against a real server,
offline, and researchers want a local endpoint whose chat template *they*
choose. Served with a template that writes ``strftime_now`` into the system
message (GPT-OSS), it behaves like an API provider that injects today's date
server-side (paper App. B); served with the model's own template, it injects
nothing. Everything is computed by :class:`TransformersBackend`, so the
numbers are the in-process backend's numbers.

Endpoints: ``GET /v1/models``, ``POST /v1/completions`` (a text or token-id
prompt; top-k ``logprobs`` of the next token; ``echo`` with ``max_tokens`` 0
or 1 scores the prompt's own tokens, as vLLM does, which is how clients read
the exact log-probability of any continuation), ``POST /v1/chat/completions``
(the server's chat template, rendered with the real clock;
``logprobs``/``top_logprobs``).
This module is HTTP and the OpenAI protocol only: requests in flight go
to the model's scheduler (``serve.queue``: one thread runs the
model, and the requests that queue while a batch computes share the next
one's forward passes), and the standard library's threading server keeps
connections concurrent. A request waits at most ``Served.wait_s`` to start
(then 503, which clients retry), and is refused (400) before any compute
when its prompt and reply would not fit the model's context
(:data:`UNSTATED_CONTEXT` tokens for a model that states none) or it asks
for more than the server bounds (stop strings, echo positions): a request's
memory is bounded by its batch's token budget, never by what it asks.

A client that hangs up stops its work at the next point where it can: a
queued request within the queue's ``POLL_S``, a generated reply at the next decoding
step (its batch-mates' replies go on exactly as they would have), a batch
whose clients all left at the next of its forward pass's
checkpoints (``backends.interrupt``: each part of each layer). That is within a second
inside the longest passes too: at the bounds at most 0.86 s on a quiet 2-core
machine (a whole pass, what a departure used to cost, 35 s;
``docs/benchmarks.md``); a loaded machine stretches it by its load.

The server's memory is bounded whatever the requests:

    model + largest pass + 29 x BODY_BUDGET + MAX_CONNECTIONS x (thread + 29 x SMALL_BODY + context x 36 B)

the model, loaded and warmed by a first request; the largest batch's forward
pass within the token budgets (a prompt filling the context, or an echo of
:data:`MAX_ECHO_POSITIONS` tokens, whose full-vocabulary log-probabilities only
the model thread holds, one batch at a time); the request bodies held at once
(:class:`BodyBudget`), each byte with, at worst, 28 bytes of parsed JSON (a
list of empty lists; 3 for text); and per connection served (:class:`Server`)
a thread, a body's first :data:`SMALL_BODY` bytes (read before the budget is
asked, so that small requests never wait behind large ones) with their JSON,
and a prompt's token ids. The bound for SmolLM2-135M and the peak that
``bench/serve_hostile.py``'s hostile set reaches are in ``docs/benchmarks.md``.

What the server does not do (streaming, several choices) is refused
rather than answered differently. Every refusal, down to a malformed request
line, is a JSON error body, and a refused body is read to its end or the
connection closed, so that a keep-alive client's next request is read as a
request. Every response carries the HTTP ``Date`` header, as providers' do.
"""

from dateeval.data.limits import MAX_STOP_CHARS
from dateeval.serve.fields import RequestError
from dateeval.serve.protocol import MAX_ECHO_POSITIONS, UNSTATED_CONTEXT, WAIT_S, Served, load
from dateeval.serve.bodies import BODY_BUDGET, MAX_BODY, SMALL_BODY, BodyBudget
from dateeval.serve.transport import Client, Server, banner, make_server

__all__ = [
    "BODY_BUDGET",
    "MAX_BODY",
    "MAX_ECHO_POSITIONS",
    "MAX_STOP_CHARS",
    "SMALL_BODY",
    "UNSTATED_CONTEXT",
    "WAIT_S",
    "BodyBudget",
    "Client",
    "RequestError",
    "Served",
    "Server",
    "banner",
    "load",
    "make_server",
]
