"""Names, versions and the environment tag: our shortcuts agree with packaging, the tag cache never lies."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.tags import sys_tags
from packaging.utils import canonicalize_name, canonicalize_version
from packaging.version import Version

from repoinstall._disk import envtag as _envtag
from repoinstall._disk.identity import TreeId, TreeKind, canonical_name, canonical_version, kind_of

NAMES = ["Adaptor_A", "a.b-c", "A__B..c--d", "x", "Zope.Interface", "foo_-_bar", "UPPER", "a1.2_3"]
VERSIONS = [
    "1",
    "1.0",
    "1.0.0",
    "0",
    "0.0",
    "2.0.0.0",
    "1.2.3",
    "1!2.0",
    "1.0rc1",
    "1.0a0",
    "1.0.0b2",
    "1.0.post0",
    "1.0.post3.dev1",
    "1.0.dev0",
    "2.0+local.1",
    "1.0.0+ABC",
    "10.20.0.0",
    "1.0-1",
    "v1.0",
]


@pytest.mark.parametrize("name", NAMES)
def test_canonical_name_is_packagings(name: str) -> None:
    assert canonical_name(name) == canonicalize_name(name)


@pytest.mark.parametrize("text", VERSIONS)
def test_canonical_version_is_packagings(text: str) -> None:
    assert canonical_version(Version(text)) == canonicalize_version(Version(text), strip_trailing_zero=True)


def test_environment_tag_is_the_first_sys_tag_with_a_libc_level() -> None:
    every = list(sys_tags())
    first = next((t for t in every if t.platform.startswith(("manylinux_", "musllinux_"))), every[0])
    assert first.interpreter == every[0].interpreter and first.abi == every[0].abi
    assert _envtag.compute() == f"{first.interpreter}-{first.abi}-{first.platform}"


def test_environment_tag_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    expected = _envtag.compute()
    _envtag.environment_tag.cache_clear()
    assert _envtag.environment_tag() == expected
    path = Path(_envtag.cache_path(_envtag.fingerprint()))
    assert path.read_text().splitlines() == [_envtag.fingerprint(), expected]
    # A cache written for another interpreter build, or garbage, is never believed.
    for stale in (f"another interpreter\n{expected}x\n", "", "\x00\xff", f"{_envtag.fingerprint()}\n../../etc\n"):
        path.write_text(stale, errors="surrogateescape")
        _envtag.environment_tag.cache_clear()
        assert _envtag.environment_tag() == expected
        assert path.read_text().splitlines() == [_envtag.fingerprint(), expected]  # and rewritten right
    _envtag.environment_tag.cache_clear()


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("requests", TreeKind.REQUIREMENT),
        ("together-0123456789abcdef", TreeKind.SET),
        ("together-ai", TreeKind.REQUIREMENT),
        ("locked-0123456789abcdef", TreeKind.LOCKED),  # a lock's tree as recorded before: still a lock's
        ("locked-numpy-pandas-0123456789", TreeKind.LOCKED),
        ("locked-in", TreeKind.REQUIREMENT),
    ],
)
def test_a_tree_id_carries_its_kind_read_once_off_its_name(name: str, kind: TreeKind) -> None:
    tid = TreeId("cp311-cp311-linux_x86_64", name, Version("1"))
    assert tid.kind is kind_of(name) is kind
    assert tid.kind.own_metapackage is (kind is not TreeKind.REQUIREMENT)
