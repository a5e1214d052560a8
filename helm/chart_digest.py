"""The digest of helm/ for the chart's version: `python helm/chart_digest.py` prints `VERSION sha256:HEX` for the
`version` in helm/repoinstall/Chart.yaml, the line to add to helm/chart-digests.txt after a bump; `--check` fails in
one line when helm/ is not the tree recorded for that version (a file under helm/ changed without a bump).

The digest is sha256 over a manifest of every file under helm/ but the digests file itself (and Python's caches):
one line `<sha256 of its bytes>  <path relative to helm/>` per file, sorted by path, so it is the same on every
checkout and needs no git (CI clones may lack tags): `cd helm && find . -type f ! -name chart-digests.txt -printf
'%P\\n' | LC_ALL=C sort | xargs sha256sum | sha256sum` prints the same hex."""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import yaml

HELM = Path(__file__).parent
DIGESTS = "chart-digests.txt"


def digest(root: Path) -> str:
    """`sha256:HEX` of the files under root (relative paths and bytes), the digests file and caches left out."""
    files = sorted(
        (path.relative_to(root).as_posix().encode(), path)
        for path in root.rglob("*")
        if path.is_file() and path.relative_to(root).as_posix() != DIGESTS and "__pycache__" not in path.parts
    )
    manifest = b"".join(hashlib.sha256(path.read_bytes()).hexdigest().encode() + b"  " + name + b"\n"
                        for name, path in files)  # fmt: skip
    return "sha256:" + hashlib.sha256(manifest).hexdigest()


def recorded(root: Path) -> dict[str, str]:
    """The digests file's `VERSION sha256:HEX` lines, version -> digest, in file order (`#` starts a comment)."""
    lines = (line.split("#", 1)[0].split() for line in (root / DIGESTS).read_text().splitlines())
    return {fields[0]: fields[1] for fields in lines if fields}


def chart_version(root: Path) -> str:
    return str(yaml.safe_load((root / "repoinstall" / "Chart.yaml").read_text())["version"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 unless the digest is recorded for the version")
    parser.add_argument("--root", type=Path, default=HELM, help="the helm/ directory (default: this script's)")
    args = parser.parse_args(argv)
    version, found = chart_version(args.root), digest(args.root)
    if not args.check:
        print(version, found)
        return 0
    if recorded(args.root).get(version) != found:
        print(
            f"helm/ changed but its digest is not recorded for chart version {version}: bump `version` in "
            f"helm/repoinstall/Chart.yaml and add the line `python helm/chart_digest.py` prints to helm/{DIGESTS}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
