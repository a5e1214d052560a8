#!/bin/sh
# usage (in a cluster node, as its job): agent.sh
# Runs what the host asks on the node's second serial port (/dev/ttyS1, a unix socket on the host: ../vm.py),
# one request a line: "ID COMMAND" runs COMMAND (sh) in the background, its output into $VM_LOGS/ID.log on the
# host's / (9p), then answers "@done ID STATUS"; "poweroff" ends the job (init.sh unmounts and powers off).
# Answers "@ready" first: the host measures power-on to job start by it.
BB=$QEMU_DIR/debs/bb/bin/busybox
# The port stays open from here on: a serial port nobody has open drops what arrives.
exec 3<>/dev/ttyS1
"$BB" stty raw -echo <&3
# Dirty pages of the logs reach the host within a second or two: the host reads a pod's log while it runs.
echo 50 >/proc/sys/vm/dirty_writeback_centisecs; echo 100 >/proc/sys/vm/dirty_expire_centisecs
say() { echo "$*" >&3; }
say "@ready $(cut -d' ' -f1 /proc/uptime)"
while IFS= read -r line <&3; do
  id=${line%% *}
  command=${line#* }
  case "$id" in
    poweroff) break ;;
    '') continue ;;
  esac
  (
    sh -c "$command" >"$VM_LOGS/$id.log" 2>&1 </dev/null 3>&-
    status=$?
    sync  # the log is whole on the host before the host reads it
    say "@done $id $status"
  ) &
done
say "@bye"
