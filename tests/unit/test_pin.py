"""Pins as values: the one text form a kept closure and a lock tree's ``lock.json`` hold, and lock tree names."""

from __future__ import annotations

import json

from repoinstall._disk.identity import TreeKind, kind_of, legacy_lock_name, lock_name
from repoinstall._disk.pin import Pin, closure_key, pins_of

SHA = "a" * 64


def test_a_pin_is_kept_as_the_line_an_installer_reads_and_read_back_the_same() -> None:
    pins = (
        Pin("foo", "1.0", "https://h/foo-1.0-py3-none-any.whl", (f"sha256:{SHA}",)),
        Pin("foo-bar", "2.0", "", (f"sha256:{SHA}", f"sha256:{'b' * 64}")),
    )
    lines = [pin.line() for pin in pins]
    assert lines[0] == f"foo @ https://h/foo-1.0-py3-none-any.whl --hash=sha256:{SHA}"
    assert lines[1] == f"foo-bar==2.0 --hash=sha256:{SHA} --hash=sha256:{'b' * 64}"
    # Lines and members sorted apart ("foo @" before "foo-bar", "foo-bar==" before "foo=="): matched by name.
    assert pins_of(sorted(lines), sorted(pin.member for pin in pins)) == pins
    assert pins[0].sha256 == SHA and pins[1].sha256 is None


def test_kept_lines_that_are_not_their_members_pins_are_no_closure() -> None:
    line = f"foo @ https://h/foo-1.0-py3-none-any.whl --hash=sha256:{SHA}"
    assert pins_of([line], ["bar==1.0"]) is None
    assert pins_of([line], ["foo==1.0", "bar==1.0"]) is None
    assert pins_of([f"foo==2.0 --hash=sha256:{SHA}"], ["foo==1.0"]) is None
    assert pins_of([], []) is None


def test_a_pin_keeps_no_credentials_where_it_is_public() -> None:
    pin = Pin("foo", "1.0", "https://user:pw@h/foo-1.0-py3-none-any.whl", (f"sha256:{SHA}",))
    assert pin.public().url == "https://h/foo-1.0-py3-none-any.whl"


def test_the_closure_key_is_of_names_versions_and_hashes_only() -> None:
    one = Pin("foo", "1.0", "https://a/foo-1.0-py3-none-any.whl", (f"sha256:{SHA}",))
    assert closure_key([one]) == closure_key([one.__class__("foo", "1.0", "file:///w/x.whl", one.hashes)])
    assert closure_key([one]) != closure_key([Pin("foo", "1.0", one.url, (f"sha256:{'b' * 64}",))])


def test_a_lock_tree_is_named_for_what_it_holds_and_a_digest_and_either_name_is_a_lock_trees() -> None:
    key = "0123456789abcdef" * 4
    assert lock_name(key, ["pydantic", "requests"]) == "locked-pydantic-requests-0123456789"
    many = lock_name(key, [f"project-number-{n}" for n in range(10)])
    assert many.endswith("-and-8-more-0123456789") and len(many) < 80
    for name in (lock_name(key, ["requests"]), many, legacy_lock_name(key)):
        assert kind_of(name) is TreeKind.LOCKED, name
    assert legacy_lock_name(key) == "locked-0123456789abcdef"
    assert kind_of("locked-requests") is kind_of("requests-0123456789") is TreeKind.REQUIREMENT


def test_index_pages_give_each_files_sha256() -> None:
    from repoinstall._index.simple import JSON_TYPE, parse_page

    html = f'<a href="../../foo-1.0-py3-none-any.whl#sha256={SHA.upper()}">f</a><a href="foo-1.0.tar.gz#md5=0">s</a>'
    wheel, sdist = parse_page(html.encode(), "text/html", "https://h/simple/foo/")
    assert (wheel.url, wheel.sha256, sdist.sha256) == ("https://h/foo-1.0-py3-none-any.whl", SHA, None)
    document = {"files": [{"filename": "foo-1.0.tar.gz", "url": "x.tar.gz", "hashes": {"sha256": SHA}}]}
    [one] = parse_page(json.dumps(document).encode(), JSON_TYPE, "https://h/simple/foo/")
    assert one.sha256 == SHA
    document["files"][0]["hashes"] = {"sha256": "not hex"}
    assert parse_page(json.dumps(document).encode(), JSON_TYPE, "https://h/simple/foo/")[0].sha256 is None
