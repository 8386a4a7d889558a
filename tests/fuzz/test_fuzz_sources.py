"""Every collect source's parse path, on damaged copies of the real trees it reads.

The property: readings with finite float values, or an InputError naming the damaged file
(the Lustre server sources swallow those per file, which is their own tested behaviour).
No ValueError, UnicodeDecodeError, OverflowError... out of an agent's round."""

from __future__ import annotations

from pathlib import Path

from hypothesis import example, given

from iolens.collect.sources.infiniband import InfinibandSource
from iolens.collect.sources.iofwd import IofwdSource
from iolens.collect.sources.lnet_router import LnetRouterSource
from iolens.collect.sources.lustre_client import LustreClientSource
from iolens.collect.sources.lustre_mds import LustreMdsSource
from iolens.collect.sources.lustre_oss import LustreOssSource
from iolens.collect.sources.node import NodeSource
from tests.fuzz.harness import fuzz
from tests.fuzz.seeds import CASES
from tests.fuzz.trees import Edit, Trees, collect_or_input_error


def _trees(kind: str, keep=lambda _: True) -> Trees:
    return Trees(sorted((CASES / "collect" / kind).iterdir()), keep)


NODE = _trees("node")
IB = _trees("infiniband")
LNET = _trees("lnet_router")
IOFWD = _trees("iofwd")
OSS = _trees("lustre_oss")
MDS = _trees("lustre_mds", keep=lambda rel: "/exports/" not in rel or rel.endswith("stats"))
CLIENT = _trees("lustre_client")


@given(NODE.edits())
@fuzz(200)
def test_node(edit: Edit) -> None:
    collect_or_input_error(NODE, edit, NodeSource("n1").collect)


@given(IB.edits())
@fuzz(200)
def test_infiniband_sysfs(edit: Edit) -> None:
    collect_or_input_error(IB, edit, InfinibandSource("n1").collect)


@given(LNET.edits())
@fuzz(150)
def test_lnet_router(edit: Edit) -> None:
    collect_or_input_error(LNET, edit, LnetRouterSource("r1").collect)


@given(IOFWD.edits())
@example(Edit(0, "run/iofwd/lwfs/threads_max", b"9" * 400))  # OverflowError in float()
@fuzz(200)
def test_iofwd(edit: Edit) -> None:
    collect_or_input_error(IOFWD, edit, IofwdSource("fwd1").collect)


@given(OSS.edits())
@example(Edit(0, "sys/fs/lustre/osd-ldiskfs/ai400x2-OST0000/filesfree", b"1" * 5000))
@fuzz(150)
def test_lustre_oss(edit: Edit) -> None:
    collect_or_input_error(OSS, edit, LustreOssSource("oss1").collect)


@given(MDS.edits())
@fuzz(150)
def test_lustre_mds(edit: Edit) -> None:
    collect_or_input_error(MDS, edit, LustreMdsSource("mds1").collect)


@given(CLIENT.edits())
@fuzz(150)
def test_lustre_client(edit: Edit) -> None:
    collect_or_input_error(CLIENT, edit, LustreClientSource("c1").collect)


def test_trees_are_there() -> None:
    """The targets above fuzz something: every family has files to damage."""
    for trees in (NODE, IB, LNET, IOFWD, OSS, MDS, CLIENT):
        assert trees.files and all(Path(r).is_dir() for r in trees.roots)
