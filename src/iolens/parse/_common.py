"""Small helpers shared by the parsers: numbers, timestamps and error positions."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from pathlib import Path

from iolens.errors import InputError

__all__ = [
    "DEFAULT_SOURCE",
    "MAX_SECONDS",
    "U64_MAX",
    "is_digits",
    "parse_int",
    "parse_seconds",
    "read_text",
    "shown",
    "source_name",
]

#: What errors name when the caller did not say where the text came from.
DEFAULT_SOURCE = "<string>"

_SECONDS = re.compile(r"^\d+(\.\d+)?$", re.ASCII)  # not '٣'

#: Lustre, LNet and InfiniBand counters are u64; a larger number is damage, and one past
#: 4,300 digits would make `int()` itself raise (issue 19, found by the fuzz suite).
U64_MAX = 2**64 - 1
_U64_DIGITS = len(str(U64_MAX))
#: The last second a nanosecond clock in an int64 can hold (year 2262): later is damage.
MAX_SECONDS = 2**63 / 1e9


def shown(token: str, width: int = 40) -> str:
    """`token` for an error message: repr, cut to `width` characters (a hostile file can
    hold a 5,000-digit "number", and an error must stay one readable line)."""
    return (
        repr(token) if len(token) <= width else repr(token[:width]) + f"... ({len(token):,} chars)"
    )


def is_digits(text: str) -> bool:
    """ASCII decimal digits only. `str.isdigit` also accepts '²' or '٣', which `int` then
    refuses (or reads as another number): a parser would crash on text it had checked."""
    return text.isascii() and text.isdigit()


def parse_int(token: str, source: str, line: int, what: str) -> int:
    """A non-negative decimal integer no larger than a u64 counter."""
    if not is_digits(token):
        raise InputError(
            source, f"{what}: expected a non-negative integer, got {shown(token)}", line
        )
    digits = token.lstrip("0") or "0"  # leading zeros count towards int()'s digit limit
    if len(digits) > _U64_DIGITS or int(digits) > U64_MAX:
        raise InputError(source, f"{what}: {shown(token)} is larger than a 64-bit counter", line)
    return int(digits)


def parse_seconds(token: str, source: str, line: int, what: str) -> float:
    """`<s>.<ns>` or `<s>.<us>` seconds as a float (Decimal first so `.05` is not misread)."""
    if not _SECONDS.match(token):
        raise InputError(source, f"{what}: expected seconds like 123.456, got {shown(token)}", line)
    try:
        seconds = float(Decimal(token))
    except InvalidOperation as exc:  # pragma: no cover - regex already guards
        raise InputError(source, f"{what}: bad number {token!r}", line) from exc
    if seconds > MAX_SECONDS:  # 400 digits read as inf (found by the fuzz suite, issue 19)
        raise InputError(source, f"{what}: {shown(token)} seconds is past any clock", line)
    return seconds


def source_name(path: str | Path) -> str:
    """The name errors use for a file."""
    return str(path)


def read_text(path: str | Path) -> str:
    """Read a capture as text; undecodable bytes are replaced, never fatal.

    `open` rather than `Path.read_text`: an agent reads ~100 files a round, and pathlib's
    object per file was a tenth of a compute node's round."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        return fh.read()


def counter_epoch(
    start_time: float | None, snapshot_time: float | None, elapsed_time: float | None
) -> float | None:
    """When a 2.14+ counter set started from zero (`start_time`, else snapshot - elapsed);
    a change between samples means the counters were reset."""
    if start_time is not None:
        return start_time
    if snapshot_time is not None and elapsed_time is not None:
        return snapshot_time - elapsed_time
    return None
