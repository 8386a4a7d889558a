"""I/O phases of a job, found with a discrete wavelet transform (IOSI, as Beacon uses it).

A job's bandwidth series is bursty at the one-second scale (flush windows, lock-step ranks,
open/close spikes) but its I/O comes in a few sustained phases separated by computation.
Keeping only the Haar approximation coefficients at level L (block means over 2^L seconds)
removes the short-scale detail; thresholding that smooth curve against its own peak finds
where the job is doing I/O; gaps shorter than a block are bridged, and each phase is then
trimmed back to the first and last second with raw activity, so boundaries are exact to the
second rather than to the block.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pywt

from iolens.model.schema import JOB_PHASES

WAVELET = "haar"
LEVEL = 3  # approximation over 2^3 = 8 s blocks: flush windows and spikes smooth out
THRESHOLD = 0.02  # share of the smoothed peak above which a block counts as I/O
#: Share of a phase's peak per-second rate that counts as moving its volume: the stdout
#: lines, status reads and open/close/unlink calls at a phase's edges stay below it.
BUSY_SHARE = 0.001


@dataclass
class Phase:
    start: float  # epoch seconds
    end: float
    read_bytes: int
    write_bytes: int
    md_ops: int
    #: first to last second moving its volume (`busy_span`); None: the whole phase
    busy: float | None = None

    @property
    def duration(self) -> float:
        return self.end - self.start

    @property
    def busy_s(self) -> float:
        """The time its volume took, what earlier runs' phases are compared on."""
        return self.duration if self.busy is None else self.busy

    @property
    def nbytes(self) -> int:
        return self.read_bytes + self.write_bytes

    @property
    def bw(self) -> float:
        return self.nbytes / self.duration if self.duration > 0 else 0.0


def smooth(signal: np.ndarray, level: int = LEVEL) -> np.ndarray:
    """The signal rebuilt from its level-`level` approximation coefficients only."""
    n = len(signal)
    level = min(level, pywt.dwt_max_level(n, WAVELET)) if n > 1 else 0
    if level <= 0:
        return signal.astype(float)
    coeffs = pywt.wavedec(signal.astype(float), WAVELET, level=level, mode="periodization")
    coeffs = [coeffs[0]] + [np.zeros_like(c) for c in coeffs[1:]]
    return pywt.waverec(coeffs, WAVELET, mode="periodization")[:n]


def detect(
    origin: float,
    read: np.ndarray,
    write: np.ndarray,
    md: np.ndarray | None = None,
    bin_s: float = 1.0,
    level: int = LEVEL,
) -> list[Phase]:
    """Phases of per-bin read/write bytes (and metadata ops) starting at epoch `origin`.

    Metadata ops count as activity too (normalised to their own peak), so a metadata-only
    phase (create/stat/unlink storms) is a phase even though it moves few bytes.
    """
    n = len(read)
    if n == 0:
        return []
    md = np.zeros(n) if md is None else md
    data = read + write
    activity = np.zeros(n)
    for x in (data, md):
        if x.max() > 0:
            activity += x / x.max()
    if not activity.any():
        return []
    sm = smooth(activity, level)
    on = sm > THRESHOLD * sm.max()
    block = 2**level
    # Runs of smoothed activity, bridging gaps shorter than a block.
    idx = np.nonzero(on)[0]
    if len(idx) == 0:
        return []
    cut = np.nonzero(np.diff(idx) > block)[0] + 1
    runs = [(int(r[0]), int(r[-1]) + 1) for r in np.split(idx, cut)]
    raw = activity > 0
    phases: list[Phase] = []
    prev_end = 0
    for k, (a, b) in enumerate(runs):
        lo = max(prev_end, a - block)
        hi = min(n, b + block, runs[k + 1][0] if k + 1 < len(runs) else n)
        hit = np.nonzero(raw[lo:hi])[0]
        if len(hit) == 0:
            continue
        first, last = lo + int(hit[0]), lo + int(hit[-1]) + 1
        prev_end = last
        phases.append(
            Phase(
                start=origin + first * bin_s,
                end=origin + last * bin_s,
                read_bytes=int(np.rint(read[first:last].sum())),
                write_bytes=int(np.rint(write[first:last].sum())),
                md_ops=int(np.rint(md[first:last].sum())),
            )
        )
    return phases


def merge_within(found: list[Phase], spans: list[tuple[float, float]]) -> list[Phase]:
    """Join phases that lie in one open..close span of the job's processes.

    A heavily throttled phase can complete a request only every tens of seconds, which the
    smoothed bandwidth cannot tell from computation; its processes keep their files open
    throughout, so the spans of the I/O bursts settle it.
    """
    out: list[Phase] = []
    owner: list[int | None] = []
    for p in found:
        mid = next((k for k, (lo, hi) in enumerate(spans) if p.end > lo and p.start < hi), None)
        if out and mid is not None and owner[-1] == mid:
            q = out[-1]
            out[-1] = Phase(
                q.start,
                max(q.end, p.end),
                q.read_bytes + p.read_bytes,
                q.write_bytes + p.write_bytes,
                q.md_ops + p.md_ops,
            )
            continue
        out.append(p)
        owner.append(mid)
    return out


def widen(
    found: list[Phase],
    spans: list[tuple[float, float]],
    origin: float,
    read: np.ndarray,
    write: np.ndarray,
    md: np.ndarray,
) -> list[Phase]:
    """Each phase grown to the open..close span it lies in, trimmed to that span's first and
    last second of activity, its bytes and ops recounted.

    A phase throttled to a trickle keeps its files open while it completes a request now
    and then; the wavelet's 2 % threshold cuts that tail off, yet it is the same phase
    (its bytes, and the time it really took, belong to it)."""
    active = (read > 0) | (write > 0) | (md > 0)
    out = []
    for i, p in enumerate(found):
        span = next(((lo, hi) for lo, hi in spans if p.end > lo and p.start < hi), None)
        if span is None:
            out.append(p)
            continue
        lo = max(int(np.floor(span[0] - origin)), 0)
        hi = min(int(np.ceil(span[1] - origin)), len(active))
        # never into a neighbouring phase
        if i > 0:
            lo = max(lo, int(np.ceil(out[-1].end - origin)))
        if i + 1 < len(found):
            hi = min(hi, int(np.floor(found[i + 1].start - origin)))
        idx = np.flatnonzero(active[lo:hi]) + lo
        a = min(int(p.start - origin), int(idx[0])) if len(idx) else int(p.start - origin)
        b = max(int(p.end - origin), int(idx[-1]) + 1) if len(idx) else int(p.end - origin)
        out.append(
            Phase(
                origin + a,
                origin + b,
                int(read[a:b].sum()),
                int(write[a:b].sum()),
                int(md[a:b].sum()),
            )
        )
    return out


def busy_span(
    found: list[Phase], origin: float, read: np.ndarray, write: np.ndarray, md: np.ndarray
) -> list[Phase]:
    """Each phase with `busy` set: seconds from the first to the last second in which it
    moved at least BUSY_SHARE of its peak rate of its volume (bytes; metadata ops for a
    phase that moved none).

    A phase includes the opens, status reads and unlinks around its transfers; on a 10-s
    phase those edges add seconds that have nothing to do with how fast the volume went,
    and they would hide a 2x slowdown from the history comparison."""
    data = read + write
    out = []
    for p in found:
        a, b = max(int(p.start - origin), 0), min(int(np.ceil(p.end - origin)), len(data))
        x = data[a:b] if p.nbytes > 0 else md[a:b]
        hit = np.flatnonzero(x >= BUSY_SHARE * x.max()) if len(x) and x.max() > 0 else []
        busy = float(hit[-1] - hit[0] + 1) if len(hit) else None
        out.append(replace(p, busy=busy))
    return out


def _ts(second: float) -> datetime:
    return datetime.fromtimestamp(second, UTC).replace(tzinfo=None)


def phases_table(by_job: dict[str, list[Phase]], anomalous: dict[str, list[bool]]) -> pa.Table:
    rows = [
        {
            "job_id": job_id,
            "phase": i,
            "start": _ts(p.start),
            "end": _ts(p.end),
            "read_bytes": p.read_bytes,
            "write_bytes": p.write_bytes,
            "md_ops": p.md_ops,
            "bw": p.bw,
            "busy_s": p.busy,
            "anomalous": bool(anomalous.get(job_id, [False] * len(ps))[i]),
        }
        for job_id, ps in by_job.items()
        for i, p in enumerate(ps)
    ]
    return pa.Table.from_pylist(rows, schema=JOB_PHASES)
