"""Which file holds a chat template, checked by name before anything is read, and a tokenizer config's template."""

from __future__ import annotations

import json
from pathlib import Path

from dateeval.errors import DateEvalError

# The files in a model folder that hold its chat template, in the order they are looked for.
TEMPLATE_FILES = ("chat_template.jinja", "tokenizer_config.json")


def check_template_name(filename: str) -> None:
    """Refuse, by its name alone, a file that cannot be a chat template (the app shows what it reads)."""
    if Path(filename).suffix != ".jinja" and Path(filename).name != "tokenizer_config.json":
        raise DateEvalError(
            f"{filename} is not a chat template: give a .jinja file, a tokenizer_config.json or a model folder"
        )


def template_file(path: Path) -> Path:
    """The chat-template file ``path`` names: itself (a .jinja or tokenizer_config.json) or the one in a model folder.

    Checked before anything is read, so that no other file on disk (a
    password file, a key) is ever opened, let alone displayed.
    """
    if path.is_dir():
        found = next((path / name for name in TEMPLATE_FILES if (path / name).is_file()), None)
        if found is None:
            raise DateEvalError(f"folder {path} holds no chat template ({' or '.join(TEMPLATE_FILES)})")
        return found
    check_template_name(str(path))
    if not path.is_file():
        raise DateEvalError(f"chat template {path} does not exist")
    return path


def tokenizer_config(text: str, filename: str) -> tuple[str, str, str]:
    """(template, BOS, EOS) of a tokenizer_config.json; named templates give their ``default``."""
    try:
        config = json.loads(text)
    except ValueError:
        raise DateEvalError(f"{filename} is not JSON") from None
    source = config.get("chat_template") if isinstance(config, dict) else None
    if isinstance(source, list):
        source = next(
            (entry.get("template") for entry in source if isinstance(entry, dict) and entry.get("name") == "default"),
            None,
        )
    if not isinstance(source, str) or not source:
        raise DateEvalError(f"{filename} has no chat_template")

    def token(value: object) -> str:  # a plain string, or an AddedToken written out as {"content": ...}
        return value.get("content", "") if isinstance(value, dict) else value if isinstance(value, str) else ""

    return source, token(config.get("bos_token")), token(config.get("eos_token"))
