#!/bin/sh
# PID 1 of the guest, on the host's / (9p): the in-guest kernel nfsd exports one ext4 disk (fresh for every run),
# which the kernel NFS client mounts twice (two clients with their own caches: $QEMU_DIR/mnt/a with NFSVERS_A,
# $QEMU_DIR/mnt/b with NFSVERS_B); then the job runs, its exit status goes to the host through 9p, and the guest
# powers off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
Q=$QEMU_DIR
NKS=$Q/debs/nfsks
BB=$Q/debs/bb/bin/busybox
log() { echo "[guest $(cut -d' ' -f1 /proc/uptime)s] $*"; }
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm 2>/dev/null; mount -t devpts devpts /dev/pts; mount -t tmpfs shm /dev/shm
mount -t tmpfs run /run
mkdir -p /var/lib/nfs; mount -t tmpfs varlibnfs /var/lib/nfs
mkdir -p /var/lib/nfs/sm /var/lib/nfs/sm.bak /var/lib/nfs/rpc_pipefs /var/lib/nfs/nfsdcld /run/rpcbind
"$BB" ip link set lo up
"$BB" hostname qemunfs
modprobe -d "$Q/modroot" -a virtio_blk ext4 nfsd nfsv3 nfsv4 || log "modprobe failed"
log "modules loaded"
mount -t nfsd nfsd /proc/fs/nfsd
mount -t rpc_pipefs sunrpc /var/lib/nfs/rpc_pipefs
mount -t ext4 /dev/vda "$Q/mnt/export" || log "mounting the export's disk failed"
rm -rf "$Q/mnt/export/lost+found"; chmod 1777 "$Q/mnt/export"
log "export's disk mounted"
rpcbind -w 2>/dev/null || rpcbind
rpc.statd --no-notify 2>&1
"$NKS/usr/sbin/exportfs" -o rw,no_root_squash,sync,no_subtree_check,fsid=0 "127.0.0.1:$Q/mnt/export"
"$NKS/usr/sbin/rpc.mountd" --manage-gids 2>&1
# nfsdcld with an empty recovery store: "no clients to reclaim", so no NFSv4 grace period, if it watches for
# nfsd's pipe (inotify) before nfsd starts. Whatever happens, the job never starts inside a grace period, where
# every OPEN waits.
"$NKS/usr/sbin/nfsdcld" -F -p /var/lib/nfs/rpc_pipefs -s /var/lib/nfs/nfsdcld &
cld=$!
for _ in $(seq 100); do ls -l /proc/$cld/fd 2>/dev/null | grep -q inotify && break; sleep 0.1; done
log "nfsdcld ready"
"$NKS/usr/sbin/rpc.nfsd" -G 10 -L 10 8 2>&1 || log "rpc.nfsd failed"
for _ in $(seq 150); do [ "$(cat /proc/fs/nfsd/v4_end_grace)" = Y ] && break; sleep 0.1; done
mount_client() {  # mount_client DIR VERSION
  if [ "$2" = 3 ]; then src="127.0.0.1:$Q/mnt/export"; else src="127.0.0.1:/"; fi
  mount -t nfs -o "vers=$2,nosharecache${NFSOPTS:+,$NFSOPTS}" "$src" "$1" || log "mounting $1 (NFS $2) failed"
}
mount_client "$Q/mnt/a" "${NFSVERS_A:-4.2}"
mount_client "$Q/mnt/b" "${NFSVERS_B:-3}"
rc=0
if [ -n "${QEMUJOB:-}" ]; then
  log "job start"
  sh "$QEMUJOB"; rc=$?
  log "job exit code $rc"
fi
[ -n "${QEMURC:-}" ] && echo $rc >"$QEMURC"   # seen by the host through 9p
umount "$Q/mnt/a" "$Q/mnt/b" 2>/dev/null
sync
"$BB" poweroff -f
