"""Parsing what users ask for: specs and pip-style requirements files."""

from __future__ import annotations

from pathlib import Path

import pytest

from repoinstall import InvalidRequirement, RequirementsFileError
from repoinstall._requirements import collect, parse_spec, read_requirements_file


def test_pinned_and_unpinned() -> None:
    assert str(parse_spec("Adaptor_A==1.0").pinned_version()) == "1.0"
    assert str(parse_spec("adaptor-a===1.0").pinned_version()) == "1.0"
    for spec in ("adaptor-a", "adaptor-a>=1", "adaptor-a==1.*", "adaptor-a==1.0,!=1.1", "adaptor-a~=1.0"):
        assert parse_spec(spec).pinned_version() is None, spec


def test_name_and_extras_are_canonical() -> None:
    requested = parse_spec("Adaptor.A[Fast,extra_two]==1")
    assert requested.name == "adaptor-a"
    assert requested.extras == ("extra-two", "fast")


def test_markers_are_evaluated() -> None:
    assert parse_spec("a==1; python_version >= '3'").marker_applies()
    assert not parse_spec("a==1; sys_platform == 'no-such-platform'").marker_applies()


@pytest.mark.parametrize("spec", ["", "-e .", "--index-url=x", "a/b", "a @ https://127.0.0.1/a.whl", "a==", "a.whl"])
def test_bad_specs(spec: str) -> None:
    with pytest.raises(InvalidRequirement) as caught:
        parse_spec(spec)
    assert "\n" not in str(caught.value)


def test_file_features(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "inner.txt").write_text("c==3\n")
    (tmp_path / "main.txt").write_text(
        "# header\n"
        "a==1  # trailing\n"
        "\n"
        "b\\\n"
        "==2 \\\n"
        "  --hash=sha256:" + "ab" * 32 + " \\\n"
        "  --hash sha256:" + "cd" * 32 + "\n"
        "-r sub/inner.txt\n"
        "--requirement=sub/inner.txt\n"
    )
    found = read_requirements_file(str(tmp_path / "main.txt"))
    assert [r.text for r in found] == ["a==1", "b==2", "c==3", "c==3"]
    assert found[1].hashes == ("sha256:" + "ab" * 32, "sha256:" + "cd" * 32)
    assert found[0].source.endswith("main.txt:2")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("--index-url http://127.0.0.1/\n", "option line '--index-url'"),
        ("-e .\n", "editable installs (-e) are not supported"),
        ("a==1 --no-binary :all:\n", "option '--no-binary'"),
        ("a==1 --hash=nothex\n", "not algorithm:hexdigest"),
        ("-r\n", "takes exactly one file name"),
    ],
)
def test_file_errors(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "r.txt"
    path.write_text(text)
    with pytest.raises((RequirementsFileError, InvalidRequirement)) as caught:
        read_requirements_file(str(path))
    assert words in str(caught.value)
    assert str(path) in str(caught.value)


def test_collect_keeps_order(tmp_path: Path) -> None:
    (tmp_path / "r.txt").write_text("b==1\n")
    assert [r.text for r in collect(["a==1"], [str(tmp_path / "r.txt")])] == ["a==1", "b==1"]


@pytest.mark.parametrize(
    "spec",
    [
        "a==1",
        "Adaptor_A==1.0",
        "a.b-c==2.0.post1",
        "a[x]==1",
        "a[ Y , x ]==1!2.0+local.1",
        "a == 1.0",
        "a[x,x]==1",
        "a==1.0.dev3",
        "A9==01.2",
    ],
)
def test_plain_fast_path_equals_the_full_parser(spec: str) -> None:
    from repoinstall._requirements import _full

    fast = parse_spec(spec)
    full = _full(spec.strip(), "command line", (), "test")
    assert fast.requirement is None, "expected the fast path"
    assert full.requirement is not None
    assert (fast.text, fast.name, fast.extras, fast.pinned_version()) == (
        full.text,
        full.name,
        full.extras,
        full.pinned_version(),
    )
    assert str(fast.pinned_version()) == str(full.pinned_version())


@pytest.mark.parametrize("spec", ["a==1.*", "a==1; python_version>'3'", "a===1.0", "a>=1", "a==1,!=2"])
def test_everything_else_takes_the_full_parser(spec: str) -> None:
    assert parse_spec(spec).requirement is not None


def test_environment_variables_expand_as_pip_expands_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADAPTOR_VERSION", "1.4")
    monkeypatch.setenv("lower_case", "2.0")
    monkeypatch.delenv("NOT_SET", raising=False)
    path = tmp_path / "req.txt"
    path.write_text("adaptor-a==${ADAPTOR_VERSION}  # pinned by the deployment\n")
    assert [r.text for r in read_requirements_file(str(path))] == ["adaptor-a==1.4"]
    for unexpanded in ("adaptor-b==$ADAPTOR_VERSION", "adaptor-c==${lower_case}", "adaptor-d==${NOT_SET}"):
        path.write_text(unexpanded + "\n")  # left as written, as pip leaves it: then not a valid spec
        with pytest.raises(InvalidRequirement):
            read_requirements_file(str(path))
