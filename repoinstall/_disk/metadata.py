"""Reading a dist-info's METADATA header and naming dist-info directories."""

from __future__ import annotations


def parse_metadata(data: bytes) -> tuple[str, str] | None:
    """(Name, Version) from the header block of a METADATA file; ``None`` if either is missing."""
    name = version = None
    for raw in data.split(b"\n"):
        line = raw.rstrip(b"\r")
        if not line:
            break
        if line[:5].lower() == b"name:":
            name = line[5:].strip().decode("utf-8", "replace")
        elif line[:8].lower() == b"version:":
            version = line[8:].strip().decode("utf-8", "replace")
    if not name or not version:
        return None
    return name, version


def dist_info_name(name: str, version: str) -> str:
    """The dist-info directory a wheel built today would use (binary distribution format naming)."""
    return f"{name.replace('-', '_')}-{version}.dist-info"
