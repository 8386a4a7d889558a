"""Job ids as Lustre prints them: scheduler jobs vs processes outside any job.

The table holds every id found in the real job_stats captures (repository fixtures under
tests/cases/collect/ and, when present, ../shared/data), plus the forms Lustre's
`jobid_interpret_string` produces for the common settings. A new fixture whose ids are
not in the table fails `test_every_real_id_is_in_the_table`, so each gets a decision.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from iolens.model.ids import JobIdScheme
from iolens.parse.lustre_jobstats import parse_job_stats

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "cases" / "collect"
SHARED = ROOT.parents[1] / "shared" / "data"

# raw id -> (kind, job_id, process, uid, host)
J = "job"
P = "process"
TABLE: dict[str, tuple[str, str | None, str | None, int | None, str | None]] = {
    # Lustre 2.10 HPE capture (jobid_var=SLURM_JOB_ID: plain numbers)
    **{str(n): (J, str(n), None, None, None) for n in range(23, 58)},
    # DDN 2.14 MDT job_stats: jobid_name=%e:%u:%H, the host cut at 31 characters
    "vi:0:es-2-virt3-cosp": (P, None, "vi", 0, "es-2-virt3-cosp"),
    "bash:0:es-2-virt3-cosp": (P, None, "bash", 0, "es-2-virt3-cosp"),
    "fio:0:es-2-virt3-cosp": (P, None, "fio", 0, "es-2-virt3-cosp"),
    "df:0:es-2-virt3-cosp": (P, None, "df", 0, "es-2-virt3-cosp"),
    "ls:0:es-2-virt3-cosp": (P, None, "ls", 0, "es-2-virt3-cosp"),
    "mv:0:es-2-virt3-cosp": (P, None, "mv", 0, "es-2-virt3-cosp"),
    "node_exporter:989:es-2-virt3-co": (P, None, "node_exporter", 989, "es-2-virt3-co"),
    # DDN 2.14 OST job_stats: without the site's formats `SLURM_JOB10` reads as a process
    # name under %e:%u:%H, and the bare tag as an opaque job (see the site-format test)
    **{
        f"SLURM_JOB{n}:0:es18kxe-co-client": (P, None, f"SLURM_JOB{n}", 0, "es18kxe-co-client")
        for n in (10, 20, 29, 35, 51, 59, 79, 97)
    },
    **{f"SLURM_JOB{n}": (J, f"SLURM_JOB{n}", None, None, None) for n in (10, 20, 29, 35, 51)},
    **{f"SLURM_JOB{n}": (J, f"SLURM_JOB{n}", None, None, None) for n in (59, 79, 97)},
    # AWS FSx (datadog fixture): jobid_var=procname_uid
    "vim.0": (P, None, "vim", 0, None),
}

#: Forms the common settings produce (lustre_get_jobid, jobid_interpret_string).
FORMS = {
    "12345": (J, "12345", None, None, None),  # jobid_var=SLURM_JOB_ID
    "123_4": (J, "123_4", None, None, None),  # an array task, as sacct prints it
    "12345.batch": (J, "12345", None, None, None),  # a Slurm step
    "12345.c001": (J, "12345", None, None, None),  # %j.%H
    "12345:1003:c001": (J, "12345", None, 1003, "c001"),  # %j:%u:%H
    ":1003:login1": (P, None, None, 1003, "login1"),  # %j:%u:%H outside a job: %j empty
    "find.1003": (P, None, "find", 1003, None),  # procname_uid, 2.13+ default %e.%u
    "find_1003": (P, None, "find", 1003, None),  # underscore spelling
    "python3.11.1000": (P, None, "python3.11", 1000, None),  # dots in the process name
    "find.1003.login1": (P, None, "find", 1003, "login1"),  # %e.%u.%H
    "python3.11.1000.login1": (P, None, "python3.11", 1000, "login1"),
}


def real_ids() -> set[str]:
    """Every job id in the job_stats files of the fixtures and the shared captures."""
    files = [p for p in CASES.rglob("job_stats") if p.is_file()]
    if SHARED.is_dir():
        files += [p for p in SHARED.rglob("job_stats") if p.is_file()]
        files += [p for p in SHARED.rglob("*job*stats*.txt") if p.is_file()]
    ids: set[str] = set()
    for path in files:
        text = path.read_text()
        if "=\n" in text or "job_stats=" in text:  # lctl output: several documents
            for doc in re.split(r"^\S+\.job_stats=\n", text, flags=re.M):
                if doc.strip():
                    ids |= {j.job_id for j in parse_job_stats(doc, str(path))}
        else:
            ids |= {j.job_id for j in parse_job_stats(text, str(path))}
    return ids


def check(raw: str, want: tuple[str, str | None, str | None, int | None, str | None]) -> None:
    tag = JobIdScheme().classify(raw)
    assert (tag.kind, tag.job_id, tag.process, tag.uid, tag.host) == want, tag


@pytest.mark.parametrize(("raw", "want"), sorted({**TABLE, **FORMS}.items()))
def test_classify(raw: str, want: tuple) -> None:
    check(raw, want)


def test_every_real_id_is_in_the_table() -> None:
    ids = real_ids()
    assert len(ids) >= 20  # the repository's own fixtures alone hold these many
    assert ids <= set(TABLE), f"ids without a decision: {sorted(ids - set(TABLE))}"


def test_site_formats_come_first() -> None:
    """A site whose jobid_name is SLURM_JOB%j:%u:%H (the DDN OST capture) says so."""
    site = JobIdScheme(["SLURM_JOB%j:%u:%H", "SLURM_JOB%j"])
    tag = site.classify("SLURM_JOB10:0:es18kxe-co-client")
    assert (tag.kind, tag.job_id, tag.uid, tag.host) == ("job", "10", 0, "es18kxe-co-client")
    assert site.job_id("SLURM_JOB97") == "97"
    # processes still fall back to the defaults
    assert site.classify("vi:0:es-2-virt3-cosp").process == "vi"


def test_job_pattern_keeps_fallback_processes_out_of_jobs() -> None:
    """Under %j.%H, `find.1003` (a client in procname_uid mode) is not job `find`."""
    site = JobIdScheme(["%j.%H"])
    assert site.job_id("12345.c001") == "12345"
    assert site.classify("find.1003").process == "find"
    outside = site.classify(".login1")  # %j empty: a process outside any job on login1
    assert (outside.kind, outside.host, outside.process) == ("process", "login1", None)
    letters = JobIdScheme(["%j.%H"], job_pattern=r"[a-z]+\d+")
    assert letters.job_id("ab12.c001") == "ab12"


def test_unknown_ids() -> None:
    assert JobIdScheme().classify("login-tag").format == "opaque"
    assert JobIdScheme().job_id("login-tag") == "login-tag"
    strict = JobIdScheme(unknown_is_job=False)
    assert strict.classify("login-tag").kind == "process"
    assert strict.job_id("12345") == "12345"


def test_labels() -> None:
    assert JobIdScheme().classify("find.1003.login1").label() == "find (uid 1003) on login1"
    assert JobIdScheme().classify("12345").label() == "job 12345"


@pytest.mark.parametrize(("formats", "pattern"), [([" "], r"\d+"), ([], "(")])
def test_bad_configuration(formats: list[str], pattern: str) -> None:
    with pytest.raises(ValueError):
        JobIdScheme(formats, job_pattern=pattern)
