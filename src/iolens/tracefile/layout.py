"""A file's Lustre layout as the tracer recorded it, and the OST names it stands for.

The tracer reads the `lustre.lov` extended attribute of every file it sees opened on
Lustre (tracer/src/core/layout.c) and writes the stripe size, stripe count and the OST
index of every instantiated stripe. Target names are `<fsname>-OST<index as %04x>`, as
Lustre prints them (`lustrefs-OST000a`); the fs name is that of the mount holding the
file (/proc/self/mountinfo on the traced node). Without it the indices stay indices:
a name guessed wrongly would attach the file to another file system's OSTs.
"""

from __future__ import annotations

from dataclasses import dataclass

from iolens.tracefile import format as fmt


def ost_name(fsname: str, index: int) -> str:
    """Lustre's name of OST `index` of file system `fsname` (`lustrefs-OST000a`)."""
    return f"{fsname}-OST{index:04x}"


@dataclass(frozen=True)
class Layout:
    """Stripe size and count, and the OSTs of every instantiated stripe of one file."""

    stripe_size: int  # bytes, of the first instantiated component with objects
    stripe_count: int  # that component's stripe count
    #: OST indices in component and stripe order (a PFL file lists each instantiated
    #: component's stripes; an OST can appear in several components)
    osts: tuple[int, ...]
    fsname: str  # the mount's Lustre fs name, "" when the tracer could not tell
    magic: int = fmt.LOV_MAGIC_V1  # the xattr's LOV magic (v1, v3, composite)
    flags: int = 0  # fmt.LOV_*
    components: int = 1

    @property
    def incomplete(self) -> bool:
        """Components not instantiated when last read: the file may use more OSTs."""
        return bool(self.flags & fmt.LOV_INCOMPLETE)

    @property
    def truncated(self) -> bool:
        return bool(self.flags & fmt.LOV_TRUNCATED)

    def ost_names(self) -> list[str] | None:
        """Each OST once, in first-use order, as Lustre names it; None without a fs name."""
        if not self.fsname:
            return None
        return [ost_name(self.fsname, i) for i in dict.fromkeys(self.osts)]
