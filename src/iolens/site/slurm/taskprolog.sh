#!/bin/sh
# iolens TaskProlog: trace every task of every job with the iolens LD_PRELOAD tracer.
#
# slurm.conf:  TaskProlog=/etc/slurm/iolens-taskprolog.sh
# Slurm runs it as the job's user before each task; every stdout line "export NAME=VALUE"
# is added to the task's environment. Users opt out by exporting IOLENS_DISABLE=1 before
# sbatch/srun (the tracer itself also honours it). Written by `iolens site slurm-files`,
# which fills in the two paths below; the SPANK plug-in (iolens_spank.so) does the same
# with a --no-iolens option instead: install one of the two, not both.
IOLENS_LIB="@IOLENS_LIB@"
IOLENS_TRACE_SPOOL="@IOLENS_SPOOL@"

case "${IOLENS_DISABLE:-0}" in
    ""|0) ;;
    *) exit 0 ;;
esac
[ -r "$IOLENS_LIB" ] || exit 0
case ":${LD_PRELOAD:-}:" in
    *":$IOLENS_LIB:"*) ;;  # inherited already (a step started from a traced batch script)
    *) echo "export LD_PRELOAD=$IOLENS_LIB${LD_PRELOAD:+:$LD_PRELOAD}" ;;
esac
[ -n "${IOLENS_SPOOL:-}" ] || echo "export IOLENS_SPOOL=$IOLENS_TRACE_SPOOL"
exit 0
