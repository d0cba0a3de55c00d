#!/usr/bin/env bash
# Re-makes the demo recordings of README's stories on throwaway loop devices (root needed).
#
#   sudo assets/demo/make-demos.sh [path/to/ioscope [story...]]
#
# The binary defaults to target/debug/ioscope; the stories (default: all) are cold, small, dirty,
# readahead.
#
# Each story: a loop device backed by a sparse image in /var/tmp with direct I/O on (so the loop
# device's reads really reach the disk instead of the image's page cache), `ioscope record` at
# 0.5 s (readahead: 1 s) while the workload runs, then everything is torn down and any changed sysctl restored,
# also on failure or Ctrl-C.
set -euo pipefail

cd "$(dirname "$0")/../.."
BIN=${1:-target/debug/ioscope}
shift || true
STORIES=${*:-cold small dirty readahead}
OUT=assets/demo
[ "$(id -u)" = 0 ] || { echo "make-demos.sh: needs root (loop devices, mount, sysctl)" >&2; exit 1; }
command -v fio >/dev/null || { echo "make-demos.sh: needs fio" >&2; exit 1; }
[ -x "$BIN" ] || { echo "make-demos.sh: no ioscope binary at $BIN (cargo build first)" >&2; exit 1; }

WORK=$(mktemp -d /var/tmp/ioscope-demo.XXXXXX)
LOOP=""
MNT="$WORK/mnt"
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
    restore_dirty
    mountpoint -q "$MNT" && umount "$MNT"
    [ -n "$LOOP" ] && losetup -d "$LOOP"
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

loop_fs() { # size: a fresh ext4 on a direct-I/O loop device, mounted at $MNT
    truncate -s "$1" "$WORK/disk.img"
    LOOP=$(losetup --find --show --direct-io=on "$WORK/disk.img")
    mkfs.ext4 -q -F "$LOOP"
    mkdir -p "$MNT"
    mount "$LOOP" "$MNT"
}

loop_teardown() {
    umount "$MNT"
    losetup -d "$LOOP"
    LOOP=""
    rm -f "$WORK/disk.img"
}

record() { # name seconds [interval]: record in the background (every 0.5 s unless told)
    "$BIN" record --force -i "${3:-0.5}" -d "$2" -o "$OUT/$1.rec" &
    RECORDER=$!
    sleep 1.5
}

# 1. Cold vs warm cache read: a 768 MiB file read from the disk by dd (the loop device reads at
#    disk speed; dd's read_bytes equal its rchar), then twenty times over by cat from the page cache
#    (rchar at memory speed, no read_bytes, no device reads). cat reads it twenty times so that it
#    lives across several samples: /proc/PID/io cannot see a process that comes and goes between two.
story_cold() {
loop_fs 2G
dd if=/dev/zero of="$MNT/data" bs=1M count=768 status=none conv=fsync
dd if="$MNT/data" iflag=nocache count=0 status=none  # drop this file's cached pages
record cold-vs-warm-read 16
dd if="$MNT/data" of=/dev/null bs=1M status=none
sleep 2
cat $(for _ in $(seq 20); do printf '%s ' "$MNT/data"; done) > /dev/null
wait "$RECORDER"
loop_teardown
}

# 2. Small vs large writes at the same %util: O_DIRECT writes, one at a time, to the raw device:
#    4 KiB then 512 KiB requests. Both keep the device busy (~100 %util); wareq-sz and wkB/s tell
#    them apart.
story_small() {
truncate -s 2G "$WORK/disk.img"
LOOP=$(losetup --find --show --direct-io=on "$WORK/disk.img")
record small-vs-large-writes 16
fio --name=small --filename="$LOOP" --rw=write --bs=4k --direct=1 --ioengine=psync \
    --runtime=5 --time_based --output=/dev/null
sleep 1
fio --name=large --filename="$LOOP" --rw=write --bs=512k --direct=1 --ioengine=psync \
    --runtime=5 --time_based --output=/dev/null
wait "$RECORDER"
losetup -d "$LOOP"
LOOP=""
rm -f "$WORK/disk.img"
}

# 3. A dirty-threshold stall: with vm.dirty_bytes at 96 MiB (background 32 MiB), a 1 GiB buffered
#    write fills dirty memory to the throttle threshold, the writer is throttled, and the final
#    fsync waits for the rest. The sysctls are restored by the trap.
story_dirty() {
loop_fs 2G
SAVED_DIRTY=$(cat /proc/sys/vm/{dirty_bytes,dirty_background_bytes,dirty_ratio,dirty_background_ratio} | tr '\n' ' ')
record dirty-threshold-stall 14
echo $((96 << 20)) > /proc/sys/vm/dirty_bytes
echo $((32 << 20)) > /proc/sys/vm/dirty_background_bytes
dd if=/dev/zero of="$MNT/big" bs=1M count=1024 conv=fsync status=none
sleep 2
restore_dirty
wait "$RECORDER"
loop_teardown
}

# 4. Readahead waste: a "write-only database" that reads. A cold 256 MiB file, read through a
#    shared mapping by fio with random 4 KiB touches (3,000 of them, 1,000/s) and no access hint:
#    every fault reads around it (read_ahead_kb 128: 32-page windows), most of it never touched.
#    Then the file's pages are dropped (POSIX_FADV_DONTNEED, as reclaim would under memory
#    pressure): the read-around pages nobody used are evicted unused, wasted. Then the same
#    touches with fio's `--fadvise_hint=random` (madvise(MADV_RANDOM)): no read-around, one page
#    per touch.
story_readahead() {
loop_fs 1G
echo 128 > "/sys/block/${LOOP#/dev/}/queue/read_ahead_kb"
dd if=/dev/zero of="$MNT/table.db" bs=1M count=256 status=none conv=fsync
dd if="$MNT/table.db" iflag=nocache count=0 status=none
# Every second: the readahead table lists every file any process on the machine read ahead, so
# this recording grows faster than the others; a coarser interval keeps it small.
record readahead-waste 11 1
touches() { # hint
    fio --name="touch-$1" --filename="$MNT/table.db" --size=256m --ioengine=mmap --rw=randread \
        --bs=4k --number_ios=3000 --rate_iops=1000 --fadvise_hint="$1" --output=/dev/null
}
touches 0
sleep 1
dd if="$MNT/table.db" iflag=nocache count=0 status=none  # evict: the unused read-around is wasted
sleep 1
touches random
wait "$RECORDER"
loop_teardown
}

for story in $STORIES; do
    case $story in
        cold|small|dirty|readahead) "story_$story" ;;
        *) echo "make-demos.sh: unknown story '$story' (cold, small, dirty, readahead)" >&2; exit 2 ;;
    esac
done
ls -l "$OUT"/*.rec
