"""Root-cause rules, one per file, each with a stable code. Registered here, in code order."""

from iolens.analyze.findings.base import JobRule
from iolens.analyze.findings.iol001_n1_shared_file import N1SharedFile
from iolens.analyze.findings.iol002_single_ost_shared_file import SingleOstSharedFile
from iolens.analyze.findings.iol003_read_amplification import ReadAmplification
from iolens.analyze.findings.iol004_small_io import SmallIO
from iolens.analyze.findings.iol005_metadata_heavy import MetadataHeavy
from iolens.analyze.findings.iol006_slower_than_history import SlowerThanHistory
from iolens.analyze.findings.iol007_straggler_server import StragglerServer

JOB_RULES: tuple[type[JobRule], ...] = (
    N1SharedFile,
    SingleOstSharedFile,
    ReadAmplification,
    SmallIO,
    MetadataHeavy,
    SlowerThanHistory,
    StragglerServer,
)

__all__ = ["JOB_RULES", "JobRule"]
