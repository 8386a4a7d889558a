"""Reads a FIFO 4 KiB at a time with a pause between reads (untraced): its writer's
write() calls block, as on a congested file system."""

import os
import sys
import time

fd = os.open(sys.argv[1], os.O_RDONLY)
while os.read(fd, 4096):
    time.sleep(float(sys.argv[2]))
