"""A small real tmpfs for full-disk tests (root only; the test is skipped otherwise)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` (mount's syntax, e.g. "2m") mounted on `where`, unmounted after."""
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def resize(where: Path, size: str) -> None:
    """Give the tmpfs on `where` a new size: space returns to a full disk."""
    subprocess.run(["mount", "-o", f"remount,size={size}", str(where)], check=True)
