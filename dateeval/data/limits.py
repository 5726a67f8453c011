"""What parsing a file, or rendering a template, may build: the bounds checked before the document or text is built.

A few KB can describe gigabytes: a YAML "billion laughs" (anchors of anchors),
a run-length encoded Parquet column, a gzip of blank lines, a sparse file. A
file's size on disk says nothing about what parsing it builds, so each parser
counts what it is about to build (nodes, rows, cells, decompressed bytes)
against these bounds and stops with one line past them, in bounded memory
and seconds. Every bound is far above any real benchmark (MMLU's largest file
is 1.9 MB, 1,534 rows of 6 fields), and is named in its message.

A Jinja template (a model's chat template, an lm-eval task's ``doc_to_text``)
is code from whoever wrote it: Jinja's sandbox keeps it from the machine, not
from ``'a' * 10**10``, so ``dateeval.prompting.render_limits`` counts what a render does
and sizes each value before it is made, against the ``RENDER_`` bounds.
"""

from __future__ import annotations

MAX_TEXT_BYTES = 64 * 2**20  # a data file's bytes after decompression; the largest real benchmark file is 1.9 MB
MAX_SPEC_BYTES = 2**20  # a spec is a few dozen keys
MAX_ROWS = 250_000  # rows of one data file, lines of a text file (MMLU's test split is 14,042 rows in all)
MAX_CELLS = 2_000_000  # rows × fields of one data file: each cell is a Python object of ~100 bytes once built
MAX_ROW_CHARS = 4 * 2**20  # one JSONL line or CSV line: a long-context question is a few hundred KB
MAX_FIELDS = 1_000  # columns of one data file
YAML_MAX_NODES = 10_000  # a spec's YAML nodes, every alias counted as the nodes it expands to
YAML_MAX_DEPTH = 32  # nesting of a spec's YAML (a spec is three levels deep; lm-eval's task YAMLs at most 8)
# Characters of a YAML's values, every alias counted as the text it stands for: what an alias-free file of
# MAX_SPEC_BYTES could hold (lm-eval's task YAMLs hold at most 16,000; each later step, a hash, a copy, writes them out)
YAML_MAX_CHARS = MAX_SPEC_BYTES
TASK_YAML_MAX_FILES = 64  # an lm-eval task YAML and the files it includes: more is an include bomb, not a task
REGEX_SECONDS = 1.0  # CPU seconds of one grading regex of a spec on one reply; a sane pattern takes microseconds
RENDER_MAX_STEPS = (
    200_000  # loop iterations, calls and operations of one render: the shared chat templates take 8 to 23 per prompt
)
RENDER_MAX_SECONDS = 5.0  # wall seconds of one render
RENDER_MAX_CHARS = (
    2**23
)  # characters (or elements) of any value a render makes: 8.4M, a prompt beyond every model's context
# A render's allocation budget: this much, plus 16 times the size of what the template is given.
RENDER_BASE_ALLOCATION = 2**25
RENDER_ALLOCATION_PER_INPUT_CHAR = 16
RENDER_MAX_INT_BITS = 2**16  # an integer a render computes ('*', '**')
# What an lm-eval task file may make the harness build. lm-eval parses a rendered doc_to_choice ("[...]") as a Python
# literal at ~1 KB an element, so the text is bounded before it is parsed (real ones are a few hundred characters).
LMEVAL_MAX_LITERAL_CHARS = 2**16
LMEVAL_MAX_CHOICES = 1_000  # choices of one document, each scored: real tasks have 2 to 10
# Stop strings of a generation: transformers preprocesses each against the whole vocabulary before the first forward pass
# (4 x 64 characters: 0.7 s here, 4 x 1024: 2.3 s, one of 8,000: 1.47 GiB).
MAX_STOP_CHARS = 64
MAX_TASK_STOPS = 16  # a task's stop strings (lm-eval's tasks have at most 8)
RENDER_MAX_DEPTH = 100  # nesting of lists, dicts and namespaces walked when sizing a value


def mib(size: int) -> str:
    """A byte bound as a message names it."""
    return f"{size / 2**20:g} MiB"
