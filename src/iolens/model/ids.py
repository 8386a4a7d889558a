"""Stable ids derived from names, and what a Lustre jobstats id says about who did the I/O.

`file_id`: every collector derives the same id for the same path.

`JobIdScheme`: Lustre tags each client request with a string built on the client from
`jobid_var` and `jobid_name` (Lustre's `lustre_get_jobid` / `jobid_interpret_string`), and
the servers' `job_stats` count per string. The string is a scheduler job only when the
client found one:

| client setting | job_stats ids |
|---|---|
| `jobid_var=SLURM_JOB_ID` | `12345`, array task `123_4` |
| `jobid_name=%j.%H`, `%j:%u:%H` | `12345.c001`, `12345:1003:c001`; `:1003:login1` |
| `jobid_var=procname_uid`; 2.13+ `jobid_name=%e.%u` | `find.1003`, `vim.0` |
| `jobid_name=%e:%u:%H`, `%e.%u.%H` | `vi:0:es-2-virt3-cosp`, `find.1003.login1` |

(`%e` executable, `%u` uid, `%g` gid, `%p` pid, `%h` host, `%H` host up to its first dot,
`%j` the job id from the environment, empty outside a job; ids are cut at 31 characters.)
A `find` on a login node therefore appears as a "job" named `find.1003`: taking it for one
would hide a metadata storm behind a fake job. `JobIdScheme.classify` says of a raw id
whether it is a scheduler job (and which `jobs.job_id`) or an untagged process (name, uid,
host).

The raw id is what the store keeps (`server_samples.job_id` is what Lustre printed); the
analyses classify when they read, so a site that fixes its formats re-reads its history
correctly and processes stay nameable.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

__all__ = ["DEFAULT_FORMATS", "JobIdScheme", "JobTag", "file_id"]


def file_id(path: str) -> int:
    """Signed 64-bit id of a file path (first 8 bytes of BLAKE2b, little-endian)."""
    digest = hashlib.blake2b(path.encode("utf-8", "surrogateescape"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


@dataclass(frozen=True)
class JobTag:
    """What one raw job_stats id stands for.

    `kind` is `job` (a scheduler job: `job_id` is its `jobs.job_id`) or `process` (I/O
    outside any job: `process`, `uid` and `host` when the id carries them). `format` names
    the rule that matched (`%e.%u`, a site format, or `opaque` for an id no rule explains,
    taken as a job the site tags in its own way)."""

    raw: str
    kind: Literal["job", "process"]
    format: str
    job_id: str | None = None
    process: str | None = None
    uid: int | None = None
    host: str | None = None
    detail: str | None = None  # the rest of a job id: Slurm step (`batch`) or host

    @property
    def is_job(self) -> bool:
        return self.kind == "job"

    def label(self) -> str:
        """Short human name: `job 12345`, `find (uid 1003) on login1`."""
        if self.is_job:
            return f"job {self.job_id}"
        who = self.process or "process"
        if self.uid is not None:
            who += f" (uid {self.uid})"
        return who + (f" on {self.host}" if self.host else "")


#: Lustre `jobid_name` formats tried after the site's, most specific first. A format with
#: `%j` names a job when `%j` is non-empty; one without `%j` names a process.
DEFAULT_FORMATS: tuple[str, ...] = (
    "%j",  # Slurm/PBS/LSF numeric id, array task 123_4
    "%j.%*",  # a job id with a suffix: Slurm step (12345.batch) or host (12345.c001)
    "%j:%u:%H",  # a site format with user and host; `:1003:login1` outside a job
    "%e:%u:%H",  # the same for processes without a job (DDN 2.14 captures)
    "%e.%u",  # procname_uid; Lustre 2.13+'s default jobid_name
    "%e.%u.%H",
    "%e_%u",  # the underscore spelling some sites and tools use for procname_uid
)

#: Scheduler job ids: digits, and Slurm array tasks `123_4` (as `sacct` prints them).
NUMERIC_JOB = r"\d+(?:_\d+)?"

#: What each `%x` of a format captures (`%j` is added per scheme). `%*` is not Lustre's:
#: any suffix, kept as the tag's `detail` (the `%j.%*` default).
_FIELDS = {
    "e": r"(?P<process>.+)",  # greedy: the uid is the last run of digits after it
    "u": r"(?P<uid>\d+)",
    "g": r"(?:\d+)",
    "p": r"(?:\d+)",
    "h": r"(?P<host>\S*)",  # may be cut short at 31 characters, even to nothing
    "H": r"(?P<host>[^.\s]*)",  # Lustre cuts it at the first dot
    "*": r"(?P<detail>.+)",
}


def _compile(fmt: str, job: str) -> re.Pattern[str]:
    """A regular expression matching exactly the ids `fmt` produces, `%j` being `job`."""
    out: list[str] = []
    seen: set[str] = set()
    i = 0
    while i < len(fmt):
        c = fmt[i]
        i += 1
        if c != "%" or i == len(fmt):
            if not c.isspace():  # Lustre copies other characters, dropping spaces
                out.append(re.escape(c))
            continue
        f = fmt[i]
        i += 1
        pattern = rf"(?P<job>(?:{job})?)" if f == "j" else _FIELDS.get(f)
        if pattern is None:
            continue  # Lustre drops unknown %x
        name = re.search(r"\?P<(\w+)>", pattern)
        if name and name[1] in seen:  # a field twice (%h and %H): only the first is kept
            pattern = re.sub(r"\?P<\w+>", "?:", pattern)
        elif name:
            seen.add(name[1])
        out.append(pattern)
    return re.compile("".join(out))


class JobIdScheme:
    """Classifies raw job_stats ids: the site's formats first, then `DEFAULT_FORMATS`.

    `formats` are the site's Lustre `jobid_name` values (`"%j.%H"`, `"SLURM_JOB%j"`);
    `job_pattern` is what its scheduler's job ids look like (default: digits and array
    tasks), so that under `%j.%H` a fallback `find.1003` is still a process and not job
    `find`. An id no format explains is `opaque`: a job tag the site sets some other way
    when `unknown_is_job` (the default: `jobid_var` names an environment variable, whose
    values are jobs), else an untagged process of unknown name.
    """

    def __init__(
        self,
        formats: Iterable[str] = (),
        *,
        job_pattern: str = NUMERIC_JOB,
        defaults: bool = True,
        unknown_is_job: bool = True,
    ) -> None:
        self.formats = tuple(formats)
        for fmt in self.formats:
            if not fmt.strip():
                raise ValueError("empty jobid_name format")
        try:
            re.compile(job_pattern)
        except re.error as exc:
            raise ValueError(f"job_pattern {job_pattern!r}: {exc}") from None
        self.job_pattern = job_pattern
        self.unknown_is_job = unknown_is_job
        names = [*self.formats, *(DEFAULT_FORMATS if defaults else ())]
        self._rules = [(fmt, _compile(fmt, job_pattern)) for fmt in names]
        self._job = re.compile(job_pattern)
        self._cache: dict[str, JobTag] = {}

    def classify(self, raw: str) -> JobTag:
        """The `JobTag` of one id (memoised: the same ids come back every sample)."""
        tag = self._cache.get(raw)
        if tag is None:
            tag = self._cache[raw] = self._classify(raw)
        return tag

    def _classify(self, raw: str) -> JobTag:
        for fmt, rx in self._rules:
            m = rx.fullmatch(raw)
            if m is None:
                continue
            g = m.groupdict()
            uid = int(g["uid"]) if g.get("uid") else None
            host = g.get("host") or None
            if g.get("job"):
                return JobTag(
                    raw, "job", fmt, job_id=g["job"], uid=uid, host=host, detail=g.get("detail")
                )
            process = g.get("process")
            if process is not None and self._job.fullmatch(process):
                continue  # `12345.0` is a job step, not a process named 12345
            return JobTag(raw, "process", fmt, process=process, uid=uid, host=host)
        if self.unknown_is_job:
            return JobTag(raw, "job", "opaque", job_id=raw)
        return JobTag(raw, "process", "opaque")

    def job_id(self, raw: str) -> str | None:
        """The scheduler job id behind a raw id; None for an untagged process."""
        tag = self.classify(raw)
        return tag.job_id if tag.is_job else None
