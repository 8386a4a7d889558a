#!/bin/sh
# Slurm Prolog/Epilog wrapper for `iolens hook slurm prolog|epilog`; always exits 0, because
# a prolog or epilog that fails drains the node.
#
# Slurm runs Prolog=/Epilog= (and PrologSlurmctld=/EpilogSlurmctld=) without arguments, so
# the phase is, in order: the first argument, Slurm's SLURM_SCRIPT_CONTEXT (prolog_slurmctld,
# epilog_slurmd, ...), or this script's name (install it as two symlinks):
#   install -m 755 scripts/slurm-hook.sh /usr/local/sbin/iolens-slurm-hook
#   ln -s iolens-slurm-hook /usr/local/sbin/iolens-prolog
#   ln -s iolens-slurm-hook /usr/local/sbin/iolens-epilog
#   slurm.conf:  PrologSlurmctld=/usr/local/sbin/iolens-prolog
#                EpilogSlurmctld=/usr/local/sbin/iolens-epilog
#
# Settings come from /etc/iolens/hook.env (IOLENS_HOOK_ENV names another file), e.g.
#   IOLENS_SERVER=http://iolens.example.org:8470
#   IOLENS_TOKEN=...                        one of the server's --agent-token values
#   IOLENS_HOOK_SPOOL=/var/spool/iolens/hook
#   IOLENS_BIN=/opt/iolens/.venv/bin/iolens

phase="${1:-}"
if [ -z "$phase" ]; then
    case "${SLURM_SCRIPT_CONTEXT:-$(basename "$0")}" in
        *prolog*) phase=prolog ;;
        *epilog*) phase=epilog ;;
    esac
fi

env_file="${IOLENS_HOOK_ENV:-/etc/iolens/hook.env}"
if [ -r "$env_file" ]; then
    set -a
    # shellcheck disable=SC1090
    . "$env_file"
    set +a
fi

"${IOLENS_BIN:-iolens}" hook slurm "$phase" || true
exit 0
