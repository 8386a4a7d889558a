#!/usr/bin/env bash
# mfslab.sh - a real parallel file system on one machine: MooseFS from Debian's packages
# (issue 20). The master plays the MDS, each chunkserver an OSS with one target, on its own
# loop-mounted disk image (so it has its own block device: diskstats, blkio throttling).
#
#   mfslab.sh install   apt-get the MooseFS packages (master, chunkserver, client, cli)
#   mfslab.sh up        start the master, LAB_CS chunkservers and mount the file system
#   mfslab.sh down      unmount, stop every daemon, detach the disk images
#   mfslab.sh status    the chunkservers the master sees (mfscli -SCS)
#
# Environment:
#   LAB=/tmp/iolens-mfslab   state, disk images, mount point ($LAB/mnt)
#   LAB_CS=4                 chunkservers
#   LAB_DISK_MB=512          size of each chunkserver's disk image
#   LAB_PORT_BASE=19419      master: +0 metaloggers, +1 chunkservers, +2 clients; chunkservers +4..
#   LAB_IP=                  the address chunkservers reach the master on (default: this
#                            host's first global IPv4 address; MooseFS refuses 127/8)
#
# Needs root (loop devices, FUSE). Measured here: `up` about 3 s, writes at ~360 MB/s.
set -euo pipefail

LAB=${LAB:-/tmp/iolens-mfslab}
LAB_CS=${LAB_CS:-4}
LAB_DISK_MB=${LAB_DISK_MB:-512}
BASE=${LAB_PORT_BASE:-19419}
PKGS=(moosefs-master moosefs-chunkserver moosefs-client moosefs-cli)

log() { echo "[mfslab $(date +%T)] $*" >&2; }

lab_ip() {
  if [[ -n ${LAB_IP:-} ]]; then echo "$LAB_IP"; return; fi
  local ip
  ip=$(ip -4 -o addr show scope global | awk '{split($4, a, "/"); print a[1]; exit}')
  [[ -n $ip ]] || { log "no global IPv4 address: set LAB_IP (MooseFS refuses 127/8)"; exit 2; }
  echo "$ip"
}

install() {
  local missing=()
  for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
  fi
}

master_up() {
  local m=$LAB/master
  mkdir -p "$m"
  cat >"$m/mfsmaster.cfg" <<EOF
WORKING_USER = root
WORKING_GROUP = root
DATA_PATH = $m
EXPORTS_FILENAME = $m/mfsexports.cfg
TOPOLOGY_FILENAME = $m/mfstopology.cfg
MATOML_LISTEN_PORT = $BASE
MATOCS_LISTEN_PORT = $((BASE + 1))
MATOCL_LISTEN_PORT = $((BASE + 2))
EOF
  echo "* / rw,alldirs,maproot=0" >"$m/mfsexports.cfg"
  : >"$m/mfstopology.cfg"
  [[ -e $m/metadata.mfs ]] || cp /var/lib/mfs/metadata.mfs.empty "$m/metadata.mfs"
  mfsmaster -c "$m/mfsmaster.cfg" start >"$m/start.log" 2>&1
}

chunkserver_up() {  # $1: index 1..LAB_CS; $2: the master's address
  local i=$1 d=$LAB/cs$1
  mkdir -p "$d/data" "$d/disk"
  if ! mountpoint -q "$d/disk"; then
    [[ -e $d/disk.img ]] || { truncate -s "${LAB_DISK_MB}M" "$d/disk.img"; mkfs.ext4 -q -F "$d/disk.img"; }
    mount -o loop "$d/disk.img" "$d/disk"
  fi
  cat >"$d/mfschunkserver.cfg" <<EOF
WORKING_USER = root
WORKING_GROUP = root
DATA_PATH = $d/data
HDD_CONF_FILENAME = $d/mfshdd.cfg
MASTER_HOST = $2
MASTER_PORT = $((BASE + 1))
CSSERV_LISTEN_PORT = $((BASE + 3 + i))
HDD_LEAVE_SPACE_DEFAULT = 16MiB
EOF
  echo "$d/disk" >"$d/mfshdd.cfg"
  mfschunkserver -c "$d/mfschunkserver.cfg" start >"$d/start.log" 2>&1
}

up() {
  install
  local ip
  ip=$(lab_ip)
  mkdir -p "$LAB/mnt"
  master_up
  for i in $(seq "$LAB_CS"); do chunkserver_up "$i" "$ip"; done
  local deadline=$((SECONDS + 30))
  until (($(status | grep -c '^chunk servers:') >= LAB_CS)); do
    ((SECONDS < deadline)) || { log "chunkservers did not register in 30 s"; status; exit 1; }
    sleep 0.5
  done
  mountpoint -q "$LAB/mnt" || mfsmount "$LAB/mnt" -H "$ip" -P $((BASE + 2)) >"$LAB/mount.log" 2>&1
  log "up: master $ip:$((BASE + 2)), $LAB_CS chunkservers, mounted on $LAB/mnt"
}

down() {
  mountpoint -q "$LAB/mnt" 2>/dev/null && umount -l "$LAB/mnt"
  for d in "$LAB"/cs*; do
    [[ -d $d ]] || continue
    mfschunkserver -c "$d/mfschunkserver.cfg" stop >/dev/null 2>&1 || true
    mountpoint -q "$d/disk" && umount -l "$d/disk"
  done
  [[ -f $LAB/master/mfsmaster.cfg ]] && { mfsmaster -c "$LAB/master/mfsmaster.cfg" stop >/dev/null 2>&1 || true; }
  log "down"
}

status() { mfscli -H "$(lab_ip)" -P $((BASE + 2)) -SCS 2>/dev/null || true; }

case ${1:-} in
  install) install ;;
  up) up ;;
  down) down ;;
  status) status ;;
  *) sed -n '2,20p' "$0" >&2; exit 2 ;;
esac
