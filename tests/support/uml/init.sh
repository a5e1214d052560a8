#!/bin/sh
# PID 1 of the guest: the in-guest kernel nfsd exports one ext4 disk, which the kernel NFS client mounts twice
# (two clients with their own caches: $UML_DIR/mnt/a with NFSVERS_A, $UML_DIR/mnt/b with NFSVERS_B); then the
# job runs, its exit status goes to the host through hostfs, and the guest powers off.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
U=$UML_DIR
NKS=$U/debs/nfsks
log() { echo "[uml-init] $*"; }
mount -t proc proc /proc
mount -t sysfs sys /sys
mountpoint -q /dev || mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm 2>/dev/null; mount -t devpts devpts /dev/pts; mount -t tmpfs shm /dev/shm
mount -t tmpfs run /run
mount -t tmpfs varlibnfs /var/lib/nfs
mkdir -p /var/lib/nfs/sm /var/lib/nfs/sm.bak /var/lib/nfs/rpc_pipefs /run/rpcbind
ip link set lo up
hostname umlnfs
for m in nfsd nfsv3 nfsv4; do modprobe -d "$U/modroot" $m || log "modprobe $m failed"; done
mount -t nfsd nfsd /proc/fs/nfsd
mount -t rpc_pipefs sunrpc /var/lib/nfs/rpc_pipefs
mount -t ext4 /dev/ubda "$U/mnt/export" || log "mount ubda failed"
rm -rf "$U/mnt/export"/* 2>/dev/null; chmod 1777 "$U/mnt/export"   # a fresh export for every run
rpcbind -w 2>/dev/null || rpcbind
rpc.statd --no-notify 2>&1
"$NKS/usr/sbin/exportfs" -o rw,no_root_squash,sync,no_subtree_check,fsid=0 "127.0.0.1:$U/mnt/export"
"$NKS/usr/sbin/rpc.mountd" --manage-gids 2>&1
# nfsdcld with an empty recovery store: "no clients to reclaim", so no 10 s NFSv4 grace period.
mkdir -p /var/lib/nfs/nfsdcld; "$NKS/usr/sbin/nfsdcld" -F -p /var/lib/nfs/rpc_pipefs -s /var/lib/nfs/nfsdcld &
sleep 0.5
"$NKS/usr/sbin/rpc.nfsd" -G 10 -L 10 8 2>&1 || log "rpc.nfsd failed"
mount_client() {  # mount_client DIR VERSION
  if [ "$2" = 3 ]; then src="127.0.0.1:$U/mnt/export"; else src="127.0.0.1:/"; fi
  mount -t nfs -o "vers=$2,nosharecache${NFSOPTS:+,$NFSOPTS}" "$src" "$1" || log "mount $1 failed"
}
mount_client "$U/mnt/a" "${NFSVERS_A:-4.2}"
mount_client "$U/mnt/b" "${NFSVERS_B:-3}"
rc=0
if [ -n "${UMLJOB:-}" ]; then log "job start"; sh "$UMLJOB"; rc=$?; log "job exit code $rc"; fi
[ -n "${UMLRC:-}" ] && echo $rc > "$UMLRC"   # visible on the host through hostfs
umount "$U/mnt/a" "$U/mnt/b" 2>/dev/null
sync
python3 -c 'import ctypes; ctypes.CDLL(None).reboot(0x4321fedc)'   # RB_POWER_OFF
