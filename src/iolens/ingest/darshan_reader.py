"""Read `.darshan` files through libdarshan-util (PyDarshan's cffi handle), record by record.

PyDarshan's `DarshanReport` turns DXT into pandas frames (gigabytes on large logs) and its
backend helpers treat a failed read as "no more records", so a truncated log silently looks
smaller. Here every call's return code is checked, fixed-size records are copied straight
into one numpy block per module, and DXT is handed out one file record at a time as a
zero-copy view of the library's buffer, so the importer can merge and store it in chunks.

libdarshan-util is C: a truncated log makes it read past its regions, and a failed read
can leave its handle in a state where closing it double-frees. So after the header is
parsed (by the library, which knows every format version and byte order), the region map
is checked against the file size before any region is touched, and a handle that saw a
read error is never closed (a small leak instead of a crash of the whole batch).

What it hands out is in `darshan_records`; regions are streamed by `darshan_region` and
DXT segments merged into runs by `darshan_merge`. Some damaged logs still crash the
library (a failed assertion, a double free): the importer therefore runs this reader in a
worker process (`darshan_decode`); `read_log` reads in the calling process.
"""

from __future__ import annotations

import os
import re
import struct
import sys
import tempfile
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from iolens.errors import InputError
from iolens.ingest.darshan_merge import dxt_frame, merged_records, tallied
from iolens.ingest.darshan_records import (
    AUTOPERF_MODULES,
    DXT_MODULES,
    FIXED_MODULES,
    MERGE_WINDOW,
    SEGMENT,
    Block,
    DxtRecord,
    Heatmap,
    backend,
    counter_names,
    fcounter_names,
    make_block,
)
from iolens.ingest.darshan_region import Region, dxt_segments
from iolens.model.darshan import DarshanJob

#: `struct dxt_file_record`: id, rank, shared_record, hostname[64], write/read counts.
_DXT_HEAD = struct.Struct("Q q q 64s q q")

# libdarshan-util's `struct darshan_fd_s` (darshan-logutils.h, 3.2-3.5): the parsed
# header it keeps. version[8], swap_flag, partial_flag, comp_type, job_map, name_map,
# mod_map[64], mod_ver[64]. Checked at run time against the header before it is trusted.
_FD_LAYOUT = struct.Struct("<8s i 4x Q i 4x QQ QQ")
_FD_MOD_MAPS = 64

#: POSIX fcounters libdarshan-util leaves in the log's byte order. When it converts a
#: record of POSIX module version < 4 (Darshan < 3.2) from a big-endian log, its swap loop
#: over the fcounters skips the indices of three *int* counters added in version 4
#: (`darshan-posix-logutils.c`: `i == POSIX_RENAME_SOURCES || ...` inside the fcounter
#: loop), so the fcounters at those indices (F_META_TIME, F_MAX_READ_TIME, F_MAX_WRITE_TIME)
#: arrive unswapped: a metadata time of 0.02 s reads as 8e-303. PyDarshan has the same
#: values. Every libdarshan-util up to 3.5 does this; `counters` swaps them back.
_POSIX_UNSWAPPED = ("POSIX_RENAME_SOURCES", "POSIX_RENAME_TARGETS", "POSIX_RENAMED_FROM")
_UNSWAPPED_UNTIL = (3, 5)


@contextmanager
def _c_stderr() -> Iterator[list[str]]:
    """Capture what C code writes to file descriptor 2 (libdarshan-util's messages)."""
    lines: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield lines
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            text = tmp.read().decode("utf-8", "replace")
            lines += [ln.strip() for ln in text.splitlines() if ln.strip()]


def _utc(sec: int, nsec: int = 0) -> datetime:
    return datetime.fromtimestamp(sec, UTC).replace(tzinfo=None) + timedelta(
        microseconds=nsec // 1000
    )


class DarshanLog:
    """An open Darshan log. Use as a context manager; errors are `InputError`s naming it."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.source = str(self.path)
        b = backend()
        self.ffi, self.lib = b.ffi, b.lib
        self._b = b
        self.handle: Any = None
        self._poisoned = False
        try:
            self.size = self.path.stat().st_size
        except FileNotFoundError:
            raise InputError(self.source, "no such file") from None
        except OSError as exc:
            raise InputError(self.source, exc.strerror or str(exc)) from None
        if not self.path.is_file():
            raise InputError(self.source, "not a regular file")
        if self.size == 0:
            raise InputError(self.source, "empty file (0 bytes), not a Darshan log")
        with _c_stderr() as said:
            handle = self.lib.darshan_log_open(str(self.path).encode())
        if handle == self.ffi.NULL:
            raise InputError(self.source, f"not a readable Darshan log{_why(said)}")
        self.handle = handle
        try:
            self._check_regions()
            with _c_stderr() as said:
                self.job = self._job(said)
                self.modules = self._modules()
        except BaseException:
            self.close()
            raise

    # -- lifecycle ----------------------------------------------------------------------
    def close(self) -> None:
        if self.handle is not None and not self._poisoned:
            self.lib.darshan_log_close(self.handle)
        self.handle = None

    def __enter__(self) -> DarshanLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _fail(self, what: str, said: list[str] | None = None) -> InputError:
        self._poisoned = True  # libdarshan-util may double-free on close after an error
        return InputError(self.source, f"corrupt Darshan log: {what}{_why(said or [])}")

    # -- header -------------------------------------------------------------------------
    def _check_regions(self) -> None:
        """Every region the header maps must lie inside the file (catches truncation).

        Keeps the module map, compression type and byte order for streaming DXT.
        """
        raw = bytes(self.ffi.buffer(self.ffi.cast("char *", self.handle), 64 + 16 * _FD_MOD_MAPS))
        version, swap, _partial, comp, job_off, job_len, name_off, name_len = (
            _FD_LAYOUT.unpack_from(raw)
        )
        self._maps: list[tuple[int, int]] | None = None
        self._swap = False
        if not re.fullmatch(rb"3\.\d\d", version.rstrip(b"\0")) or comp not in (0, 1, 2):
            return  # a libdarshan-util with another handle layout: trust it
        if job_off + job_len != name_off and name_len:  # layout sanity (regions are contiguous)
            return
        mods = [struct.unpack_from("<QQ", raw, 64 + 16 * i) for i in range(_FD_MOD_MAPS)]
        end = max(off + length for off, length in [(job_off, job_len), (name_off, name_len), *mods])
        if end > self.size:
            raise InputError(
                self.source,
                f"truncated Darshan log: {self.size} bytes, its header maps {end}",
            )
        self._maps, self._comp, self._swap = mods, comp, bool(swap)

    def _job(self, said: list[str]) -> dict[str, Any]:
        ffi, lib = self.ffi, self.lib
        rec = ffi.new("struct darshan_job *")
        if lib.darshan_log_get_job(self.handle, rec) < 0:
            raise self._fail("job record unreadable", said)
        runtime = ffi.new("double *")
        lib.darshan_log_get_job_runtime(self.handle, rec[0], runtime)
        exe = ffi.new("char[]", 4096)
        if lib.darshan_log_get_exe(self.handle, exe) < 0:
            raise self._fail("executable name unreadable", said)
        metadata: dict[str, str] = {}
        for line in ffi.string(rec.metadata).decode("utf-8", "replace").splitlines():
            key, sep, value = line.partition("=")
            if sep:
                metadata[key] = value
        mounts = ffi.new("struct darshan_mnt_info **")
        count = ffi.new("int *")
        if lib.darshan_log_get_mounts(self.handle, mounts, count) < 0:
            raise self._fail("mount table unreadable", said)
        mnt = [
            (
                ffi.string(mounts[0][i].mnt_path).decode("utf-8", "replace"),
                ffi.string(mounts[0][i].mnt_type).decode("utf-8", "replace"),
            )
            for i in range(count[0])
        ]
        if count[0]:
            lib.darshan_free(mounts[0])
        return {
            "uid": int(rec.uid),
            "start": _utc(rec.start_time_sec, rec.start_time_nsec),
            "end": _utc(rec.end_time_sec, rec.end_time_nsec),
            "nprocs": int(rec.nprocs),
            "jobid": int(rec.jobid),
            "run_time": float(runtime[0]),
            "log_version": ffi.string(ffi.cast("char *", self.handle), 8).decode(),
            "exe": ffi.string(exe).decode("utf-8", "replace"),
            "metadata": metadata,
            "mounts": mnt,
        }

    def _modules(self) -> dict[str, dict[str, Any]]:
        ffi = self.ffi
        mods = ffi.new("struct darshan_mod_info **")
        count = ffi.new("int *")
        self.lib.darshan_log_get_modules(self.handle, mods, count)
        out = {
            ffi.string(mods[0][i].name).decode(): {
                "idx": int(mods[0][i].idx),
                "version": int(mods[0][i].ver),
                "bytes": int(mods[0][i].len),
                "partial": bool(mods[0][i].partial_flag),
            }
            for i in range(count[0])
        }
        if count[0]:
            self.lib.darshan_free(mods[0])
        return out

    def names(self) -> dict[int, str]:
        """Record id -> name (file path; `heatmap:POSIX` and the like for other records)."""
        ffi, lib = self.ffi, self.lib
        recs = ffi.new("struct darshan_name_record **")
        count = ffi.new("int *")
        lib.darshan_log_get_name_records(self.handle, recs, count)  # void: no status
        if count[0] < 0 or (count[0] and recs[0] == ffi.NULL):
            raise self._fail("name records unreadable")
        out: dict[int, str] = {}
        for i in range(count[0]):
            out[int(recs[0][i].id)] = ffi.string(recs[0][i].name).decode("utf-8", "replace")
            lib.darshan_free(recs[0][i].name)
        if count[0]:
            lib.darshan_free(recs[0])
        return out

    # -- records ------------------------------------------------------------------------
    def _records(self, module: str) -> Iterator[Any]:
        """Raw record pointers of a module; each is freed when the next is asked for."""
        ffi, lib = self.ffi, self.lib
        idx = self.modules[module]["idx"]
        buf = ffi.new("void **")
        while True:
            r = lib.darshan_log_get_record(self.handle, idx, buf)
            if r < 0:
                raise self._fail(f"{module} record unreadable")
            if r == 0:
                return
            try:
                yield buf[0]
            finally:
                lib.darshan_free(buf[0])
                buf[0] = ffi.NULL

    def _struct(self, module: str) -> str | None:
        t = self._b.structdefs.get(module)
        return t[:-3] if t else None

    def counters(self, module: str) -> Block:
        """A fixed-size module's records, copied from the library's buffers into numpy."""
        ffi = self.ffi
        stype = self._struct(module)
        if stype is None:
            raise KeyError(module)
        fields = dict(ffi.typeof(stype).fields)
        nc = fields["counters"].type.length
        nf = fields["fcounters"].type.length if "fcounters" in fields else 0
        cnames = counter_names(module)[:nc]
        fnames = fcounter_names(module)[:nf]
        cnames += [f"{module}_COUNTER_{i}" for i in range(len(cnames), nc)]
        fnames += [f"{module}_F_COUNTER_{i}" for i in range(len(fnames), nf)]
        size = ffi.sizeof(stype)
        formats: list[Any] = ["<u8", "<i8", ("<i8", nc)]
        names, offsets = ["id", "rank", "counters"], [0, 8, fields["counters"].offset]
        if nf:
            names.append("fcounters")
            formats.append(("<f8", nf))
            offsets.append(fields["fcounters"].offset)
        dtype = np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": size})
        raw = b"".join(ffi.buffer(p, size)[:] for p in self._records(module))
        block = np.frombuffer(raw, dtype)
        fc = block["fcounters"] if nf else np.empty((len(block), 0))
        if module == "POSIX" and self._swap and self.modules[module]["version"] < 4:
            fc = self._swap_back(fc, cnames, fnames)
        return make_block(
            module, block["id"], block["rank"], block["counters"], fc, cnames, fnames,
            self.modules[module],
        )  # fmt: skip

    def _swap_back(self, fc: np.ndarray, cnames: list[str], fnames: list[str]) -> np.ndarray:
        """POSIX fcounters with `_POSIX_UNSWAPPED`'s indices byte-swapped (see there)."""
        lib = tuple(int(x) for x in re.findall(r"\d+", self._b.lib_version())[:2])
        idx = [cnames.index(n) for n in _POSIX_UNSWAPPED if n in cnames]
        if lib > _UNSWAPPED_UNTIL or not idx or max(idx) >= len(fnames):
            return fc
        fc = np.array(fc, np.float64)
        fc[:, idx] = fc[:, idx].byteswap()
        return fc

    def autoperf(self, module: str) -> tuple[Block, dict[str, Any]] | None:
        """APMPI / APXC: per-rank (per-node) records as counter blocks, and the header.

        Parsed here from the region: libdarshan-util tells the header from the other
        records with a process-wide `static first_rec`, so through it only the first
        AutoPerf log a process reads comes out right. APMPI's float blocks (per-call total
        time, sync time, globals) are concatenated in that order; APXC's placement fields
        (group, chassis, blade, node) lead its counters. None when PyDarshan does not
        know the module or the region map is unavailable.
        """
        ffi = self.ffi
        perf = f"struct darshan_{module.lower()}_perf_record"
        head = f"struct darshan_{module.lower()}_header_record"
        idx = self.modules[module]["idx"]
        try:
            fields = dict(ffi.typeof(perf).fields)
            hdt = _dtype(ffi, head, ">" if self._swap else "<")
            pdt = _dtype(ffi, perf, ">" if self._swap else "<")
        except ffi.error:
            return None  # PyDarshan built without this AutoPerf module
        if self._maps is None or not 0 <= idx < len(self._maps):
            return None
        off, length = self._maps[idx]
        stream = Region(self.path, off, length, self._comp, self.source, module)
        raw = stream.read(hdt.itemsize, allow_end=True)
        if raw is None:
            return None
        h = np.frombuffer(raw, hdt)[0]
        header = {n: _plain(h[n].item()) for n in hdt.names if n not in ("id", "rank")}
        rows = []
        while (raw := stream.read(pdt.itemsize, allow_end=True)) is not None:
            rows.append(raw)
        block = np.frombuffer(b"".join(rows), pdt)
        n = len(block)
        if module == "APMPI":
            ints = [("counters", counter_names(module))]
            floats = [
                ("fcounters", counter_names(module, True, "mpiop_totaltime_")),
                ("fsynccounters", counter_names(module, True, "mpiop_synctime_")),
                ("fglobalcounters", counter_names(module, True, "mpi_global_")),
            ]
        else:
            place = ("group", "chassis", "blade", "node")
            ints = [(k, [f"APXC_{k.upper()}"]) for k in place]
            ints.append(("counters", counter_names(module)))
            floats = []

        def cols(parts: list[tuple[str, list[str]]], dt: Any) -> tuple[np.ndarray, list[str]]:
            widths = [getattr(fields[k].type, "length", None) or 1 for k, _ in parts]
            arrays = [
                block[k].reshape(n, w).astype(dt) for (k, _), w in zip(parts, widths, strict=True)
            ]
            labels: list[str] = []
            for (key, known), w in zip(parts, widths, strict=True):
                extra = [f"{key.upper()}_{i}" for i in range(len(known), w)]
                labels += (known + extra)[:w]
            return (np.hstack(arrays) if arrays else np.empty((n, 0))), labels

        c, cnames = cols(ints, np.int64)
        f, fnames = cols(floats, np.float64)
        if "node_name" in fields:
            header["hosts"] = [
                h.split(b"\0", 1)[0].decode("utf-8", "replace") for h in block["node_name"]
            ]
        data = make_block(
            module, block["id"], block["rank"], c, f, cnames, fnames, self.modules[module]
        )
        return data, header

    def lustre(self) -> pd.DataFrame:
        """LUSTRE: one row per file: id, rank, stripe_size, stripe_count, osts (in order)."""
        ffi = self.ffi
        rows = []
        for p in self._records("LUSTRE"):
            rec = ffi.cast("struct darshan_lustre_record *", p)
            ncomp = int(rec.num_comps)
            if not 0 <= ncomp <= 4096:
                raise self._fail(f"LUSTRE record with {ncomp} components")
            osts: list[int] = []
            size = count = 0
            k = 0
            for i in range(ncomp):
                c = rec.comps[i].counters
                n = int(c[1])
                if not 0 <= n <= 65536:
                    raise self._fail(f"LUSTRE component with {n} stripes")
                if i == 0:
                    size, count = int(c[0]), n
                osts += [int(o) for o in ffi.unpack(rec.ost_ids + k, n) if int(o) not in osts]
                k += n
            rows.append((np.uint64(rec.base_rec.id), int(rec.base_rec.rank), size, count, osts))
        return pd.DataFrame(rows, columns=["id", "rank", "stripe_size", "stripe_count", "osts"])

    def heatmaps(self, names: dict[int, str]) -> list[Heatmap]:
        ffi = self.ffi
        out = []
        for p in self._records("HEATMAP"):
            rec = ffi.cast("struct darshan_heatmap_record *", p)
            nbins = int(rec.nbins)
            if not 0 <= nbins <= 1 << 20:
                raise self._fail(f"HEATMAP record with {nbins} bins")
            w = np.frombuffer(ffi.buffer(rec.write_bins, 8 * nbins), np.int64).copy()
            r = np.frombuffer(ffi.buffer(rec.read_bins, 8 * nbins), np.int64).copy()
            name = names.get(int(rec.base_rec.id), "heatmap:?")
            module = name.split(":", 1)[1] if name.startswith("heatmap:") else name
            out.append(Heatmap(module, int(rec.base_rec.rank), float(rec.bin_width_seconds), w, r))
        return out

    def dxt(self, module: str) -> Iterator[DxtRecord]:
        """DXT file records one at a time (`stream_dxt`); through libdarshan-util, one
        buffer per record, when the region map is unknown."""
        if self._maps is None or not 0 <= self.modules[module]["idx"] < len(self._maps):
            yield from self._dxt_whole(module)
            return
        yield from stream_dxt(self.path, self._maps, self._comp, self._swap, self.modules, module)

    def _dxt_whole(self, module: str) -> Iterator[DxtRecord]:
        """Fallback through libdarshan-util: one buffer per record."""
        ffi = self.ffi
        head = ffi.sizeof("struct dxt_file_record")
        for p in self._records(module):
            rec = ffi.cast("struct dxt_file_record *", p)
            w, r = int(rec.write_count), int(rec.read_count)
            if w < 0 or r < 0:
                raise self._fail(f"{module} record with {w} writes, {r} reads")
            segs = np.frombuffer(
                ffi.buffer(ffi.cast("char *", p) + head, (w + r) * SEGMENT.itemsize), SEGMENT
            )
            out = DxtRecord(
                module,
                int(rec.base_rec.id),
                int(rec.base_rec.rank),
                ffi.string(rec.hostname).decode("utf-8", "replace"),
                w,
                r,
            )
            writes, reads = segs[:w], segs[w:]
            out._source = iter(
                [
                    ("write", (writes[a : a + MERGE_WINDOW] for a in range(0, w, MERGE_WINDOW))),
                    ("read", (reads[a : a + MERGE_WINDOW] for a in range(0, r, MERGE_WINDOW))),
                ]
            )
            yield out

    # -- the whole log ------------------------------------------------------------------
    def header_job(self) -> DarshanJob:
        """The job header as a `DarshanJob` with no module data yet."""
        j = self.job
        meta = dict(j["metadata"])
        return DarshanJob(
            job_id=str(j["jobid"]),
            uid=j["uid"],
            exe=j["exe"],
            nprocs=j["nprocs"],
            start=j["start"],
            end=j["end"],
            run_time=j["run_time"],
            log_version=j["log_version"],
            lib_version=meta.pop("lib_ver", ""),
            metadata=meta,
            mounts=list(j["mounts"]),
            module_info={
                name: {"version": m["version"], "records": 0, "partial": m["partial"]}
                for name, m in self.modules.items()
            },
            path=str(self.path),
        )

    def read_static(self, job: DarshanJob, frames: bool = True) -> dict[str, Any]:
        """Fill `job` with everything but DXT; returns what has no `DarshanJob` field:
        `blocks` (module -> Block), `heatmaps`, `autoperf` headers and `hosts` (rank ->
        host name). `frames=False` leaves `job.modules` empty (no pandas work)."""
        job.names = self.names()
        extra: dict[str, Any] = {"blocks": {}, "heatmaps": [], "autoperf": {}, "hosts": {}}
        for name in self.modules:
            info = job.module_info[name]
            block: Block | None = None
            if name in FIXED_MODULES and self._struct(name):
                block = self.counters(name)
            elif name in AUTOPERF_MODULES:
                got = self.autoperf(name)
                if got is None:
                    info["records"] = None  # a layout this PyDarshan cannot read
                    continue
                block, header = got
                hosts = header.pop("hosts", [])
                extra["hosts"].update(
                    {int(r): h for r, h in zip(block.ranks.tolist(), hosts, strict=False)}
                )
                extra["autoperf"][name] = header
            elif name == "LUSTRE":
                job.lustre = self.lustre()
                info["records"] = len(job.lustre)
            elif name == "HEATMAP":
                extra["heatmaps"] = self.heatmaps(job.names)
                info["records"] = len(extra["heatmaps"])
            elif name not in DXT_MODULES:
                info["records"] = None  # a module iolens does not read (e.g. MDHIM)
            if block is not None:
                extra["blocks"][name] = block
                info["records"] = len(block)
                if frames:
                    job.modules[name] = block.data()
        return extra


def stream_dxt(
    path: Path,
    maps: list[tuple[int, int]],
    comp: int,
    swap: bool,
    modules: dict[str, dict[str, Any]],
    module: str,
) -> Iterator[DxtRecord]:
    """DXT file records one at a time, each handing out its segments in chunks of at
    most `MERGE_WINDOW` (`DxtRecord.ops`), which must be consumed before the next
    record is asked for. Memory stays bounded however many segments a record has:
    the module's region is decompressed here as a stream (libdarshan-util would
    return each record whole), and no libdarshan-util code runs (the importer calls
    this outside the worker that decoded the header)."""
    source = str(path)
    off, length = maps[modules[module]["idx"]]
    stream = Region(path, off, length, comp, source, module)
    order = ">" if swap else "<"
    head = struct.Struct(order + _DXT_HEAD.format)
    seg = SEGMENT.newbyteorder(order)
    # DXT_MPIIO before version 2 (Darshan < 3.2) did not record offsets; libdarshan-util
    # reports them as -1, and so do we
    no_offsets = module == "DXT_MPIIO" and modules[module]["version"] < 2
    while True:
        raw = stream.read(head.size, allow_end=True)
        if raw is None:
            return
        rid, rank, _shared, host, w, r = head.unpack(raw)
        if not (0 <= w < 1 << 40 and 0 <= r < 1 << 40):
            raise InputError(
                source, f"corrupt Darshan log: {module} record with {w} writes, {r} reads"
            )
        rec = DxtRecord(module, rid, rank, host.split(b"\0", 1)[0].decode("utf-8", "replace"), w, r)
        rec._source = dxt_segments(stream, seg, w, r, no_offsets)
        yield rec
        for _op, windows in rec._source:  # drain what the caller did not read
            for _ in windows:
                pass


_C_TYPES = {"int64_t": "i8", "uint64_t": "u8", "uint32_t": "u4", "int32_t": "i4",
             "double": "f8"}  # fmt: skip


def _dtype(ffi: Any, ctype: str, order: str) -> np.dtype:
    """A numpy dtype with the layout of a C struct PyDarshan declares (base_rec flattened
    into id and rank), so whole blocks of records become arrays at once."""
    names, formats, offsets = ["id", "rank"], [order + "u8", order + "i8"], [0, 8]
    for name, fld in ffi.typeof(ctype).fields:
        if name == "base_rec":
            continue
        t = fld.type
        if t.kind == "array" and t.item.cname == "char":
            fmt: Any = f"S{t.length}"
        elif t.kind == "array":
            fmt = (order + _C_TYPES[t.item.cname], t.length)
        else:
            fmt = order + _C_TYPES[t.cname]
        names.append(name)
        formats.append(fmt)
        offsets.append(fld.offset)
    return np.dtype(
        {"names": names, "formats": formats, "offsets": offsets, "itemsize": ffi.sizeof(ctype)}
    )


def _why(said: list[str]) -> str:
    """libdarshan-util's first complaint, as a parenthesis for the error message."""
    msgs = [s.removeprefix("Error: ").rstrip(".") for s in said if s.startswith("Error")]
    return f" (libdarshan-util: {msgs[0]})" if msgs else ""


def _plain(v: Any) -> Any:
    return v if isinstance(v, int | float) else str(v)


def read_log(path: str | Path, *, dxt: bool = True) -> DarshanJob:
    """The whole log as a `DarshanJob` (DXT merged); an unreadable log raises `InputError`.

    Holds all merged DXT runs in memory: the importer streams them instead.
    """
    with DarshanLog(path) as log:
        job = log.header_job()
        log.read_static(job)
        if dxt:
            attach_dxt(job, log.modules, log.dxt)
        return job


def attach_dxt(
    job: DarshanJob, modules: Collection[str], records: Callable[[str], Iterator[DxtRecord]]
) -> None:
    """`job.dxt`: the merged runs of every DXT record `records(module)` hands out, for the
    DXT modules among `modules`, each module's record count noted in `job.module_info`."""
    parts: list[dict[str, Any]] = []
    for module in DXT_MODULES:
        if module in modules:
            parts += merged_records(tallied(records(module), job.module_info[module]))
    job.dxt = dxt_frame(parts)
