"""Typed TOML configuration files: one loader, one kind of error for every mistake.

The agent's config and the alert config both want the same behaviour: a missing file,
bad TOML or a field pydantic rejects becomes an `InputError` naming the file and the
field, never a traceback.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from iolens.errors import InputError

M = TypeVar("M", bound=BaseModel)


def load_toml(path: Path, model: type[M], what: str = "config file") -> M:
    """`path` parsed as TOML and validated by `model`; InputError naming file and field."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise InputError(str(path), f"no such {what}") from None
    return parse_toml(text, model, str(path))


def parse_toml(text: str, model: type[M], source: str) -> M:
    """TOML text validated by `model`; InputError naming `source` and the field."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(source, f"not valid TOML: {exc}") from None
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        msg = str(first["msg"]).removeprefix("Value error, ")
        raise InputError(source, f"{where}: {msg}" if where else msg) from None
