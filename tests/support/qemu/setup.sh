#!/bin/sh
# usage: setup.sh DIR
# Prepares DIR for the qemu guest with the kernel NFS server and client (see ../qemu.sh), from Debian packages
# only: qemu-system-x86, rpcbind, nfs-common, kmod and e2fsprogs are installed; Debian's generic kernel
# (linux-image-*-amd64: nfs, nfsd, 9p, virtio and ext4 as modules), busybox-static and nfs-kernel-server are
# downloaded and unpacked into DIR, not installed (nothing on the host starts an NFS server).
# Idempotent: DIR/ready names the version of this script that prepared DIR, which is then left alone (what is
# missing on the host is still installed); an interrupted or older preparation is picked up where it stopped.
set -eu
D=${1:?usage: setup.sh DIR}
export DEBIAN_FRONTEND=noninteractive
if ! command -v qemu-system-x86_64 >/dev/null 2>&1 || ! command -v rpcbind >/dev/null 2>&1 \
   || ! command -v mount.nfs >/dev/null 2>&1 || ! command -v mkfs.ext4 >/dev/null 2>&1 \
   || ! command -v depmod >/dev/null 2>&1; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends qemu-system-x86 rpcbind nfs-common kmod e2fsprogs >/dev/null
fi
STAMP=$(cksum <"$0")
[ "$(cat "$D/ready" 2>/dev/null)" = "$STAMP" ] && exit 0
rm -f "$D/ready"
mkdir -p "$D/debs" "$D/mnt/a" "$D/mnt/b" "$D/mnt/c" "$D/mnt/export" "$D/modroot/lib/modules" "$D/run"
D=$(cd "$D" && pwd)
cd "$D/debs"
chmod 0777 .  # apt-get download runs as _apt where it can
unpack() {  # unpack PACKAGE DIR: download the package and unpack it into DIR (whole, or not at all)
  [ -d "$2" ] && return 0
  rm -rf "$2.part" ./"$1"_*.deb
  apt-get download "$1" >/dev/null 2>&1 || { apt-get update -qq && apt-get download "$1" >/dev/null; }
  dpkg -x ./"$1"_*.deb "$2.part"
  rm -f ./"$1"_*.deb
  mv "$2.part" "$2"
}
KPKG=$(apt-cache depends linux-image-amd64 | sed -n 's/^ *Depends: \(linux-image-[0-9].*-amd64\)$/\1/p' | head -1)
[ -n "$KPKG" ] || { apt-get update -qq; KPKG=$(apt-cache depends linux-image-amd64 | sed -n 's/^ *Depends: \(linux-image-[0-9].*-amd64\)$/\1/p' | head -1); }
unpack "$KPKG" kernel
unpack busybox-static bb
unpack nfs-kernel-server nfsks
KVER=$(ls kernel/lib/modules)
ln -sfn "$D/debs/kernel/lib/modules/$KVER" "$D/modroot/lib/modules/$KVER"
depmod -b "$D/modroot" "$KVER"
cp "kernel/boot/vmlinuz-$KVER" "$D/vmlinuz"
# The initramfs: busybox, the modules that reach the host's / over 9p, and an init that mounts it and hands over
# to init.sh there (QEMU_INIT).
R=$D/initramfs
rm -rf "$R"
mkdir -p "$R/bin" "$R/proc" "$R/dev" "$R/newroot" "$R/mods"
cp bb/bin/busybox "$R/bin/"
for a in sh mount umount insmod switch_root poweroff echo; do ln -sf busybox "$R/bin/$a"; done
MODS="virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci netfs fscache 9pnet 9pnet_virtio 9p"
for m in $MODS; do
  f=$(find "kernel/lib/modules/$KVER/kernel" -name "$m.ko" | head -1)
  [ -n "$f" ] && cp "$f" "$R/mods/"
done
cat > "$R/init" <<INIT
#!/bin/sh
mount -t proc proc /proc
mount -t devtmpfs dev /dev
for m in $MODS; do [ -f /mods/\$m.ko ] && { insmod /mods/\$m.ko || echo "initramfs: insmod \$m failed"; }; done
# cache=loose: the guest is the only one using these files while it runs (kmod needs at least mmap).
mount -t 9p -o trans=virtio,version=9p2000.L,msize=1048576,cache=\${QEMU_9PCACHE:-loose} hostroot /newroot \\
  || { echo "initramfs: mounting the host's / over 9p failed"; poweroff -f; }
umount /proc /dev
exec switch_root /newroot "\$QEMU_INIT"
INIT
chmod +x "$R/init"
(cd "$R" && find . | "$D/debs/bb/bin/busybox" cpio -o -H newc 2>/dev/null | gzip >"$D/initrd.gz.part")
mv "$D/initrd.gz.part" "$D/initrd.gz"
rm -rf "$R"
echo "$STAMP" >"$D/ready"
echo "ready: $D (kernel $KVER)"
