"""h5py_io.py - the h5py workload of tests/tracer/test_hdf5.py: the same I/O as hdf5_io.c
through h5py (whose wheel bundles its own libhdf5, loaded RTLD_LOCAL). Prints its byte
counts as JSON.
"""

import json
import sys

import h5py
import numpy as np

path, n = sys.argv[1], int(sys.argv[2])
a = np.arange(n, dtype=np.float64)
with h5py.File(path, "w") as f:
    d = f.create_dataset("d", data=a)
    d[: n // 2] = a[: n // 2]
with h5py.File(path, "r") as f:
    b = f["d"][...]
    c = f["d"][: n // 4]
assert (b == a).all() and (c == a[: n // 4]).all()
print(json.dumps({"written": a.nbytes + a[: n // 2].nbytes, "read": b.nbytes + c.nbytes}))
