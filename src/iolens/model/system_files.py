"""Files that are no part of a job's I/O: the standard streams, and system files.

A traced process touches more than its job's files: every program reads /usr/lib and
/etc, hwloc scans /sys and /proc (~900 metadata ops per MPI rank), the launcher reads
/usr/share/misc/pci.ids. Darshan leaves these out when it records (darshan-runtime
`darshan-config.c`, `darshan_path_exclusions`); iolens leaves them out of a traced job's
analysis, so both sources describe the same files, a file every process reads does not pass
for a file the ranks share, and no metadata finding fires on /sys.
"""

from __future__ import annotations

from iolens.model.ids import file_id

STREAMS = frozenset({"<STDIN>", "<STDOUT>", "<STDERR>"})
#: Their file ids, as every collector derives them from the path.
STREAM_IDS = frozenset(file_id(s) for s in STREAMS)
#: Darshan's default path exclusions: system files, pseudo-files and devices.
SYSTEM_PREFIXES = (
    "/etc/", "/dev/", "/usr/", "/bin/", "/boot/", "/lib/", "/opt/", "/sbin/", "/sys/",
    "/proc/", "/var/",
)  # fmt: skip


def system_file_sql(job: str = "job_id", file: str = "file_id") -> str:
    """SQL true for a record of a traced job on a system file. Jobs with Darshan logs
    have none: Darshan applied the site's exclusions when it recorded, and what it kept
    (a data file in /dev/shm, a burst buffer under /var/opt) the site chose to record."""
    like = " OR ".join(f"path LIKE '{p}%'" for p in SYSTEM_PREFIXES)
    return (
        f"({file} IN (SELECT file_id FROM files WHERE {like}) AND {job} NOT IN "
        "(SELECT DISTINCT job_id FROM darshan_logs WHERE job_id IS NOT NULL))"
    )
