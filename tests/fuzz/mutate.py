"""Hypothesis strategies that damage real captures the way hostile or broken input does.

A target starts from real text (the parser's golden cases, collect trees, `../shared/data`)
and applies a few edits: lines deleted, duplicated, swapped or spliced in from another
capture, numbers replaced by hostile ones (huge, negative, `'²'`, `'٣'`, fullwidth, 5,000
digits), NULs, non-UTF-8 bytes, truncation. Mutating real files reaches deep parser states
that random bytes almost never do; `st.binary()` is mixed in for everything else.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from hypothesis import strategies as st

#: Numbers a parser may meet in a hostile or broken file.
HOSTILE_NUMBERS = (
    "\u00b2",  # superscript two: str.isdigit() is True, int() refuses it
    "\u0663",  # Arabic-Indic three: int() reads it as 3
    "\u0661\u0662\u0663",
    "\uff11\uff12",  # fullwidth digits
    "\U0001d7d3",  # mathematical bold digit five
    "-1",
    "-0",
    "+5",
    "0x1f",
    "1_000",
    "1e400",
    "nan",
    "inf",
    "-inf",
    "18446744073709551615",  # u64 max
    "18446744073709551616",  # one more
    "9" * 40,
    "9" * 400,  # beyond float range
    "1" * 5000,  # beyond int()'s default 4,300-digit limit
    "0." + "0" * 50 + "1",
    "1.",
    ".5",
    "",
    " ",
)

#: Byte strings that are not UTF-8, or are awkward when they are.
HOSTILE_BYTES = (
    b"\x00",
    b"\x00" * 17,
    b"\xff\xfe",
    b"\xc3",
    b"\xed\xa0\x80",  # a UTF-8-encoded surrogate
    b"\xe2\x80\xa8",  # LINE SEPARATOR: str.splitlines() splits on it
    b"\x0b\x0c\x1c\x1d\x1e\x85",  # more characters splitlines() treats as line ends
    b"\r",
    b"\r\n",
    b"\t",
    b"[" * 50,
    b"]" * 3,
    b"{" * 20,
    b"\xef\xbb\xbf",  # BOM
)

_NUMBER = re.compile(rb"\d+(?:\.\d+)?")


def load(paths: Sequence[Path], limit: int = 64 * 1024) -> list[bytes]:
    """The first `limit` bytes of each existing file (seeds stay small so edits matter)."""
    return [p.read_bytes()[:limit] for p in paths if p.is_file()]


@st.composite
def mutated(draw: st.DrawFn, seeds: Sequence[bytes], max_edits: int = 6) -> bytes:
    """One seed with 0..`max_edits` line-level or byte-level edits."""
    lines = draw(st.sampled_from(seeds)).split(b"\n")
    for _ in range(draw(st.integers(0, max_edits))):
        edit = draw(st.integers(0, 9))
        i = draw(st.integers(0, max(0, len(lines) - 1)))
        if edit == 0 and len(lines) > 1:  # delete a line
            del lines[i]
        elif edit == 1:  # duplicate a line
            lines.insert(i, lines[i] if lines else b"")
        elif edit == 2 and len(lines) > 1:  # swap two lines
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif edit == 3:  # splice in a line of another seed
            other = draw(st.sampled_from(seeds)).split(b"\n")
            lines.insert(i, draw(st.sampled_from(other)))
        elif edit in (4, 5) and lines:  # a number becomes a hostile one
            numbers = list(_NUMBER.finditer(lines[i]))
            if numbers:
                m = draw(st.sampled_from(numbers))
                new = draw(st.sampled_from(HOSTILE_NUMBERS)).encode()
                lines[i] = lines[i][: m.start()] + new + lines[i][m.end() :]
        elif edit == 6 and lines:  # hostile bytes inside a line
            at = draw(st.integers(0, len(lines[i])))
            junk = draw(st.sampled_from(HOSTILE_BYTES) | st.binary(min_size=1, max_size=8))
            lines[i] = lines[i][:at] + junk + lines[i][at:]
        elif edit == 7 and lines:  # cut a line short
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
        elif edit == 8:  # a line of random printable text
            lines.insert(i, draw(st.text(max_size=40)).encode("utf-8", "surrogatepass"))
        elif edit == 9:  # truncate the whole file
            del lines[i + 1 :]
    return b"\n".join(lines)


def inputs(seeds: Sequence[bytes], max_random: int = 512) -> st.SearchStrategy[bytes]:
    """Mostly mutated seeds, sometimes random bytes."""
    if not seeds:
        return st.binary(max_size=max_random)
    return st.one_of(mutated(seeds), mutated(seeds), mutated(seeds), st.binary(max_size=max_random))


def as_text(data: bytes) -> str:
    """What the readers hand a parser: UTF-8 with undecodable bytes replaced."""
    return data.decode("utf-8", "replace")
