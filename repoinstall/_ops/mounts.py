"""The mount a repo lives on, as the kernel describes it, and how late a peer's heartbeat can look from here.

The lock's liveness rests on a waiter reading the holder's record and seeing its nonce change. On NFS with
close-to-open consistency (the default), every read opens the record, and the open revalidates its attributes,
so a change is seen at once. With ``nocto`` the client may serve the record from its attribute and page cache
for up to ``acregmax`` seconds; ``noac`` (or ``actimeo=0``) caches nothing. A live holder is never taken over as
long as ``--stale-after`` exceeds one heartbeat plus that lag, plus a heartbeat of margin.
"""

from __future__ import annotations

import os
from typing import NamedTuple

#: sshfs keeps attributes this long unless told otherwise (its cache_timeout).
_SSHFS_CACHE = 20.0


class Mount(NamedTuple):
    point: str
    fstype: str
    options: dict[str, str]

    def flag(self, name: str) -> bool:
        return name in self.options

    def seconds(self, name: str, default: float) -> float:
        try:
            return float(self.options[name])
        except (KeyError, ValueError):
            return default


class Lag(NamedTuple):
    """How late a peer's change to a small file can look from this client, in seconds, and why."""

    seconds: float
    description: str


def _unescape(field: str) -> str:
    return field.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")


def mount_of(
    path: str, mountinfo: str = "/proc/self/mountinfo", mountstats: str = "/proc/self/mountstats"
) -> Mount | None:
    """The mount holding ``path`` (the longest mount point above it), with NFS options as the client uses them
    (``mountstats`` lists the attribute-cache times that ``mountinfo`` leaves out when they are the defaults)."""
    real = os.path.realpath(path)
    best: Mount | None = None
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                fields, _, rest = line.partition(" - ")
                parts, tail = fields.split(), rest.split()
                if len(parts) < 6 or len(tail) < 3:
                    continue
                point = _unescape(parts[4])
                inside = real == point or real.startswith(point.rstrip("/") + "/")
                if inside and (best is None or len(point) >= len(best.point)):
                    best = Mount(point, tail[0], _options(f"{parts[5]},{tail[2]}"))
    except OSError:
        return None
    if best is not None and best.fstype.startswith("nfs"):
        stats = _nfs_stats_options(best.point, mountstats)
        best = best._replace(options={**best.options, **stats})
    return best


def _options(text: str) -> dict[str, str]:
    found = {}
    for item in text.split(","):
        key, _, value = item.partition("=")
        if key:
            found[key] = value
    return found


def _nfs_stats_options(point: str, mountstats: str) -> dict[str, str]:
    try:
        with open(mountstats, encoding="utf-8", errors="replace") as stats:
            text = stats.read()
    except OSError:
        return {}
    for block in text.split("\ndevice "):
        head, _, body = block.partition("\n")
        if f" mounted on {point} with fstype nfs" in f" {head}":
            for line in body.splitlines():
                if line.strip().startswith("opts:"):
                    return _options(line.split(":", 1)[1].strip())
    return {}


def heartbeat_lag(mount: Mount | None) -> Lag | None:
    """How late a holder's heartbeat can look from this client; ``None`` if this filesystem is not known."""
    if mount is None:
        return None
    kind = mount.fstype
    if kind.startswith("nfs"):
        acregmax = mount.seconds("acregmax", 60.0)
        acdirmax = mount.seconds("acdirmax", 60.0)
        cache = (
            f"acregmax {acregmax:g} s, acdirmax {acdirmax:g} s, lookupcache {mount.options.get('lookupcache', 'all')}"
        )
        if mount.flag("noac") or acregmax == 0:
            return Lag(0.0, f"{kind}: no attribute cache (noac); {cache}")
        if mount.flag("nocto"):
            return Lag(
                acregmax, f"{kind}: close-to-open off (nocto), a heartbeat can look {acregmax:g} s late; {cache}"
            )
        return Lag(0.0, f"{kind}: close-to-open on, a heartbeat is seen at the next read; {cache}")
    if kind == "fuse.sshfs":
        return Lag(_SSHFS_CACHE, f"{kind}: attributes cached about {_SSHFS_CACHE:g} s")
    if kind.startswith("fuse"):
        return Lag(1.0, f"{kind}: attributes cached about 1 s (FUSE's default)")
    if kind in ("ceph", "ext4", "xfs", "btrfs", "tmpfs", "overlay", "zfs"):
        return Lag(0.0, f"{kind}: coherent from this client")
    return None


def safe_stale_after(heartbeat: float, lag: Lag) -> float:
    """The least ``--stale-after`` that never takes over a live holder: one heartbeat, the lag, one more heartbeat."""
    return 2 * heartbeat + lag.seconds
