#!/usr/bin/env bash
# Re-makes the demo recordings of README's stories on throwaway loop devices (root needed).
#
#   sudo assets/demo/make-demos.sh [path/to/ioscope [story...]]
#
# The binary defaults to target/release/ioscope; the stories (default: all) are cold, small, dirty,
# readahead, iowait. Run each under the machine's live-test lock when others test on the box:
#   for s in cold small dirty readahead iowait; do flock /tmp/ioscope-live.lock assets/demo/make-demos.sh "" $s; done
#
# Each story: a loop device backed by a sparse image in /var/tmp with direct I/O on (so the loop
# device's reads really reach the disk instead of the image's page cache), `ioscope record` every
# second for 60-120 s while the workload runs, with eBPF (the script stops when fewer than all
# programs load), a mark (`kill -USR1`) at each step of the story; then everything is torn down
# and any changed sysctl or queue setting restored, also on failure or Ctrl-C. Where a story
# needs a slow disk, its processes run in a blkio cgroup (v1) throttled on the loop device.
set -euo pipefail

cd "$(dirname "$0")/../.."
BIN=${1:-}
[ -n "$BIN" ] || BIN=target/release/ioscope
shift || true
STORIES=${*:-cold small dirty readahead iowait}
OUT=assets/demo
[ "$(id -u)" = 0 ] || { echo "make-demos.sh: needs root (loop devices, mount, sysctl)" >&2; exit 1; }
command -v fio >/dev/null || { echo "make-demos.sh: needs fio" >&2; exit 1; }
[ -x "$BIN" ] || { echo "make-demos.sh: no ioscope binary at $BIN (cargo build --release first)" >&2; exit 1; }

WORK=$(mktemp -d /var/tmp/ioscope-demo.XXXXXX)
LOOP=""
MNT="$WORK/mnt"
CG=/sys/fs/cgroup/blkio/ioscope-demo
RECORDER=""
SAVED_DIRTY=""
# The kernel keeps either a ratio or a byte count for each limit (writing one zeroes the other,
# and 0 bytes is refused): restore whichever was in force.
restore_dirty() {
    [ -n "$SAVED_DIRTY" ] || return 0
    read -r bytes bg_bytes ratio bg_ratio <<< "$SAVED_DIRTY"
    if [ "$bytes" != 0 ]; then echo "$bytes" > /proc/sys/vm/dirty_bytes; else echo "$ratio" > /proc/sys/vm/dirty_ratio; fi
    if [ "$bg_bytes" != 0 ]; then echo "$bg_bytes" > /proc/sys/vm/dirty_background_bytes
    else echo "$bg_ratio" > /proc/sys/vm/dirty_background_ratio; fi
    SAVED_DIRTY=""
}
cleanup() {
    set +e
    [ -n "$RECORDER" ] && kill "$RECORDER" 2>/dev/null
    # Every process still in the demo's cgroup is the demo's own workload.
    [ -d "$CG" ] && { xargs -r kill < "$CG/cgroup.procs"; sleep 0.5; rmdir "$CG"; }
    restore_dirty
    mountpoint -q "$MNT" && umount "$MNT"
    [ -n "$LOOP" ] && losetup -d "$LOOP"
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

loop_dev() { # size: a direct-I/O loop device on a sparse image
    truncate -s "$1" "$WORK/disk.img"
    LOOP=$(losetup --find --show --direct-io=on "$WORK/disk.img")
}

loop_fs() { # size: a fresh ext4 on a direct-I/O loop device, mounted at $MNT
    loop_dev "$1"
    mkfs.ext4 -q -F "$LOOP"
    mkdir -p "$MNT"
    mount "$LOOP" "$MNT"
}

loop_teardown() {
    mountpoint -q "$MNT" && umount "$MNT"
    losetup -d "$LOOP"
    LOOP=""
    rm -f "$WORK/disk.img"
}

# A slow disk for the story's processes: a blkio cgroup throttled on the loop device.
# slow_disk READ_BPS WRITE_BPS (0: no limit); `in_cg CMD...` runs a command in it.
slow_disk() {
    mkdir -p "$CG"
    local dev
    dev=$(cat "/sys/block/${LOOP#/dev/}/dev")
    [ "$1" = 0 ] || echo "$dev $1" > "$CG/blkio.throttle.read_bps_device"
    [ "$2" = 0 ] || echo "$dev $2" > "$CG/blkio.throttle.write_bps_device"
}
in_cg() { sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$CG" "$@"; }

# A tool under the name the story gives it (the comm the panes show): a link named NAME to it.
named() { # name tool
    mkdir -p "$WORK/bin"
    ln -sf "$(command -v "$2")" "$WORK/bin/$1"
    echo "$WORK/bin/$1"
}

# Waits (up to 2 min) until none of the project's test binaries runs (`live-…`, `offline-…`):
# the demo should show its story, not other work of the machine's.
wait_quiet() {
    for _ in $(seq 120); do
        grep -qsE '^(live-|live_|offline-)' /proc/[0-9]*/comm || return 0
        sleep 1
    done
}

record() { # name seconds: record every second in the background
    wait_quiet
    "$BIN" record --force -i 1 -d "$2" -o "$OUT/$1.rec" 2> "$WORK/record.err" &
    RECORDER=$!
    sleep 3
    kill -0 "$RECORDER" || { cat "$WORK/record.err" >&2; exit 1; }
}
mark() { kill -USR1 "$RECORDER"; echo "mark: $*" >&2; }
finish() { # wait for the recorder; say what it wrote
    wait "$RECORDER" || true
    RECORDER=""
    cat "$WORK/record.err" >&2
}

# 1. Cold vs warm cache read: a 768 MiB file read from the disk by dd (its read_bytes equal its
#    rchar; the disk is throttled to 40 MB/s for dd's cgroup so the cold read lasts ~20 s), then
#    read again by dd eight times from the page cache (rchar at memory speed, no read_bytes, no
#    device reads).
story_cold() {
loop_fs 2G
dd if=/dev/zero of="$MNT/data" bs=1M count=768 status=none conv=fsync
dd if="$MNT/data" iflag=nocache count=0 status=none  # drop this file's cached pages
slow_disk $((40 << 20)) 0
record cold-vs-warm-read 75
mark "1: dd reads the file cold, from the disk"
in_cg dd if="$MNT/data" of=/dev/null bs=1M status=none
sleep 5
mark "2: dd reads the same file warm, from the page cache"
for _ in $(seq 8); do
    in_cg dd if="$MNT/data" of=/dev/null bs=64k status=none
    sleep 3
done
finish
rmdir "$CG"
loop_teardown
}

# 2. Small vs large writes at the same %util: O_DIRECT writes to the raw device, 4 KiB then
#    512 KiB requests (4 then 16 in flight). Both keep the device busy (~100 %util); wareq-sz, aqu-sz
#    and wkB/s tell them apart.
story_small() {
loop_dev 4G
record small-vs-large-writes 75
mark "1: fio writes 4 KiB O_DIRECT"
fio --name=small --filename="$LOOP" --rw=randwrite --bs=4k --direct=1 --ioengine=libaio --iodepth=4 \
    --runtime=30 --time_based --output=/dev/null
sleep 3
mark "2: fio writes 512 KiB O_DIRECT"
fio --name=large --filename="$LOOP" --rw=write --bs=512k --direct=1 --ioengine=libaio --iodepth=16 \
    --size=3g --runtime=30 --time_based --output=/dev/null
finish
loop_teardown
}

# 3. A long fsync that stalls writers: with vm.dirty_bytes at 256 MiB (background 64 MiB) and a
#    slow disk (the loop device's queue cut to 4 KiB requests, 4 at a time: ~15 MB/s), `dd`
#    writes 768 MiB buffered and fsyncs it, while a "wal-writer" appends 16 KiB records with an
#    fsync every ten. Dirty memory climbs to the throttle threshold, both writers are throttled in
#    balance_dirty_pages(), and dd's final fsync waits for the rest, many seconds. The sysctls are
#    restored by the trap.
story_dirty() {
loop_fs 4G
Q="/sys/block/${LOOP#/dev/}/queue"
SAVED_Q="$(cat "$Q/max_sectors_kb") $(cat "$Q/nr_requests")"
echo 4 > "$Q/max_sectors_kb"
echo 4 > "$Q/nr_requests"
SAVED_DIRTY=$(cat /proc/sys/vm/{dirty_bytes,dirty_background_bytes,dirty_ratio,dirty_background_ratio} | tr '\n' ' ')
WAL=$(named wal-writer fio)
record dirty-threshold-stall 100
echo $((256 << 20)) > /proc/sys/vm/dirty_bytes
echo $((64 << 20)) > /proc/sys/vm/dirty_background_bytes
"$WAL" --name=wal --filename="$MNT/wal.log" --rw=write --bs=16k --size=256m --fsync=10 --rate_iops=100 \
    --runtime=90 --time_based --output=/dev/null &
WALPID=$!
sleep 5
mark "1: dd writes 768 MiB buffered: dirty memory climbs to the throttle threshold"
dd if=/dev/zero of="$MNT/big" bs=1M count=768 conv=fsync status=none &
DD=$!
# The second mark when dd has written everything and waits in its fsync.
while kill -0 "$DD" 2>/dev/null; do
    w=$(awk '/^wchar/ {print $2}' "/proc/$DD/io" 2>/dev/null || echo 0)
    [ "${w:-0}" -ge $((768 << 20)) ] && { mark "2: dd's fsync of big waits for the dirty data"; break; }
    sleep 0.2
done
wait "$DD"
wait "$WALPID" || true
restore_dirty
finish
read -r msk nr <<< "$SAVED_Q"
echo "$nr" > "$Q/nr_requests"
echo "$msk" > "$Q/max_sectors_kb"
loop_teardown
}

# 4. Readahead waste: a "write-only database" that reads. A cold 1 GiB file read through a shared
#    mapping by "dbserver" (fio: random 4 KiB touches, 100/s, no access hint): every fault reads
#    around it (read_ahead_kb 512: 128-page windows), most of it never touched. Every 2 s the
#    file's pages are dropped (POSIX_FADV_DONTNEED, as reclaim would under memory pressure): the
#    read-around pages nobody used are evicted unused, wasted. Then the same touches with
#    `--fadvise_hint=random` (madvise(MADV_RANDOM)): no read-around, one page per touch.
story_readahead() {
loop_fs 2G
echo 512 > "/sys/block/${LOOP#/dev/}/queue/read_ahead_kb"
dd if=/dev/zero of="$MNT/table.db" bs=1M count=1024 status=none conv=fsync
dd if="$MNT/table.db" iflag=nocache count=0 status=none
DB=$(named dbserver fio)
record readahead-waste 80
touches() { # hint seconds
    "$DB" --name="db-$1" --filename="$MNT/table.db" --size=1g --ioengine=mmap --rw=randread \
        --bs=4k --rate_iops=100 --runtime="$2" --time_based --fadvise_hint="$1" --output=/dev/null &
    local pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        sleep 2
        dd if="$MNT/table.db" iflag=nocache count=0 status=none  # evict: the unused read-around is wasted
    done
}
mark "1: dbserver touches a mapping at random, no hint: read-around, wasted"
touches 0 45
sleep 2
mark "2: the same touches with MADV_RANDOM: no read-around"
touches random 25
finish
loop_teardown
}

# 5. I/O wait: who is blocked on the disk, for what. On a disk throttled to 24 MB/s of reads and
#    writes for the story's cgroup: "backup" (dd) reads a cold file through the page cache,
#    "db-query" (fio) reads 8 KiB at random with O_DIRECT, "wal-writer" (fio) appends 4 KiB with
#    an fdatasync after each. Each waits on the disk, each for its own cause.
story_iowait() {
loop_fs 2G
dd if=/dev/zero of="$MNT/archive" bs=1M count=1024 status=none conv=fsync
dd if=/dev/zero of="$MNT/db" bs=1M count=256 status=none conv=fsync
dd if="$MNT/archive" iflag=nocache count=0 status=none
BACKUP=$(named backup dd)
QUERY=$(named db-query fio)
WAL=$(named wal-writer fio)
slow_disk $((24 << 20)) $((24 << 20))
record iowait-who-waits 80
mark "1: backup, db-query and wal-writer wait on a slow disk"
in_cg "$BACKUP" if="$MNT/archive" of=/dev/null bs=1M status=none &
PIDS=$!
in_cg "$QUERY" --name=query --filename="$MNT/db" --rw=randread --bs=8k --direct=1 --ioengine=psync \
    --runtime=65 --time_based --output=/dev/null &
PIDS="$PIDS $!"
in_cg "$WAL" --name=wal --filename="$MNT/wal.log" --rw=write --bs=4k --size=64m --fdatasync=1 \
    --runtime=65 --time_based --output=/dev/null &
PIDS="$PIDS $!"
# shellcheck disable=SC2086
wait $PIDS
finish
rmdir "$CG"
loop_teardown
}

for story in $STORIES; do
    case $story in
        cold|small|dirty|readahead|iowait) "story_$story" ;;
        *) echo "make-demos.sh: unknown story '$story' (cold, small, dirty, readahead, iowait)" >&2; exit 2 ;;
    esac
done
ls -l "$OUT"/*.rec
