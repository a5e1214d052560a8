#!/bin/sh
# usage: setup.sh DIR
# Prepares DIR for a User-Mode-Linux guest with the kernel NFS server and client (see ../uml.sh), from Debian
# packages only: rpcbind, nfs-common, kmod and e2fsprogs are installed; user-mode-linux and nfs-kernel-server
# are downloaded and unpacked into DIR (not installed: nothing on the host starts an NFS server).
set -eu
D=${1:?usage: setup.sh DIR}
[ -f "$D/ready" ] && exit 0
mkdir -p "$D/debs" "$D/mnt/a" "$D/mnt/b" "$D/mnt/c" "$D/mnt/export" "$D/modroot/lib/modules" "$D/umldir"
export DEBIAN_FRONTEND=noninteractive
if ! command -v rpcbind >/dev/null 2>&1 || ! command -v mount.nfs >/dev/null 2>&1 || ! command -v mkfs.ext4 >/dev/null 2>&1; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends rpcbind nfs-common kmod e2fsprogs >/dev/null
fi
cd "$D/debs"
chmod 0777 "$D/debs"  # apt-get download runs as _apt where it can
[ -d uml ] || { apt-get download user-mode-linux >/dev/null 2>&1; dpkg -x user-mode-linux_*.deb uml; }
[ -d nfsks ] || { apt-get download nfs-kernel-server >/dev/null 2>&1; dpkg -x nfs-kernel-server_*.deb nfsks; }
K=$(ls uml/usr/lib/uml/modules)
ln -sfn "$D/debs/uml/usr/lib/uml/modules/$K" "$D/modroot/lib/modules/$K"
[ -f "$D/disk.img" ] || { truncate -s 1G "$D/disk.img"; mkfs.ext4 -q -F "$D/disk.img"; }
touch "$D/ready"
echo "ready: $D"
