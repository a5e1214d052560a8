"""The tags a tree's image gets: the tree's (its index) and each platform's own, within OCI's tag rules."""

from __future__ import annotations

import pytest
from packaging.version import Version

from repoinstall._disk.identity import TreeId
from repoinstall._oci.reference import TAG, platform_prefix, platform_tag, tag_for

ENVS = ["cp311-cp311-manylinux_2_36_x86_64", "cp311-cp311-manylinux_2_36_aarch64", "cp313-cp313t-win_amd64",
        "py3-none-" + "very_long_platform_" * 4]  # fmt: skip


@pytest.mark.parametrize("env", ENVS)
@pytest.mark.parametrize("name", ["pandas", "a-" * 70 + "b"])
def test_a_platform_tag_is_the_trees_tag_and_its_platform(env: str, name: str) -> None:
    tid = TreeId(env, name, Version("2.2.3"))
    tag, own = tag_for(tid), platform_tag(tid)
    assert TAG.match(tag) and TAG.match(own) and len(own) <= 128
    assert own.startswith(platform_prefix(tid)) and "--" not in tag
    if len(tag) + len(env) < 100:
        assert own == f"{tag}--{env.split('-', 2)[2]}"
    # Another platform of the same tree shares the prefix; another tree does not.
    other = TreeId(env.replace("x86_64", "aarch64"), name, Version("2.2.3"))
    assert platform_prefix(other) == platform_prefix(tid)
    assert not platform_tag(TreeId(env, name + "x", Version("2.2.3"))).startswith(platform_prefix(tid))
    assert not platform_tag(TreeId(env, name, Version("2.2.30"))).startswith(platform_prefix(tid))


@pytest.mark.parametrize("env", ENVS)
@pytest.mark.parametrize("name", ["pandas", "a-" * 70 + "b"])
def test_a_wheels_tag_is_apart_from_every_image_tag(env: str, name: str) -> None:
    from repoinstall._oci.reference import wheels_tag

    tid = TreeId(env, name, Version("2.2.3"))
    found = wheels_tag(tid)
    assert TAG.match(found) and len(found) <= 128
    # Not listed among the index's platforms, and never any tree's image tag or platform tag.
    assert not found.startswith(platform_prefix(tid)) and found not in (tag_for(tid), platform_tag(tid))
    assert found.endswith("--" + platform_tag(tid).rsplit("--", 1)[1])
    if len(tag_for(tid)) + len(env) < 90:
        assert found == f"{tag_for(tid)}.wheels--{env.split('-', 2)[2]}"
