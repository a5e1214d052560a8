#!/bin/sh
# usage: tests/support/qemu.sh JOB
# Runs the shell script JOB (a path without spaces: it travels on the kernel command line) as root inside a qemu
# guest (TCG emulation: any x86-64 host, no KVM) whose root is the host's / over 9p (same paths, same venv), with
# the kernel NFS server exporting a fresh ext4 disk and two kernel NFS client mounts of that export at
# $QEMU_DIR/mnt/a (NFSv4.2) and $QEMU_DIR/mnt/b (NFSv3); the export's own ext4 is $QEMU_DIR/mnt/export. The
# mounts exist only inside the guest, so guests can run side by side.
# Exit status: the job's (99 if the guest did not report one, 98 if QEMU_DIR is not prepared).
# QEMU_DIR defaults to /var/tmp/repoinstall-qemu; qemu/setup.sh prepares it (.ci/run does). Options:
# NFSVERS_A, NFSVERS_B (4.2, 4.1, 4.0, 3), NFSOPTS (added to both mounts), QEMU_SMP (2), QEMU_MEM (2048, MiB),
# QEMU_TIMEOUT (s, 3600: then the guest is killed).
set -u
Q=${QEMU_DIR:-/var/tmp/repoinstall-qemu}
JOB=${1:?usage: qemu.sh JOB}
HERE=$(cd "$(dirname "$0")/qemu" && pwd)
if [ ! -f "$Q/ready" ]; then
  echo "qemu.sh: $Q is not prepared: run tests/support/qemu/setup.sh $Q" >&2
  exit 98
fi
mkdir -p "$Q/run"
RC=$Q/run/rc.$$
DISK=$Q/run/disk.$$.img
trap 'rm -f "$RC" "$DISK"' EXIT
rm -f "$RC" "$DISK"
# The host's TSC rate for the guest's kernel: calibrated in the guest on a busy host, its clock would run at another
# speed than the host's (2.8 times, seen), and soft locks would go stale that much sooner in real time.
KHZ=$(awk -F: '/^cpu MHz/ { printf "tsc_early_khz=%d", $2 * 1000; exit }' /proc/cpuinfo)
truncate -s 1G "$DISK" && mkfs.ext4 -q -F "$DISK" || exit 98
timeout -s KILL "${QEMU_TIMEOUT:-3600}" qemu-system-x86_64 -accel tcg,thread=multi -smp "${QEMU_SMP:-2}" \
  -m "${QEMU_MEM:-2048}" -nographic -no-reboot -net none -kernel "$Q/vmlinuz" -initrd "$Q/initrd.gz" \
  -append "console=ttyS0 panic=-1 quiet mitigations=off tsc=reliable $KHZ QEMU_DIR=$Q QEMU_INIT=$HERE/init.sh QEMUJOB=$JOB QEMURC=$RC \
NFSVERS_A=${NFSVERS_A:-4.2} NFSVERS_B=${NFSVERS_B:-3} ${NFSOPTS:+NFSOPTS=$NFSOPTS}" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,multidevs=remap \
  -drive file="$DISK",if=virtio,format=raw,cache=unsafe </dev/null
cat "$RC" 2>/dev/null || echo 99 >"$RC"
exit "$(cat "$RC")"
