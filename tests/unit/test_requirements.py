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
        ("--pre\n", "option line '--pre'"),
        ("--index-url\n", "--index-url takes exactly one URL"),
        ("--index-url a b\n", "--index-url takes exactly one URL"),
        ("--no-index x\n", "--no-index takes no value"),
        ("--trusted-host=\n", "--trusted-host takes exactly one HOST"),
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


def test_index_lines_are_read_as_pip_applies_them(tmp_path: Path) -> None:
    """pip reads a file's index lines in order: --index-url replaces the list so far (its extras included),
    --extra-index-url and --find-links add; every requirement of the file (nested files included) carries them."""
    from repoinstall._options import FileIndex

    (tmp_path / "wheels").mkdir()
    (tmp_path / "nested.txt").write_text("--extra-index-url https://c.example/simple\nc==1\n")
    (tmp_path / "r.txt").write_text(
        "--extra-index-url https://dropped.example/simple\n"
        "-i https://a.example/simple\n"
        "--extra-index-url=https://b.example/simple\n"
        "a==1\n"
        "-r nested.txt\n"
        "--find-links wheels\n"
        "-fhttps://links.example/\n"
        "--trusted-host a.example\n"
    )
    found = read_requirements_file(str(tmp_path / "r.txt"))
    expected = FileIndex(
        "https://a.example/simple",
        ("https://b.example/simple", "https://c.example/simple"),
        (str(tmp_path / "wheels"), "https://links.example/"),
        False,
        ("a.example",),
    )
    assert [(r.name, r.file_index) for r in found] == [("a", expected), ("c", expected)]
    (tmp_path / "none.txt").write_text("--index-url https://a.example/simple\n--no-index\n-f wheels\na==1\n")
    (none,) = read_requirements_file(str(tmp_path / "none.txt"))
    assert none.file_index == FileIndex(None, (), (str(tmp_path / "wheels"),), True, ())
    (tmp_path / "plain.txt").write_text("a==1\n")
    assert read_requirements_file(str(tmp_path / "plain.txt"))[0].file_index is None


def test_a_files_index_lines_replace_and_add_to_pip_configuration(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pip.conf's index and extra index are replaced by a file's --index-url; its extras add to them."""
    from repoinstall._options import FileIndex, InstallOptions
    from repoinstall._pipconfig import forget_settings, index_config

    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = https://conf.example/simple\nextra-index-url = https://extra.example/s\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    for name in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX", "PIP_FIND_LINKS", "PIP_TRUSTED_HOST"):
        monkeypatch.delenv(name, raising=False)
    forget_settings()
    try:
        base = InstallOptions(extra_index_urls=("https://cli.example/simple",), trusted_hosts=("cli.example",))
        assert index_config(base).index_urls == (
            "https://conf.example/simple",
            "https://extra.example/s",
            "https://cli.example/simple",
        )
        adding = base._replace(file_index=FileIndex(extra_index_urls=("https://file.example/simple",)))
        assert index_config(adding).index_urls[-1] == "https://file.example/simple"
        assert len(index_config(adding).index_urls) == 4
        lines = FileIndex("https://file.example/simple", ("https://more.example/simple",), ("/w",), False, ("f",))
        replacing = base._replace(file_index=lines)
        config = index_config(replacing)
        assert config.index_urls == ("https://file.example/simple", "https://more.example/simple")
        assert config.find_links == ("/w",)
        assert config.trusted_hosts == ("cli.example", "f")
        assert index_config(base._replace(file_index=FileIndex(no_index=True))).index_urls == ()
        assert index_config(base._replace(no_index=True, file_index=FileIndex("https://f.example/s"))).index_urls == ()
    finally:
        forget_settings()
