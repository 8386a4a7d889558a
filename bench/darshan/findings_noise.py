"""Noise of the Darshan diagnosis before and after causal chains, severity caps and merging
(issue 21): the figures of docs/findings.md ("Chains, severity and noise floor").

    .venv/bin/python bench/darshan/findings_noise.py [DIR ...]   # default: the shared logs

"before" is every rule's finding as the rule states it, log by log (`rule_findings`, what
the importer stored until now); "after" is `diagnose_job` over each job's logs. Per job:
findings, warning/critical ones, those on jobs moving under 10 MiB (data files, summed over
the job's logs), repeats (the same code more than once on a job), findings that recommend
(no root elsewhere in their chain) and collective-I/O advice on jobs >= 95 % collective.
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from pathlib import Path

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "darshan-logs"
MiB = 1 << 20


def main(roots: list[Path]) -> None:
    from iolens.analyze.darshan import diagnose_job, rule_findings
    from iolens.analyze.darshan.chains import COLLECTIVE_ADVICE, collective_share
    from iolens.analyze.darshan.severity import JobIO
    from iolens.errors import InputError
    from iolens.ingest.darshan_reader import read_log

    jobs: dict[str, list] = defaultdict(list)
    for root in roots:
        for p in sorted(root.rglob("*.darshan")) if root.is_dir() else [root]:
            try:
                j = read_log(p)
            except InputError:
                continue
            jobs[j.job_id].append(j)
    volume = {k: sum(JobIO.of(j).bytes for j in logs) for k, logs in jobs.items()}
    coll = {k: max((collective_share(j) or 0.0) for j in logs) for k, logs in jobs.items()}

    def tally(found: dict[str, list]) -> dict[str, int]:
        t: Counter[str] = Counter()
        for k, fs in found.items():
            codes = Counter(f.code for f in fs)
            urgent = [f for f in fs if f.severity in ("warning", "critical")]
            t["findings"] += len(fs)
            t["warning+critical"] += len(urgent)
            t["critical"] += sum(f.severity == "critical" for f in fs)
            t["w+c on jobs < 10 MiB"] += len(urgent) if volume[k] < 10 * MiB else 0
            t["repeats"] += sum(n - 1 for n in codes.values())
            t["recommending"] += sum(not (f.evidence.get("root_cause")) for f in fs)
            t["collective advice, >= 95 % collective"] += (
                sum(f.code in COLLECTIVE_ADVICE for f in fs) if coll[k] >= 0.95 else 0
            )
        return dict(t)

    before = tally({k: [f for j in logs for f in rule_findings(j)] for k, logs in jobs.items()})
    after = tally({k: diagnose_job(logs) for k, logs in jobs.items()})
    n_logs = sum(len(v) for v in jobs.values())
    small = sum(v < 10 * MiB for v in volume.values())
    print(f"{n_logs} logs, {len(jobs)} jobs ({small} moving < 10 MiB)")
    print(f"| {'figure':40} | before | after |")
    print(f"|{'-' * 42}|--------|-------|")
    for key in before:
        print(f"| {key:40} | {before[key]:6} | {after.get(key, 0):5} |")


if __name__ == "__main__":
    main([Path(a) for a in sys.argv[1:]] or [SHARED])
