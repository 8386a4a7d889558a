#!/usr/bin/env bash
# Install iolens into ./.venv on a fresh Debian 12 machine.
#   bash scripts/bootstrap.sh          server install (pip install '.[server]')
#   bash scripts/bootstrap.sh --test   editable install with the test tools
# System packages (python3-venv, a C compiler for the tracer; with --test, chromium for the
# web UI's browser tests, libhdf5-dev and libpnetcdf-dev for the tracer's layer tests) are
# installed with apt when missing and we are root or have sudo;
# everything else comes from PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=runtime
[ "${1:-}" = "--test" ] && mode=test

need=()
python3 -c 'import ensurepip, venv' 2>/dev/null || need+=(python3-venv)
command -v cc >/dev/null 2>&1 || need+=(gcc libc6-dev)
command -v make >/dev/null 2>&1 || need+=(make)
# The web UI's browser tests drive Debian's headless Chromium (never a downloaded browser).
if [ "$mode" = test ]; then
    command -v chromium >/dev/null 2>&1 || need+=(chromium)
    # A real Prometheus scrapes `iolens serve` in tests/e2e/test_prometheus.py.
    command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
    # The tracer's HDF5 and PnetCDF layers run real programs (tests/tracer/test_hdf5.py,
    # test_pnetcdf.py): 11 s and 7 s of apt-get install measured here (libhdf5 runtime and
    # Open MPI already installed; PnetCDF also needs openmpi-bin/libopenmpi-dev).
    command -v h5cc >/dev/null 2>&1 || need+=(libhdf5-dev)
    command -v pnetcdf-config >/dev/null 2>&1 || need+=(libpnetcdf-dev pnetcdf-bin)
fi
if [ "${#need[@]}" -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then apt_get=(apt-get); else apt_get=(sudo apt-get); fi
    echo "bootstrap: installing ${need[*]} with apt" >&2
    "${apt_get[@]}" update -qq
    DEBIAN_FRONTEND=noninteractive "${apt_get[@]}" install -y -qq "${need[@]}" >/dev/null
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
if [ "$mode" = test ]; then
    .venv/bin/python -m pip install -q -e '.[test]'
else
    .venv/bin/python -m pip install -q '.[server]'
fi
