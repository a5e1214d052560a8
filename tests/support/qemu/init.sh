#!/bin/sh
# PID 1 of the guest, on the host's / (9p): the in-guest kernel nfsd exports one ext4 disk (fresh for every run),
# which the kernel NFS client mounts twice (two clients with their own caches: $QEMU_DIR/mnt/a with NFSVERS_A,
# $QEMU_DIR/mnt/b with NFSVERS_B); then the job runs, its exit status goes to the host through 9p, and the guest
# powers off.
# As a node of a cluster (../vm.py): QEMU_NAME names it (its hostname, so its NFSv4 client identity), QEMU_IP is
# its address on the cluster's network (the second NIC; the first reaches the host's 127.0.0.1 as 10.0.2.2),
# QEMU_SERVE=0 makes it a client only, QEMU_NFS_SERVER the address its mounts come from, NFSVERS_B=none leaves out
# the second mount.
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
"$BB" hostname "${QEMU_NAME:-qemunfs}"
modprobe -d "$Q/modroot" -a virtio_blk virtio_net ext4 nfsd nfsv3 nfsv4 || log "modprobe failed"
if [ -n "${QEMU_IP:-}" ]; then
  "$BB" ip addr add 10.0.2.15/24 dev eth0 && "$BB" ip link set eth0 up   # qemu's user network: the host
  "$BB" ip addr add "$QEMU_IP" dev eth1 && "$BB" ip link set eth1 up     # the cluster's network
fi
log "modules loaded"
mount -t nfsd nfsd /proc/fs/nfsd
mount -t rpc_pipefs sunrpc /var/lib/nfs/rpc_pipefs
if [ "${QEMU_SERVE:-1}" = 1 ]; then
  mount -t ext4 /dev/vda "$Q/mnt/export" || log "mounting the export's disk failed"
  rm -rf "$Q/mnt/export/lost+found"; chmod 1777 "$Q/mnt/export"
  log "export's disk mounted"
  rpcbind -w 2>/dev/null || rpcbind
  rpc.statd --no-notify 2>&1
  "$NKS/usr/sbin/exportfs" -o rw,no_root_squash,sync,no_subtree_check,fsid=0 "${QEMU_EXPORT_TO:-127.0.0.1}:$Q/mnt/export"
  "$NKS/usr/sbin/rpc.mountd" --manage-gids 2>&1
  # nfsdcld with an empty recovery store: "no clients to reclaim", so no NFSv4 grace period, if it watches for
  # nfsd's pipe (inotify) before nfsd starts. Whatever happens, the job never starts inside a grace period, where
  # every OPEN waits.
  "$NKS/usr/sbin/nfsdcld" -F -p /var/lib/nfs/rpc_pipefs -s /var/lib/nfs/nfsdcld &
  cld=$!
  for _ in $(seq 100); do ls -l /proc/$cld/fd 2>/dev/null | grep -q inotify && break; sleep 0.1; done
  log "nfsdcld ready"
  # Lease and grace period of 10 s: a node cut off for longer loses its NFSv4 lease (see tests/test_nfs_cluster.py).
  "$NKS/usr/sbin/rpc.nfsd" -G 10 -L 10 8 2>&1 || log "rpc.nfsd failed"
  for _ in $(seq 150); do [ "$(cat /proc/fs/nfsd/v4_end_grace)" = Y ] && break; sleep 0.1; done
else
  rpcbind -w 2>/dev/null || rpcbind
fi
mount_client() {  # mount_client DIR VERSION
  server=${QEMU_NFS_SERVER:-127.0.0.1}
  if [ "$2" = 3 ]; then src="$server:$Q/mnt/export"; else src="$server:/"; fi
  mount -t nfs -o "vers=$2,nosharecache${NFSOPTS:+,$NFSOPTS}" "$src" "$1" || log "mounting $1 (NFS $2) failed"
}
mount_client "$Q/mnt/a" "${NFSVERS_A:-4.2}"
[ "${NFSVERS_B:-3}" != none ] && mount_client "$Q/mnt/b" "${NFSVERS_B:-3}"
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
