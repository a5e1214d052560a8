"""The CLI run as another UID with no capability at all (so ``mode 0700`` of another's directory means what it says).

The interpreter may live under ``/root`` (pyenv), which such a UID cannot search: each run happens in its own
mount namespace where ``/root`` is an empty tmpfs with only the interpreter's directory bound back into it, as an
image's interpreter would be readable by any UID. Needs root, ``unshare`` and ``setpriv``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from helpers import cli, isolated_env
from indexserver import IndexServer
from wheels import make_wheel

#: .../versions/X.Y.Z: the interpreter's installation, maybe under /root.
_PYENV = Path(sys.executable).resolve().parents[2]


def available() -> bool:
    return os.geteuid() == 0 and bool(shutil.which("unshare")) and bool(shutil.which("setpriv"))


def run_as(uid: int, gid: int, *args: str | Path, groups: tuple[int, ...] = ()) -> subprocess.CompletedProcess[str]:
    """``repoinstall ARGS`` as ``uid``:``gid`` (plus supplementary ``groups``), without capabilities."""
    extra = f"--groups={','.join(map(str, groups))}" if groups else "--clear-groups"
    become = f'exec setpriv --reuid={uid} --regid={gid} {extra} "$@"'
    if str(_PYENV).startswith("/root/"):
        bound = tempfile.mkdtemp(prefix="repoinstall-interpreter-")
        become = (
            f"mount --bind {_PYENV} {bound} && mount -t tmpfs -o mode=755 tmpfs /root && mkdir -p {_PYENV} && "
            f"mount --bind {bound} {_PYENV} && {become}"
        )
    try:
        return subprocess.run(
            ["unshare", "-m", "sh", "-c", become, "sh", *cli(*args)],
            env=isolated_env(HOME="/tmp"),
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    finally:
        if str(_PYENV).startswith("/root/"):
            os.rmdir(bound)


@contextlib.contextmanager
def shared_repo(group: int) -> Iterator[Path]:
    """A repo directory of a shared ``group`` (a Kubernetes fsGroup), mode 2775, below a directory every UID may
    search (pytest's own tmp dirs are private to root); removed after, whatever modes were left in it."""
    top = Path(tempfile.mkdtemp(prefix="repoinstall-shared-"))
    top.chmod(0o755)
    repo = top / "repo"
    repo.mkdir()
    os.chown(repo, 0, group)
    repo.chmod(0o2775)
    try:
        yield repo
    finally:
        for path in repo.rglob("*"):
            if path.is_dir() and not path.is_symlink():
                with contextlib.suppress(OSError):
                    path.chmod(0o755)
        shutil.rmtree(top, ignore_errors=True)


def serve_app_other_lib(directory: Path) -> IndexServer:
    """An index of app 1.0 and other 1.0, both needing lib 1.0: two trees sharing one stored distribution."""
    make_wheel(directory, "app", "1.0", requires=("lib>=1",))
    make_wheel(directory, "other", "1.0", requires=("lib>=1",))
    make_wheel(directory, "lib", "1.0", modules=2)
    return IndexServer(directory).start()
