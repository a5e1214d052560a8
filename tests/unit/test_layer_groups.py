"""Which distributions share a layer of a tree's image (:func:`repoinstall._oci.groups.grouped`), and how a layer
names the distributions it holds: written canonically, read back strictly (one line for anything else)."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from repoinstall._oci import image as _image
from repoinstall._oci.groups import BIG, CAP, grouped
from repoinstall._oci.layer import Layer, Refused
from repoinstall._store.identity import DistId

ENV = "cp311-cp311-manylinux_2_36_x86_64"


def _sizes(count: int, big: int = 0, seed: int = 0) -> dict[str, int]:
    """``count`` distributions of a few KB to a few MB, ``big`` of them (spread through the names) above BIG."""
    chance = random.Random(seed)
    sizes = {f"dist-{n:04d}": chance.randrange(1000, BIG) for n in range(count)}
    for name in chance.sample(sorted(sizes), big):
        sizes[name] = BIG + chance.randrange(1, 100 << 20)
    return sizes


@pytest.mark.parametrize("count", [0, 1, 2, CAP - 1, CAP])
def test_a_tree_within_the_cap_keeps_one_layer_per_distribution(count: int) -> None:
    sizes = _sizes(count, big=min(count, 3))
    assert grouped(sizes) == [(name,) for name in sorted(sizes)]


@pytest.mark.parametrize(
    ("count", "big"), [(CAP + 1, 0), (201, 0), (300, 1), (300, 12), (1000, 40), (5000, 3), (250, 99), (400, 180)]
)
def test_a_larger_tree_is_grouped_within_the_cap_its_big_distributions_alone(count: int, big: int) -> None:
    sizes = _sizes(count, big)
    layers = grouped(sizes)
    assert len(layers) <= CAP
    # Every distribution in exactly one layer; layers in order of their first name.
    held = [name for layer in layers for name in layer]
    assert sorted(held) == sorted(sizes) and len(held) == len(set(held))
    assert layers == sorted(layers)
    bigs = sorted((name for name in sizes if sizes[name] > BIG), key=lambda name: (-sizes[name], name))
    alone = bigs[: CAP - 1]  # the largest, if there are more big ones than layers to spare
    assert all((name,) in layers for name in alone)
    # The rest: runs of consecutive names (in name order), each as long as the first but the last, two or more.
    runs = [layer for layer in layers if layer[0] not in alone]
    rest = sorted(set(sizes) - set(alone))
    assert [name for run in runs for name in run] == rest
    assert {len(run) for run in runs[:-1]} <= {len(runs[0])} and len(runs[-1]) <= len(runs[0])
    assert len(runs[0]) >= 2
    # The fewest per run that fits: one fewer each would not.
    shorter = len(runs[0]) - 1
    assert len(alone) + -(-len(rest) // shorter) > CAP


def test_grouping_depends_on_the_tree_alone() -> None:
    sizes = _sizes(300, big=7, seed=3)
    names = list(sizes)
    expected = grouped(sizes)
    for seed in range(5):  # the order distributions were installed (or listed) in changes nothing
        random.Random(seed).shuffle(names)
        assert grouped({name: sizes[name] for name in names}) == expected
    # A distribution added late in name order leaves the runs before it as they were (their layers stay shared).
    more = grouped({**sizes, "zzz": 10})
    assert more[: len(expected) - 1] == expected[:-1]


def test_a_big_distribution_is_alone_in_a_grouped_tree() -> None:
    sizes = {"numpy": 40 << 20, **{f"small-{n:03d}": 1000 for n in range(CAP)}}
    layers = grouped(sizes)
    assert ("numpy",) in layers and len(layers) <= CAP
    assert grouped({"numpy": 40 << 20, "small": 1}) == [("numpy",), ("small",)]


def _dist(name: str, seed: int) -> DistId:
    return DistId.of(ENV, name, "1.0", f"{seed:064x}")


def _manifest(layers: list[tuple[tuple[DistId, ...], Layer]]) -> bytes:
    config = _image.config(ENV, "root==1.0", _image.Platform("linux", "amd64"), [layer for _, layer in layers])
    return _image.manifest(ENV, "root==1.0", config, layers).data


def _layer(seed: int) -> Layer:
    return Layer("", f"sha256:{seed:064x}", f"sha256:{seed + 1:064x}", 100 + seed)


def test_a_group_is_named_in_one_canonical_annotation_and_read_back() -> None:
    group = (_dist("zeta", 3), _dist("alpha", 1), _dist("mid", 2))
    data = _manifest([((_dist("alone", 9),), _layer(1)), (group, _layer(2))])
    document = json.loads(data)
    one, grouped_layer = document["layers"]
    assert one["annotations"] == {
        _image.NAME: "alone", _image.VERSION: "1.0", _image.SHA256: f"{9:064x}"
    }  # fmt: skip
    assert list(grouped_layer["annotations"]) == [_image.DISTS]
    text = grouped_layer["annotations"][_image.DISTS]
    assert text == json.dumps(
        [{"name": d.name, "sha256": d.sha256, "version": "1.0"} for d in sorted(group)], separators=(",", ":")
    )
    read = _image.read_manifest(data, "sha256:" + "0" * 64, ENV, "here")
    assert [layer.claims for layer in read.layers] == [(_dist("alone", 9),), tuple(sorted(group))]
    diff_id = "sha256:" + "e" * 64
    dists = read.layers[1]._replace(diff_id=diff_id).dists
    assert dists == tuple(DistId.of_layer(ENV, d.name, "1.0", diff_id) for d in sorted(group))
    assert all(dist.layer and dist.sha256 == "e" * 64 for dist in dists)


def _entries(*dists: tuple[str, str, str]) -> str:
    return json.dumps([{"name": n, "version": v, "sha256": s} for n, v, s in dists])


A, B = ("alpha", "1.0", "a" * 64), ("beta", "2.0", "b" * 64)
ESCAPE = "\x1b[2J\x1b]0;owned\x07"
GARBAGE: dict[str, Any] = {
    "no annotations": None,
    "neither form": {"other": "x"},
    "both forms": {_image.NAME: "alpha", _image.VERSION: "1.0", _image.SHA256: "a" * 64, _image.DISTS: _entries(A, B)},
    "not a string": {_image.DISTS: ["alpha"]},
    "not JSON": {_image.DISTS: "[{"},
    "nested deep": {_image.DISTS: "[" * 100_000 + "]" * 100_000},
    "too long": {_image.DISTS: " " * (_image.DISTS_LIMIT + 1) + _entries(A, B)},
    "an object": {_image.DISTS: json.dumps({"name": "alpha"})},
    "one alone": {_image.DISTS: _entries(A)},
    "a key more": {_image.DISTS: json.dumps([{"name": "alpha", "version": "1", "sha256": "a" * 64, "x": 1}, B])},
    "a key less": {_image.DISTS: json.dumps([{"name": "alpha", "version": "1"}, B])},
    "a number": {_image.DISTS: json.dumps([{"name": "alpha", "version": 1, "sha256": "a" * 64}, B])},
    "unsorted": {_image.DISTS: _entries(B, A)},
    "twice": {_image.DISTS: _entries(A, A)},
    "twice by spelling": {_image.DISTS: _entries(("Alpha", "1.0", "c" * 64), A)},
    "bad sha256": {_image.DISTS: _entries(A, ("beta", "2.0", "B" * 64))},
    "bad version": {_image.DISTS: _entries(A, ("beta", "2.0" + ESCAPE, "b" * 64))},
    "bad name": {_image.DISTS: _entries(A, ("beta/../../x" + ESCAPE, "2.0", "b" * 64))},
    "bad single": {_image.NAME: "alpha" + ESCAPE, _image.VERSION: "1.0", _image.SHA256: "a" * 64},
}


@pytest.mark.parametrize("case", list(GARBAGE))
def test_a_layer_naming_its_distributions_otherwise_is_refused_with_one_line(case: str) -> None:
    data = json.loads(_manifest([((_dist("alpha", 1), _dist("beta", 2)), _layer(1))]))
    data["layers"][0]["annotations"] = GARBAGE[case]
    if GARBAGE[case] is None:
        del data["layers"][0]["annotations"]
    with pytest.raises(Refused) as refused:
        _image.read_manifest(json.dumps(data).encode(), "sha256:" + "0" * 64, ENV, "REG/repo@sha256:x")
    message = str(refused.value)
    assert message.startswith("REG/repo@sha256:x: layer sha256:") and message.endswith("refused"), message
    assert "\n" not in message and "\x1b" not in message and "\x07" not in message, message
    assert len(message) < 400, message


def test_one_distribution_in_two_layers_is_refused() -> None:
    data = _manifest([((_dist("alpha", 1), _dist("beta", 2)), _layer(1)), ((_dist("beta", 3),), _layer(2))])
    image = _image.read_manifest(data, "sha256:" + "0" * 64, ENV, "here")
    config = _image.config(ENV, "root==1.0", _image.Platform("linux", "amd64"), [_layer(1), _layer(2)])
    with pytest.raises(Refused, match="beta is in more than one layer"):
        _image.with_config(image, config.data, ENV, _image.Platform("linux", "amd64"), "here")
