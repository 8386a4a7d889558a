"""A traced process's I/O loop for the reasoner tests, with its own log of what it did.

`workload.py DATA N SLOW_AT SLOW_N FIFO START_NS`: waits (sleeping) until wall time
START_NS so the job's processes run side by side, then makes N writes of 4096 and 4100
bytes in turn, 2 ms apart (the application's compute); two sizes and scattered offsets
keep the tracer's records one per call. The file is filled first, so the writes
overwrite cached pages instead of allocating them while all processes start at once.
Calls SLOW_AT..SLOW_AT+SLOW_N-1 go to FIFO, whose reader drains it slowly, so each
blocks in write(): a genuinely slow I/O call. SLOW_AT < 0: never slow. Prints one JSON
line per call: {i, target, offset, size, t0, t1} (wall ns).
"""

import fcntl
import json
import os
import sys
import time

data, fifo = sys.argv[1], sys.argv[5]
n, slow_at, slow_n, start_ns = (
    int(x) for x in (sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[6])
)
fd = os.open(data, os.O_WRONLY | os.O_CREAT, 0o644)
bufs = {4096: b"x" * 4096, 4100: b"y" * 4100}
os.pwrite(fd, b"\0" * (n * 8192 + 4100), 0)
time.sleep(max(0.0, (start_ns - time.time_ns()) / 1e9))
pipe = None
piped = 0  # bytes written to the FIFO: its fd's offset, as the tracer counts it
log = []
for i in range(n):
    size = 4096 if i % 2 == 0 else 4100
    slow = 0 <= slow_at <= i < slow_at + slow_n
    if slow and pipe is None:
        pipe = os.open(fifo, os.O_WRONLY)
        fcntl.fcntl(pipe, fcntl.F_SETPIPE_SZ, 4096)
    off = piped if slow else (i * 7919 % n) * 8192
    t0 = time.time_ns()
    if slow:
        piped += os.write(pipe, bufs[size])
    else:
        os.pwrite(fd, bufs[size], off)
    t1 = time.time_ns()
    time.sleep(0.002)
    log.append(
        {
            "i": i,
            "target": "fifo" if slow else "data",
            "offset": off,
            "size": size,
            "t0": t0,
            "t1": t1,
        }
    )
if pipe is not None:
    os.close(pipe)
os.close(fd)
print("\n".join(json.dumps(r) for r in log))
