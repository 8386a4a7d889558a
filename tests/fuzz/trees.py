"""Collect sources read trees of /proc- and /sys-like files: fuzz one file of a real tree.

A tree is copied once into a temporary directory; each input rewrites one of its files with
a mutated version (seeded by that file and its namesakes in the other trees) and restores
it afterwards, so a target costs one file write per input, not a tree copy."""

from __future__ import annotations

import contextlib
import math
import shutil
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from hypothesis import strategies as st

from iolens.collect.base import Reading
from tests.fuzz.harness import only_input_errors, scratch
from tests.fuzz.mutate import inputs


@dataclass(frozen=True)
class Edit:
    """Which file of which tree becomes what."""

    tree: int
    rel: str
    data: bytes

    def __repr__(self) -> str:  # hypothesis prints failing inputs with this
        return f"Edit(tree={self.tree}, rel={self.rel!r}, data={self.data!r})"


class Trees:
    """Private copies of some case trees (only files matching `keep` are fuzzed)."""

    def __init__(self, sources: Iterable[Path], keep: Callable[[str], bool] = lambda _: True):
        self.base = scratch("tree")
        self.roots: list[Path] = []
        self.files: list[tuple[int, str]] = []
        by_name: dict[str, list[bytes]] = defaultdict(list)
        for i, src in enumerate(s for s in sources if s.is_dir()):
            root = self.base / str(i)
            shutil.copytree(src, root, ignore=shutil.ignore_patterns("*.json", "*.md"))
            self.roots.append(root)
            for p in sorted(root.rglob("*")):
                rel = str(p.relative_to(root))
                if p.is_file() and keep(rel):
                    self.files.append((i, rel))
                    by_name[p.name].append(p.read_bytes()[:16384])
        self.seeds = dict(by_name)

    def edits(self) -> st.SearchStrategy[Edit]:
        @st.composite
        def edit(draw: st.DrawFn) -> Edit:
            tree, rel = draw(st.sampled_from(self.files))
            return Edit(tree, rel, draw(inputs(self.seeds[Path(rel).name])))

        return edit()

    @contextlib.contextmanager
    def applied(self, edit: Edit) -> Iterator[Path]:
        """Write the edit, yield the tree's root, put the file back."""
        path = self.roots[edit.tree] / edit.rel
        before = path.read_bytes()
        path.write_bytes(edit.data)
        try:
            yield self.roots[edit.tree]
        finally:
            path.write_bytes(before)


def collect_or_input_error(
    trees: Trees, edit: Edit, collect: Callable[[Path], Iterable[Reading]]
) -> list[Reading] | None:
    """The property for a source: readings with finite float values, or an InputError
    naming the file that was damaged."""
    with trees.applied(edit) as root:
        readings = only_input_errors(lambda: list(collect(root)), str(root / edit.rel))
    for r in readings or []:
        assert isinstance(r.value, float), r
        assert math.isfinite(r.value) and (r.per is None or math.isfinite(r.per)), r
    return readings
