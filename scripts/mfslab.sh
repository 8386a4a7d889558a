#!/usr/bin/env bash
# mfslab.sh - a real parallel file system on one machine: MooseFS from Debian's packages
# (issue 20). The master plays the MDS, each chunkserver an OSS with one target, on its own
# loop-mounted disk image (so it has its own block device: diskstats, blkio throttling).
# Every virtual node (LAB_NODES) gets its own FUSE mount bound to its own IP alias, so the
# master sees one session per node with a distinct address (mfscli -SMS, -SMO).
#
#   mfslab.sh install   apt-get the MooseFS packages (master, chunkserver, client, cli)
#   mfslab.sh up        start the master, LAB_CS chunkservers, mount $LAB/mnt and one mount
#                       per node; writes $LAB/nodes.tsv and $LAB/lab.json (idempotent)
#   mfslab.sh down      unmount everything, stop every daemon, detach the disk images,
#                       remove the IP aliases `up` added (idempotent)
#   mfslab.sh status    the chunkservers the master sees (mfscli -SCS)
#
# Environment:
#   LAB=/tmp/iolens-mfslab   state, disk images, mount points ($LAB/mnt, $LAB/nodes/<node>)
#   LAB_CS=4                 chunkservers
#   LAB_DISK_MB=512          size of each chunkserver's disk image
#   LAB_PORT_BASE=19419      master: +0 metaloggers, +1 chunkservers, +2 clients; chunkservers +4..
#   LAB_IP=                  the address chunkservers reach the master on (default: this
#                            host's first global IPv4 address; MooseFS refuses 127/8)
#   LAB_NODES="c1 c2 c3 c4 login"  virtual nodes, one FUSE mount each
#   LAB_MOUNT_OPTS=          extra mfsmount options of the node mounts
#   LAB_ALIAS_BASE=101       first node's IP alias (an address, or a host part on LAB_IP's
#                            /24); the next nodes count up from it. Added as /32 on LAB_IP's
#                            device; an alias that already exists is used but never removed.
#                            When an alias cannot be added the node mounts without mfsbind
#                            (then the sessions share one address; logged once).
#
# Chunkserver i carries the label A, B, C, ... (i-th letter), so a storage class pinned to
# one label places chunks on one server (tests/lab/harness.py: mfsscadmin create -K A cs1).
# $LAB/mnt is a plain mount (no mfsbind) for setup and inspection, not a node.
# Files: $LAB/nodes.tsv (node, ip, mountpoint), $LAB/lab.json (master, chunkservers, nodes),
# $LAB/aliases.added (the aliases `down` removes).
# Needs root (loop devices, FUSE). Measured here: `up` about 3 s, writes at ~360 MB/s.
set -euo pipefail

LAB=${LAB:-/tmp/iolens-mfslab}
LAB_CS=${LAB_CS:-4}
LAB_DISK_MB=${LAB_DISK_MB:-512}
BASE=${LAB_PORT_BASE:-19419}
LAB_NODES=${LAB_NODES:-c1 c2 c3 c4 login}
PKGS=(moosefs-master moosefs-chunkserver moosefs-client moosefs-cli)

log() { echo "[mfslab $(date +%T)] $*" >&2; }

lab_ip() {
  if [[ -n ${LAB_IP:-} ]]; then echo "$LAB_IP"; return; fi
  local ip
  ip=$(ip -4 -o addr show scope global | awk '$4 !~ /\/32$/ {split($4, a, "/"); print a[1]; exit}')
  [[ -n $ip ]] || { log "no global IPv4 address: set LAB_IP (MooseFS refuses 127/8)"; exit 2; }
  echo "$ip"
}

lab_iface() {  # the device that carries $1
  ip -4 -o addr show | awk -v ip="$1" '{split($4, a, "/"); if (a[1] == ip) {print $2; exit}}'
}

alias_ip() {  # $1: the lab ip, $2: node index 0..
  local base=${LAB_ALIAS_BASE:-101}
  [[ $base == *.* ]] || base=${1%.*}.$base
  echo "${base%.*}.$((${base##*.} + $2))"
}

install() {
  local missing=()
  for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
  fi
}

in_mounts() { awk -v p="$1" '$2 == p {f = 1} END {exit !f}' /proc/mounts; }

unmount() {  # unmount $1 if mounted (also a dead FUSE mount: "transport endpoint not connected")
  if in_mounts "$1"; then
    umount "$1" 2>/dev/null || umount -l "$1" 2>/dev/null || true
  fi
}

clear_stale_mount() {  # a FUSE mount whose mfsmount was killed: listed, but stat fails
  if in_mounts "$1" && ! timeout 5 stat -t "$1" >/dev/null 2>&1; then
    log "stale mount $1: unmounting"
    umount -l "$1" 2>/dev/null || true
  fi
}

pid_of() {  # $1: lock file holding the daemon's pid; prints it when that process is alive
  local p
  p=$(cat "$1" 2>/dev/null || true)
  [[ $p =~ ^[0-9]+$ ]] && kill -0 "$p" 2>/dev/null && echo "$p"
  return 0
}

wait_gone() {  # pids: wait up to WAIT_S (30) s for them to exit (`stop` may return early)
  local p deadline=$((SECONDS + ${WAIT_S:-30}))
  for p in "$@"; do
    while kill -0 "$p" 2>/dev/null; do
      ((SECONDS < deadline)) || { log "pid $p still running after stop: SIGKILL"; kill -9 "$p"; break; }
      sleep 0.2
    done
  done
}

do_mount() {  # $1: mount point, then mfsmount options
  local mnt=$1
  shift
  if [[ -n $(ls -A "$mnt" 2>/dev/null) ]]; then
    log "$mnt is not mounted and not empty (files written while the lab was down?): not mounting"
    exit 1
  fi
  mfsmount "$mnt" -H "$(lab_ip)" -P $((BASE + 2)) "$@" >>"$LAB/mount.log" 2>&1 \
    || { log "mfsmount $mnt failed (see $LAB/mount.log)"; exit 1; }
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
# A removed file's chunks are deleted by the master's chunk loop, which by default takes
# at least 300 s per pass: the lab's small disks would stay full for minutes between runs.
CHUNKS_LOOP_MIN_TIME = 5
CHUNKS_SOFT_DEL_LIMIT = 100
CHUNKS_HARD_DEL_LIMIT = 200
EOF
  echo "* / rw,alldirs,admin,maproot=0" >"$m/mfsexports.cfg"
  : >"$m/mfstopology.cfg"
  [[ -n $(pid_of "$m/.mfsmaster.lock") ]] && return 0
  # A killed master leaves metadata.mfs.back and change logs: -a restores from them.
  [[ -e $m/metadata.mfs || -e $m/metadata.mfs.back ]] || cp /var/lib/mfs/metadata.mfs.empty "$m/metadata.mfs"
  mfsmaster -a -c "$m/mfsmaster.cfg" start >"$m/start.log" 2>&1
}

chunkserver_up() {  # $1: index 1..LAB_CS; $2: the master's address
  local i=$1 d=$LAB/cs$1
  mkdir -p "$d/data" "$d/disk"
  clear_stale_mount "$d/disk"
  if ! mountpoint -q "$d/disk"; then
    [[ -e $d/disk.img ]] || { truncate -s "${LAB_DISK_MB}M" "$d/disk.img"; mkfs.ext4 -q -F "$d/disk.img"; }
    # loop devices left attached to this image by a killed run
    losetup -j "$d/disk.img" -O NAME -n 2>/dev/null | while read -r dev; do losetup -d "$dev" || true; done
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
LABELS = $(printf "\\x$(printf %x $((64 + i)))")
EOF
  echo "$d/disk" >"$d/mfshdd.cfg"
  [[ -n $(pid_of "$d/data/.mfschunkserver.lock") ]] && return 0
  mfschunkserver -c "$d/mfschunkserver.cfg" start >"$d/start.log" 2>&1
}

add_alias() {  # $1: alias, $2: device; 0 when usable
  if ip -4 -o addr show | awk -v ip="$1" '{split($4, a, "/"); if (a[1] == ip) f = 1} END {exit !f}'; then
    return 0  # already there (added by an earlier `up` or by someone else: not ours to remove)
  fi
  if ip addr add "$1/32" dev "$2" 2>/dev/null; then
    grep -qx "$1 $2" "$LAB/aliases.added" 2>/dev/null || echo "$1 $2" >>"$LAB/aliases.added"
    return 0
  fi
  return 1
}

nodes_up() {  # $1: the master's address
  local ip=$1 dev k=0 warned=0 node a mnt bind
  dev=$(lab_iface "$ip")
  mkdir -p "$LAB/nodes"
  : >"$LAB/nodes.tsv.new"
  for node in $LAB_NODES; do
    a=$(alias_ip "$ip" "$k"); k=$((k + 1))
    mnt=$LAB/nodes/$node
    mkdir -p "$mnt"
    clear_stale_mount "$mnt"
    bind=(-o "mfsbind=$a")
    if [[ -z $dev ]] || ! add_alias "$a" "$dev"; then
      ((warned)) || log "cannot add IP alias $a on ${dev:-?}: node mounts share $ip"
      warned=1 a=$ip bind=()
    fi
    if ! mountpoint -q "$mnt"; then
      # LAB_MOUNT_OPTS: extra mfsmount options of the node mounts (word-split on purpose),
      # e.g. "-o mfscachemode=DIRECT,mfswritecachesize=16" so writes wait for the servers
      # shellcheck disable=SC2086
      do_mount "$mnt" "${bind[@]}" ${LAB_MOUNT_OPTS:-}
    fi
    printf '%s\t%s\t%s\n' "$node" "$a" "$mnt" >>"$LAB/nodes.tsv.new"
  done
  mv "$LAB/nodes.tsv.new" "$LAB/nodes.tsv"
}

write_json() {  # $1: the master's address
  local ip=$1 i d first=1 node a mnt
  {
    printf '{\n  "lab": "%s",\n  "mount": "%s",\n' "$LAB" "$LAB/mnt"
    printf '  "master": {"ip": "%s", "ml_port": %d, "cs_port": %d, "cl_port": %d, "pid": %s, "data": "%s"},\n' \
      "$ip" "$BASE" $((BASE + 1)) $((BASE + 2)) "$(pid_of "$LAB/master/.mfsmaster.lock" | grep . || echo null)" "$LAB/master"
    printf '  "chunkservers": [\n'
    for i in $(seq "$LAB_CS"); do
      d=$LAB/cs$i
      ((first)) || printf ',\n'; first=0
      printf '    {"index": %d, "id": "%s:%d", "ip": "%s", "port": %d, "disk": "%s", "image": "%s", "loop": "%s", "pid": %s}' \
        "$i" "$ip" $((BASE + 3 + i)) "$ip" $((BASE + 3 + i)) "$d/disk" "$d/disk.img" \
        "$(findmnt -n -o SOURCE "$d/disk" || true)" "$(pid_of "$d/data/.mfschunkserver.lock" | grep . || echo null)"
    done
    printf '\n  ],\n  "nodes": [\n'
    first=1
    while IFS=$'\t' read -r node a mnt; do
      ((first)) || printf ',\n'; first=0
      printf '    {"name": "%s", "ip": "%s", "mount": "%s"}' "$node" "$a" "$mnt"
    done <"$LAB/nodes.tsv"
    printf '\n  ]\n}\n'
  } >"$LAB/lab.json.new"
  mv "$LAB/lab.json.new" "$LAB/lab.json"
}

up() {
  install
  local ip
  ip=$(lab_ip)
  mkdir -p "$LAB/mnt"
  master_up
  for i in $(seq "$LAB_CS"); do chunkserver_up "$i" "$ip"; done
  local deadline=$((SECONDS + 30))
  until (($(status | grep -c "^chunk servers:") >= LAB_CS)); do
    ((SECONDS < deadline)) || { log "chunkservers did not register in 30 s"; status; exit 1; }
    sleep 0.5
  done
  clear_stale_mount "$LAB/mnt"
  mountpoint -q "$LAB/mnt" || do_mount "$LAB/mnt"
  nodes_up "$ip"
  write_json "$ip"
  log "up: master $ip:$((BASE + 2)), $LAB_CS chunkservers, $LAB/mnt, nodes: $(cut -f1,2 "$LAB/nodes.tsv" | tr '\t\n' '= ')"
}

down() {
  local d mnt a dev p pids=() mp=()
  for mnt in "$LAB"/nodes/* "$LAB/mnt"; do
    [[ -d $mnt ]] || continue
    # the mount's own mfsmount (its title names the mount point): it can outlive the unmount
    mapfile -t -O "${#mp[@]}" mp < <(pgrep -x -f "mfsmount \(mounted on: $mnt\)" || true)
    unmount "$mnt"
  done
  if ((${#mp[@]})); then
    kill "${mp[@]}" 2>/dev/null || true
    WAIT_S=10 wait_gone "${mp[@]}"
  fi
  for d in "$LAB"/cs*; do  # stop the chunkservers in parallel, then wait for every one
    p=$(pid_of "$d/data/.mfschunkserver.lock")
    [[ -n $p ]] || continue
    pids+=("$p")
    mfschunkserver -c "$d/mfschunkserver.cfg" stop >/dev/null 2>&1 &
  done
  wait
  wait_gone "${pids[@]}"
  for d in "$LAB"/cs*; do
    [[ -d $d ]] || continue
    unmount "$d/disk"
    [[ -e $d/disk.img ]] && losetup -j "$d/disk.img" -O NAME -n 2>/dev/null \
      | while read -r dev; do losetup -d "$dev" 2>/dev/null || true; done
  done
  p=$(pid_of "$LAB/master/.mfsmaster.lock")
  if [[ -n $p ]]; then
    pids+=("$p")
    mfsmaster -c "$LAB/master/mfsmaster.cfg" stop >/dev/null 2>&1 || true
  fi
  wait_gone "${pids[@]}"
  if [[ -f $LAB/aliases.added ]]; then
    while read -r a dev; do ip addr del "$a/32" dev "$dev" 2>/dev/null || true; done <"$LAB/aliases.added"
    rm -f "$LAB/aliases.added"
  fi
  log "down"
}

status() { mfscli -H "$(lab_ip)" -P $((BASE + 2)) -SCS 2>/dev/null || true; }

case ${1:-} in
  install) install ;;
  up) up ;;
  down) down ;;
  status) status ;;
  *) sed -n '2,/^set -euo/{/^#/p}' "$0" >&2; exit 2 ;;
esac
