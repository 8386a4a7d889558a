"""A directory of damaged Darshan logs, to import in one batch (issue 19).

    .venv/bin/python bench/darshan/crash_corpus.py OUT [--count 765] [--seed 19]
    .venv/bin/python -m iolens import darshan OUT --db /tmp/corpus.duckdb --json --no-dxt

Each log is a real one (PyDarshan's examples and ../shared/data/darshan-logs, under 200 kB)
truncated, with bytes flipped in its header or anywhere, or with a run of bytes zeroed;
PyDarshan's examples are added untouched (`good-*`), so the batch shows both that every
damaged log costs only itself and that the good ones still import. Some of the damaged
logs make libdarshan-util abort or segfault: in-process they ended the whole import.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

import darshan

EXAMPLES = Path(darshan.__file__).parent / "examples" / "example_logs"
SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "darshan-logs"


def damaged(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """One damaged copy of a log and how it was damaged."""
    n, b = len(data), bytearray(data)
    kind = rng.choice(["trunc", "flip_head", "flip_any", "flip_many", "zero"])
    if kind == "trunc":
        return kind, bytes(b[: rng.randrange(1, n)])
    if kind == "flip_head":
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(0, min(n, 512))] ^= 1 << rng.randrange(8)
    elif kind in ("flip_any", "flip_many"):
        for _ in range(rng.randint(1, 4) if kind == "flip_any" else rng.randint(5, 40)):
            b[rng.randrange(0, n)] = rng.randrange(256)
    else:
        i = rng.randrange(0, n)
        j = min(n, i + rng.randint(1, 200))
        b[i:j] = bytes(j - i)
    return kind, bytes(b)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--count", type=int, default=765)
    ap.add_argument("--seed", type=int, default=19)
    args = ap.parse_args()
    sources = sorted(EXAMPLES.glob("*.darshan")) + sorted(SHARED.rglob("*.darshan"))
    sources = [s for s in sources if s.stat().st_size < 200_000]
    rng = random.Random(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    for k in range(args.count):
        kind, data = damaged(rng.choice(sources).read_bytes(), rng)
        (args.out / f"m{k:03d}-{kind}.darshan").write_bytes(data)
    for s in sorted(EXAMPLES.glob("*.darshan")):
        (args.out / f"good-{s.name}").write_bytes(s.read_bytes())
    good = len(list(EXAMPLES.glob("*.darshan")))
    print(f"{args.count} damaged and {good} good logs in {args.out}")


if __name__ == "__main__":
    main()
