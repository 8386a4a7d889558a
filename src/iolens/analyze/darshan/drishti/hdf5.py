"""HDF5 advice that reaches HDF5 users (Drishti 0.8 tests `'HF5' in modules`, a typo that
is never true, so its alignment and collective-metadata advice never shows)."""

from __future__ import annotations

from iolens.analyze.darshan.drishti.common import MiB, modules
from iolens.model.darshan import DarshanJob

HDF5_SUFFIXES = (".h5", ".hdf5", ".he5", ".nc4")


def uses_hdf5(job: DarshanJob) -> bool:
    """The job goes through HDF5: Darshan's H5F/H5D modules, or a file named like HDF5."""
    if modules(job) & {"H5F", "H5D"}:
        return True
    return any(p.lower().endswith(HDF5_SUFFIXES) for p in job.names.values())


def alignment(stripe_size: int | None) -> str:
    """Align HDF5 objects of >= 1 MiB on stripe (or 4 MiB) boundaries."""
    a = stripe_size or 4 * MiB
    return (
        "HDF5: align objects on stripe boundaries: "
        f"`H5Pset_alignment(fapl, {MiB}, {a});` on the file access property list"
    )


def collective_metadata() -> str:
    return (
        "HDF5: make metadata operations collective: "
        "`H5Pset_all_coll_metadata_ops(fapl, 1); H5Pset_coll_metadata_write(fapl, 1);` "
        "and enlarge the metadata cache/block: `H5Pset_meta_block_size(fapl, 4194304);`"
    )


def mpio_collective() -> str:
    return (
        "HDF5: open through MPI-IO and transfer collectively: "
        "`H5Pset_fapl_mpio(fapl, comm, info);` and "
        "`H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE);` on the H5Dread/H5Dwrite transfer list"
    )


def async_vol(op: str) -> str:
    return (
        f"HDF5: overlap {op}s with computation through the async VOL connector "
        "(https://github.com/hpc-io/vol-async): "
        '`export HDF5_VOL_CONNECTOR="async under_vol=0;under_info={}"` and '
        f"`H5D{op}_async(..., es_id)` + `H5ESwait(es_id, H5ES_WAIT_FOREVER, ...)`"
    )


def no_fill() -> str:
    return (
        "HDF5/netCDF: skip fill values when every element is written: "
        "`H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);` / "
        "`nc_def_var_fill(ncid, varid, NC_NOFILL, NULL);`"
    )
