#!/bin/sh
# usage: tests/support/uml.sh JOB
# Runs the shell script JOB (a path without spaces) as root inside a User-Mode-Linux guest whose root is the
# host's / (hostfs: same paths, same venv), with the kernel NFS server and two kernel NFS client mounts of one
# export at $UML_DIR/mnt/a (NFSv4.2) and $UML_DIR/mnt/b (NFSv3); the export's own ext4 is $UML_DIR/mnt/export.
# Exit status: the job's (99 if the guest did not report one). One guest per UML_DIR at a time.
# UML_DIR defaults to /var/tmp/repoinstall-uml; uml/setup.sh prepares it (.ci/run does).
set -u
U=${UML_DIR:-/var/tmp/repoinstall-uml}
JOB=${1:?usage: uml.sh JOB}
HERE=$(cd "$(dirname "$0")/uml" && pwd)
if [ ! -f "$U/ready" ]; then
  echo "uml.sh: $U is not prepared: run tests/support/uml/setup.sh $U" >&2
  exit 98
fi
RC=$U/umldir/rc.$$; rm -f "$RC"
"$U/debs/uml/usr/bin/linux.uml" \
  mem=1536M umid=nfs$$ uml_dir="$U/umldir" \
  root=/dev/root rootfstype=hostfs rootflags=/ rw \
  ubd0="$U/disk.img" con=null con0=null,fd:1 \
  init="$HERE/init.sh" UML_DIR="$U" UMLJOB="$JOB" NFSVERS_A="${NFSVERS_A:-4.2}" NFSVERS_B="${NFSVERS_B:-3}" \
  ${NFSOPTS:+NFSOPTS=$NFSOPTS} UMLRC="$RC" </dev/null
rc=$(cat "$RC" 2>/dev/null || echo 99); rm -f "$RC"; exit "$rc"
