"""`lustre.lov` values built from Lustre's own struct definitions, for the layout tests.

The layouts follow `lustre/include/uapi/linux/lustre/lustre_user.h` (lov_user_md_v1/v3,
lov_user_ost_data_v1, lov_comp_md_v1, lov_comp_md_entry_v1), packed little-endian as the
MDT stores them and `getfattr -n lustre.lov` returns them. They are written here with
`struct`, independently of the C decoder they test.
"""

from __future__ import annotations

import struct

LOV_MAGIC_V1 = 0x0BD10BD0
LOV_MAGIC_V3 = 0x0BD30BD0
LOV_MAGIC_COMP_V1 = 0x0BD60BD0
LOV_PATTERN_RAID0 = 0x001
LOV_PATTERN_MDT = 0x100
LOV_PATTERN_F_RELEASED = 0x80000000
LCME_FL_INIT = 0x10
LUSTRE_EOF = 0xFFFF_FFFF_FFFF_FFFF


def ost_data(idx: int, oid: int = 0x1234, seq: int = 0x100000400, gen: int = 0) -> bytes:
    """lov_user_ost_data_v1: ost_id (u64 id, u64 seq), u32 l_ost_gen, u32 l_ost_idx."""
    return struct.pack("<QQII", oid + idx, seq + idx, gen, idx)


def v1(
    osts: list[int],
    stripe_size: int = 1 << 20,
    stripe_count: int | None = None,
    pattern: int = LOV_PATTERN_RAID0,
) -> bytes:
    """lov_user_md_v1: magic, pattern, ost_id, stripe_size, u16 stripe_count, u16 gen."""
    count = len(osts) if stripe_count is None else stripe_count
    head = struct.pack("<IIQQIHH", LOV_MAGIC_V1, pattern, 0x2000013A1, 0x5, stripe_size, count, 0)
    assert len(head) == 32
    return head + b"".join(ost_data(i) for i in osts)


def v3(osts: list[int], stripe_size: int = 4 << 20, pool: str = "flash") -> bytes:
    """lov_user_md_v3: the v1 header, then char lmm_pool_name[16]."""
    head = struct.pack("<IIQQIHH", LOV_MAGIC_V3, LOV_PATTERN_RAID0, 7, 0, stripe_size, len(osts), 0)
    name = pool.encode().ljust(16, b"\0")
    assert len(head + name) == 48
    return head + name + b"".join(ost_data(i) for i in osts)


def composite(components: list[tuple[int, int, int, bytes]], mirrors: int = 0) -> bytes:
    """lov_comp_md_v1 with (flags, extent start, extent end, v1/v3 blob) components."""
    header_size, entry_size = 32, 48
    offset = header_size + entry_size * len(components)
    entries, blobs = b"", b""
    for k, (flags, start, end, blob) in enumerate(components):
        entries += struct.pack(
            "<IIQQIIIQI", k + 1, flags, start, end, offset + len(blobs), len(blob), 0, 0, 0
        )
        blobs += blob
    total = offset + len(blobs)
    head = struct.pack(
        "<IIIHHHHHHQ", LOV_MAGIC_COMP_V1, total, 3, 0, len(components), mirrors, 0, 0, 0, 0
    )
    assert len(head) == header_size and len(entries) == entry_size * len(components)
    return head + entries + blobs


def pfl(grown: bool) -> bytes:
    """A 3-component PFL file: [0, 1M) on 1 OST, [1M, 64M) on 4, [64M, EOF) on 8.

    `grown=False` is how it looks right after creation (only the first component has
    objects), `grown=True` after a write reached every component.
    """
    later = LCME_FL_INIT if grown else 0
    return composite(
        [
            (LCME_FL_INIT, 0, 1 << 20, v1([7], stripe_size=1 << 20)),
            (later, 1 << 20, 64 << 20, v1([0, 1, 2, 3] if grown else [], 1 << 20, 4)),
            (later, 64 << 20, LUSTRE_EOF, v3(list(range(8, 16)) if grown else [], 4 << 20)),
        ]
    )


def dom() -> bytes:
    """Data-on-MDT: [0, 1M) on the MDT, then [1M, EOF) on 2 OSTs (instantiated)."""
    return composite(
        [
            (LCME_FL_INIT, 0, 1 << 20, v1([], 1 << 20, 0, pattern=LOV_PATTERN_MDT)),
            (LCME_FL_INIT, 1 << 20, LUSTRE_EOF, v1([5, 6], 2 << 20)),
        ]
    )
