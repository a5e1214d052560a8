"""Lock files read for this environment: hand-written pylock.toml files and hashed requirements, good and bad.

Every refusal is one RequirementsFileError line (exit 2) naming the file and the key or package; the messages are
asserted whole. Locks made by pip and uv against a real index: tests/test_locks_from_tools.py.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from locks import uv_like_pylock

from repoinstall._disk.envtag import environment_tag
from repoinstall._errors import InvalidInput, RequirementsFileError
from repoinstall._lockfile.environment import Environment, tag_ranks
from repoinstall._lockfile.filenames import sdist_name, wheel_name
from repoinstall._lockfile.hashed import hash_mode, is_hashed_requirements, lock_from_requirements
from repoinstall._lockfile.model import Lock, LockedPackage
from repoinstall._lockfile.read import forget, is_lock_file, read_lock
from repoinstall._options import LockChoice
from repoinstall._requirements import parse_spec, read_requirements_file

A = "a" * 64
B = "b" * 64
C = "c" * 64
#: A made-up interpreter: CPython 3.12 on Linux x86_64, with these wheel tags best first.
LINUX312 = Environment.of(
    {"python_full_version": "3.12.1", "python_version": "3.12", "sys_platform": "linux"},
    ["cp312-cp312-manylinux_2_17_x86_64", "cp312-abi3-manylinux_2_17_x86_64", "py3-none-any"],
)
HEAD = 'lock-version = "1.0"\ncreated-by = "hand"\n'


@pytest.fixture(autouse=True)
def _fresh() -> None:
    forget()


def _write(directory: Path, text: str, name: str = "pylock.toml") -> str:
    path = directory / name
    path.write_text(text)
    return str(path)


def _package(name: str, version: str, *rest: str) -> str:
    return "\n".join(["[[packages]]", f'name = "{name}"', f'version = "{version}"', *rest]) + "\n"


def _wheels(*entries: tuple[str, str]) -> str:
    rows = ", ".join(f'{{ url = "https://files.example/{f}", hashes = {{ sha256 = "{h}" }} }}' for f, h in entries)
    return f"wheels = [{rows}]"


def _refused(path: str, environment: Environment | None = LINUX312, **options: object) -> str:
    with pytest.raises(RequirementsFileError) as caught:
        read_lock(path, environment=environment, **options)  # type: ignore[arg-type]
    message = str(caught.value)
    assert "\n" not in message
    assert isinstance(caught.value, InvalidInput) and caught.value.exit_code == 2
    return message


# --- which files are locks ---------------------------------------------------------------------------------


def test_lock_files_are_known_by_name_or_by_their_lock_version_key(tmp_path: Path) -> None:
    assert is_lock_file("pylock.toml") and is_lock_file("/x/pylock.dev.toml")
    assert not is_lock_file("pylock.a.b.toml") and not is_lock_file("requirements.txt")
    assert not is_lock_file("Pylock.toml")  # PEP 751's names are lowercase
    assert is_lock_file("locks/prod.toml", HEAD) and is_lock_file("x.txt", "'lock-version' = '1.0'\n")
    assert not is_lock_file("requirements.txt", "six==1.16.0\n")
    named = _write(tmp_path, HEAD, "prod.toml")
    other = _write(tmp_path, '[tool.x]\nname = "y"\n', "other.toml")
    assert is_lock_file(named) and not is_lock_file(other)
    assert not is_lock_file(str(tmp_path / "missing.toml"))  # unreadable: the reader says why later


# --- pylock.toml: selection --------------------------------------------------------------------------------


def test_the_best_wheel_for_the_interpreter_is_chosen_and_paths_become_file_urls(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    text = HEAD + _package(
        "Pkg_One",
        "1.0",
        'index = "https://pypi.example/simple"',
        _wheels(
            ("pkg_one-1.0-py3-none-any.whl", A),
            ("pkg_one-1.0-cp312-abi3-manylinux_2_17_x86_64.whl", B),
            ("pkg_one-1.0-cp312-cp312-win_amd64.whl", C),
        ),
    )
    text += _package(
        "local",
        "2.0",
        f'wheels = [{{ path = "wheels/local-2.0-py3-none-any.whl", hashes = {{ sha256 = "{A.upper()}" }} }}]',
    )
    (tmp_path / "sub" / "wheels").mkdir()
    (tmp_path / "sub" / "wheels" / "local-2.0-py3-none-any.whl").write_bytes(b"a wheel")  # a path names a file
    lock = read_lock(_write(tmp_path / "sub", text), environment=LINUX312)
    assert lock.kind == "pylock" and lock.source == str(tmp_path / "sub" / "pylock.toml")
    assert lock.packages == (
        LockedPackage(
            "local",
            "2.0",
            "local-2.0-py3-none-any.whl",
            (tmp_path / "sub/wheels/local-2.0-py3-none-any.whl").resolve().as_uri(),
            (f"sha256:{A}",),
            None,
        ),
        LockedPackage(
            "pkg-one",
            "1.0",
            "pkg_one-1.0-cp312-abi3-manylinux_2_17_x86_64.whl",
            "https://files.example/pkg_one-1.0-cp312-abi3-manylinux_2_17_x86_64.whl",
            (f"sha256:{B}",),
            "https://pypi.example/simple",
        ),
    )


def test_this_interpreters_tags_come_from_packaging(tmp_path: Path) -> None:
    from packaging.tags import sys_tags

    best = str(next(iter(sys_tags())))
    assert tag_ranks(Environment())[best] == 0
    assert environment_tag().split("-")[0] == best.split("-", maxsplit=1)[0]
    text = HEAD + _package("p", "1", _wheels(("p-1-py3-none-any.whl", A), (f"p-1-{best}.whl", B)))
    assert read_lock(_write(tmp_path, text)).packages[0].hashes == (f"sha256:{B}",)


def test_the_sdist_is_taken_when_no_wheel_fits(tmp_path: Path) -> None:
    text = HEAD + _package(
        "p",
        "1.0",
        f'sdist = {{ name = "p-1.0.tar.gz", url = "https://files.example/p-1.0.tar.gz", '
        f'hashes = {{ sha256 = "{C}" }} }}',
        _wheels(("p-1.0-cp312-cp312-win_amd64.whl", A)),
    )
    (package,) = read_lock(_write(tmp_path, text), environment=LINUX312).packages
    assert (package.filename, package.hashes) == ("p-1.0.tar.gz", (f"sha256:{C}",))


def test_a_false_marker_skips_the_package(tmp_path: Path) -> None:
    text = HEAD + _package("win", "1", "marker = \"sys_platform == 'win32'\"", _wheels(("win-1-py3-none-any.whl", A)))
    text += _package("all", "1", "marker = \"python_version >= '3.9'\"", _wheels(("all-1-py3-none-any.whl", B)))
    assert [p.name for p in read_lock(_write(tmp_path, text), environment=LINUX312).packages] == ["all"]


def test_extras_and_dependency_groups_follow_pep_751(tmp_path: Path) -> None:
    text = HEAD + 'extras = ["fast"]\ndependency-groups = ["dev", "docs"]\ndefault-groups = ["dev"]\n'
    text += _package("base", "1", _wheels(("base-1-py3-none-any.whl", A)))
    text += _package(
        "dev-tool", "1", "marker = \"'dev' in dependency_groups\"", _wheels(("dev_tool-1-py3-none-any.whl", B))
    )
    text += _package("speedup", "1", "marker = \"'fast' in extras\"", _wheels(("speedup-1-py3-none-any.whl", C)))
    path = _write(tmp_path, text)

    def names(extras: tuple[str, ...] = (), groups: tuple[str, ...] | None = None) -> list[str]:
        choice = LockChoice.of(extras, groups)
        return [p.name for p in read_lock(path, environment=LINUX312, choice=choice).packages]

    assert names() == ["base", "dev-tool"]  # no extras, the default groups
    assert names(groups=()) == ["base"]
    assert names(groups=("Docs",)) == ["base"]  # the groups given replace the defaults (as uv pip install --group)
    assert names(extras=("Fast",), groups=("docs", "dev")) == ["base", "dev-tool", "speedup"]
    unknown = LockChoice.of(["slow", "fast", "Quick"])
    assert _refused(path, choice=unknown) == (
        f"{path}: --extra quick, --extra slow: the lock declares no such extra (extras: fast; dependency-groups: "
        "dev, docs)"
    )
    assert _refused(path, choice=LockChoice.of(groups=["test", "dev"])) == (
        f"{path}: --group test: the lock declares no such group (extras: fast; dependency-groups: dev, docs)"
    )
    # A requirements file has no extras or groups to choose: one line, whatever it holds.
    requirements = _write(tmp_path, f"p==1 --hash=sha256:{A}\n", "requirements.txt")
    assert _refused(requirements, choice=LockChoice.of(["fast"], ["dev"])) == (
        f"{requirements}: not a pylock.toml: --extra fast --group dev choose among a pylock.toml's extras and "
        "dependency groups; a requirements file names extras on its lines (name[extra]==1.0)"
    )


def test_an_archive_with_its_hash_is_read_and_a_newer_minor_accepted(tmp_path: Path) -> None:
    text = 'lock-version = "1.7"\ncreated-by = "hand"\n[[packages]]\nname = "arch"\n'
    url = "https://files.example/arch-3.1-py3-none-any.whl?x=1#frag"
    text += f'archive = {{ url = "{url}", hashes = {{ sha256 = "{A}" }} }}\n'
    (package,) = read_lock(_write(tmp_path, text), environment=LINUX312).packages
    assert (package.name, package.version, package.filename) == ("arch", "3.1", "arch-3.1-py3-none-any.whl")


def test_the_installed_python_and_environments_are_checked(tmp_path: Path) -> None:
    wheel = _wheels(("p-1-py3-none-any.whl", A))
    path = _write(tmp_path, HEAD + 'requires-python = ">=3.13"\n' + _package("p", "1", wheel))
    todo = "make the lock for this Python (uv pip compile --python-version 3.12), or run repoinstall with a Python"
    assert _refused(path) == f"{path}: requires-python: made for Python >=3.13, this is 3.12.1: {todo} it was made for"
    path = _write(tmp_path, HEAD + _package("p", "1", 'requires-python = "<3.12"', wheel))
    assert _refused(path) == f"{path}: packages[0] (p): made for Python <3.12, this is 3.12.1: {todo} it was made for"
    # Every package left out by its marker: the lock is for another Python, and the message says which.
    markers = _package("p", "1", "marker = \"python_version >= '3.13'\"", wheel)
    markers += _package("q", "1", "marker = \"python_version >= '3.13'\"", _wheels(("q-1-py3-none-any.whl", A)))
    path = _write(tmp_path, HEAD + markers)
    assert _refused(path) == (
        f"{path}: packages: none is for this environment (Python 3.12.1, cp312-cp312-manylinux_2_17_x86_64): their "
        "markers ask for python_version >= '3.13'; make the lock for this Python and platform (uv pip compile "
        "--python-version 3.12), or run the Python it was made for"
    )
    path = _write(tmp_path, HEAD + "environments = [\"sys_platform == 'darwin'\"]\n" + _package("p", "1", wheel))
    assert _refused(path) == (
        f"{path}: environments: this environment (cp312-cp312-manylinux_2_17_x86_64) is none of the lock's "
        "[\"sys_platform == 'darwin'\"]"
    )
    path = _write(tmp_path, HEAD + "environments = [\"sys_platform == 'linux'\"]\n" + _package("p", "1", wheel))
    assert len(read_lock(path, environment=LINUX312).packages) == 1


# --- pylock.toml: refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            'lock-version = "2.0"\ncreated-by = "x"\npackages = []\n',
            "lock-version: '2.0' is not supported (this repoinstall reads lock-version 1.x)",
        ),
        (
            'created-by = "x"\npackages = []\n',
            'lock-version: missing (a PEP 751 lock file starts with lock-version = "1.0")',
        ),
        ('lock-version = 1.0\ncreated-by = "x"\n', 'lock-version: 1.0 is not a version like "1.0"'),
        (
            'lock-version = "1.0"\npackages = []\n',
            "created-by: missing (PEP 751 requires the name of the tool that wrote the lock)",
        ),
        (HEAD, "packages: missing"),
        (HEAD + 'packages = "x"\n', "packages: not an array of tables"),
        (HEAD + "[[packages]]\nversion = '1'\n", "packages[0].name: missing"),
        (
            HEAD + "[[packages]]\nname = 'p'\nversion = 'one'\nwheels = []\n",
            "packages[0].version: 'one' is not a PEP 440 version",
        ),
        (HEAD + _package("p", "1", "marker = \"python_version >>> '3'\"", _wheels(("p-1-py3-none-any.whl", A))), None),
        (
            HEAD + _package("p", "1", "wheels = [{ url = 'https://x/p-1-py3-none-any.whl', hashes = 'sha256:x' }]"),
            "packages[0].wheels[0].hashes: not a table of algorithm = hex digest",
        ),
        (
            HEAD + _package("p", "1", "wheels = [{ url = 'https://x/p-1-py3-none-any.whl' }]"),
            "packages[0].wheels[0].hashes: missing",
        ),
        (
            HEAD + _package("p", "1", "wheels = [{ hashes = { sha256 = '" + A + "' } }]"),
            "packages[0].wheels[0]: has neither path nor url",
        ),
        (
            HEAD + _package("p", "1", _wheels(("p-1-py3-none.whl", A))),
            "packages[0].wheels[0]: 'p-1-py3-none.whl' is not a wheel file name",
        ),
        (
            HEAD + _package("p", "1", _wheels(("q-1-py3-none-any.whl", A))),
            "packages[0].wheels[0]: 'q-1-py3-none-any.whl' is not a file of 'p'",
        ),
        (
            HEAD + _package("p", "1", _wheels(("p-2-py3-none-any.whl", A))),
            "packages[0].wheels[0]: 'p-2-py3-none-any.whl' is not version 1 of 'p'",
        ),
        (
            HEAD + _package("p", "1", _wheels(("p-1-py3-none-any.whl", "xyz"))),
            "packages[0].wheels[0].hashes.sha256: 'xyz' is not a sha256 hex digest",
        ),
        (
            HEAD
            + _package("p", "1", "wheels = [{ url = 'https://x/p-1-py3-none-any.whl', hashes = { sha512 = 'ab' } }]"),
            "packages[0].wheels[0].hashes: p-1-py3-none-any.whl has no sha256: a tree must be verifiable by hash",
        ),
        (
            HEAD + _package("p", "1", _wheels(("p-1-cp312-cp312-win_amd64.whl", A))),
            "packages[0] (p): no wheel fits this environment (cp312-cp312-manylinux_2_17_x86_64) and the lock has "
            "no sdist for it",
        ),
        (
            HEAD + _package("p", "1", "vcs = { type = 'git', url = 'https://x/p.git', commit-id = 'abc' }"),
            "packages[0] (p): vcs entries are not supported: a tree must be verifiable by hash (lock a wheel, an "
            "sdist or a hashed archive instead)",
        ),
        (
            HEAD + _package("p", "1", "directory = { path = '.', editable = true }"),
            "packages[0] (p): directory entries (a project's own source, as `uv export --format pylock.toml` writes "
            "it) are not installed: a tree is immutable and shared by every pod, a directory is neither; make the "
            "lock without it: uv export --format pylock.toml --no-emit-project",
        ),
        (
            HEAD
            + _package(
                "p",
                "1",
                f"archive = {{ url = 'https://x/p.whl', hashes = {{ sha256 = '{A}' }} }}",
                _wheels(("p-1-py3-none-any.whl", A)),
            ),
            "packages[0] (p): has archive and sdist/wheels: PEP 751 allows one kind of source",
        ),
        (
            HEAD
            + "[[packages]]\nname = 'p'\n"
            + f"archive = {{ url = 'https://x/p.zip', hashes = {{ sha256 = '{A}' }} }}\n",
            "packages[0] (p): archive has no version and its file name names none",
        ),
        (HEAD + _package("p", "1"), "packages[0] (p): has no wheels, sdist, archive, directory or vcs entry"),
        (
            HEAD
            + _package(
                "p", "1", f"archive = {{ url = 'https://x/p.zip', subdirectory = 'x', hashes = {{ sha256 = '{A}' }} }}"
            ),
            "packages[0].archive.subdirectory: archives with a subdirectory are not supported",
        ),
        (
            HEAD
            + _package("p", "1", _wheels(("p-1-py3-none-any.whl", A)))
            + _package("P", "2", _wheels(("p-2-py3-none-any.whl", B))),
            "packages[1] (p): selected twice for this environment, also at packages[0]",
        ),
        (HEAD + "requires-python = 'three'\npackages = []\n", None),
        (HEAD + "environments = 'linux'\npackages = []\n", "environments: not an array of strings"),
        (HEAD + "packages = [\n", None),
    ],
)
def test_malformed_pylock_files_are_one_line_naming_the_key(tmp_path: Path, text: str, message: str | None) -> None:
    path = _write(tmp_path, text)
    refused = _refused(path)
    if message is None:  # worded by packaging or tomllib: the start is ours
        assert refused.startswith(
            (
                f"{path}: packages[0].marker: ",
                f"{path}: requires-python: 'three' is not a version specifier: ",
                f"{path}: not a valid TOML lock file: ",
            )
        ), refused
    else:
        assert refused == f"{path}: {message}"


def test_a_problem_in_a_package_for_another_environment_does_not_matter(tmp_path: Path) -> None:
    text = HEAD + _package("p", "1", _wheels(("p-1-py3-none-any.whl", A)))
    text += _package(
        "w",
        "1",
        "marker = \"sys_platform == 'win32'\"",
        "wheels = [{ url = 'https://x/w-1-py3-none-any.whl', hashes = {} }]",
    )
    assert [p.name for p in read_lock(_write(tmp_path, text), environment=LINUX312).packages] == ["p"]


# --- the key -----------------------------------------------------------------------------------------------


def test_the_same_content_gives_the_same_key_and_a_changed_hash_another(tmp_path: Path) -> None:
    first = (
        HEAD
        + _package("a", "1.0", _wheels(("a-1.0-py3-none-any.whl", A)))
        + _package("b", "2", _wheels(("b-2-py3-none-any.whl", B)))
    )
    # Other order, other URLs and tool, comments and a wheel for another platform: the same install here.
    second = '# made elsewhere\nlock-version = "1.0"\ncreated-by = "other"\n'
    second += _package(
        "b",
        "2",
        'wheels = [{ url = "https://mirror.example/b-2-py3-none-any.whl", hashes = { sha256 = "' + B + '" } }]',
    )
    second += _package("a", "1.0", _wheels(("a-1.0-cp312-cp312-win_amd64.whl", C), ("a-1.0-py3-none-any.whl", A)))
    one = read_lock(_write(tmp_path, first, "pylock.one.toml"), environment=LINUX312)
    two = read_lock(_write(tmp_path, second, "pylock.two.toml"), environment=LINUX312)
    assert one.key() == two.key() and len(one.key()) == 64
    changed = read_lock(_write(tmp_path, first.replace(B, C), "pylock.three.toml"), environment=LINUX312)
    assert changed.key() != one.key()
    assert Lock("x", "pylock", ()).key() != one.key()


# --- the in-process cache ----------------------------------------------------------------------------------


def test_an_unchanged_file_is_answered_from_memory_and_a_changed_one_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, uv_like_pylock(5))
    first = read_lock(path)
    monkeypatch.setattr("tomllib.loads", lambda text: pytest.fail("parsed again"))
    assert read_lock(path) is first
    monkeypatch.undo()
    same_size = Path(path).read_text().replace("package-00", "package-99").replace("package_00", "package_99")
    Path(path).write_text(same_size)  # the same size; its ctime moved
    os.utime(path, ns=(0, Path(path).stat().st_mtime_ns))
    assert read_lock(path).packages[-1].name == "package-99"
    assert read_lock(path, environment=LINUX312) is not read_lock(path)  # per environment


def test_the_generated_lock_selects_one_wheel_per_package_as_packaging_does(tmp_path: Path) -> None:
    """packaging's own PEP 751 reader (packaging >= 26.1) as the oracle, on the benchmark's lock."""
    pylock = pytest.importorskip("packaging.pylock")
    import tomllib

    text = uv_like_pylock(50)
    path = _write(tmp_path, text)
    ours = {p.name: (p.filename, p.hashes) for p in read_lock(path).packages}
    theirs = {
        package.name: (artifact.filename, (f"sha256:{artifact.hashes['sha256']}",))
        for package, artifact in pylock.Pylock.from_dict(tomllib.loads(text)).select()
    }
    assert ours == theirs and len(ours) == 50
    lone = _write(tmp_path, uv_like_pylock(3, tags=["cp39-cp39-win_amd64"], py3_wheel=False), "pylock.sdist.toml")
    assert {p.filename for p in read_lock(lone).packages} == {
        a.filename for _, a in pylock.Pylock.from_dict(tomllib.loads(Path(lone).read_text())).select()
    }


@pytest.mark.parametrize(
    "filename",
    [
        "foo-1.0-py2.py3-none-any.whl",
        "Foo_Bar-2.0-1-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        "foo-1.0.post1-12abc-CP311-abi3-win_amd64.whl",
        "foo-1.0-py3-none.whl",
        "foo__bar-1.0-py3-none-any.whl",
        "foo-x.y-py3-none-any.whl",
        "foo-1.0-x1-py3-none-any.whl",
    ],
)
def test_wheel_names_are_read_as_packaging_reads_them(filename: str) -> None:
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    try:
        name, version, build, tags = parse_wheel_filename(filename)
    except InvalidWheelFilename:
        assert wheel_name(filename) is None
        return
    assert wheel_name(filename) == (name, version, build, frozenset(map(str, tags)))


def test_sdist_names_are_read_as_packaging_reads_them() -> None:
    from packaging.utils import parse_sdist_filename

    for filename in ("foo-1.0.tar.gz", "Foo.Bar-2.0rc1.zip", "foo-bar-1.0.tar.gz"):
        assert sdist_name(filename) == parse_sdist_filename(filename)
    assert sdist_name("foo.tar.gz") is None and sdist_name("foo-1.0.whl") is None and sdist_name("foo-x.tar.gz") is None


# --- hashed requirements -----------------------------------------------------------------------------------


def _reqs(tmp_path: Path, text: str, name: str = "requirements.txt") -> str:
    return _write(tmp_path, text, name)


def test_a_fully_hashed_requirements_file_is_a_lock(tmp_path: Path) -> None:
    path = _reqs(
        tmp_path,
        f"# pip-compile --generate-hashes\nSix==1.16.0 \\\n    --hash=sha256:{B.upper()} \\\n    --hash=sha256:{A}\n"
        f"    # via x\ncelery[redis]==5.3.0 --hash=sha256:{C}\n"
        f"tomli==2.0.1 ; python_version < '3.0' --hash=sha256:{A}\n"
        "skipped==1.0 ; sys_platform == 'no-such-platform'\n",
    )
    lock = read_lock(path)
    assert lock.kind == "hashed-requirements" and lock.source == path
    assert lock.packages == (
        LockedPackage("celery", "5.3.0", None, None, (f"sha256:{C}",), None),
        LockedPackage("six", "1.16.0", None, None, (f"sha256:{A}", f"sha256:{B}"), None),
    )
    # Extras are not part of what is installed, the hashes' order and case neither.
    same = _reqs(
        tmp_path,
        f"celery==5.3.0 --hash=sha256:{C}\nsix==1.16.0 --hash=sha256:{B} --hash=sha256:{A.upper()}\n",
        "same.txt",
    )
    assert read_lock(same).key() == lock.key()
    other = _reqs(tmp_path, f"celery==5.3.0 --hash=sha256:{C}\nsix==1.16.0 --hash=sha256:{B}\n", "other.txt")
    assert read_lock(other).key() != lock.key()


def test_hash_mode_follows_pip(tmp_path: Path) -> None:
    hashed = parse_spec("a==1", "r.txt:1", [f"sha256:{A}"])
    plain = parse_spec("b==2", "r.txt:2")
    ranged = parse_spec("c>=1", "r.txt:3", [f"sha256:{C}"])
    elsewhere = parse_spec("d==1; sys_platform == 'no-such-platform'", "r.txt:4")
    assert is_hashed_requirements([hashed]) and not is_hashed_requirements([hashed, plain])
    assert not is_hashed_requirements([])
    assert hash_mode([plain]) is False  # ordinary requirements
    assert hash_mode([hashed, elsewhere]) is True  # a line skipped here needs no hash, as in pip
    missing = (
        "Hashes are required in --require-hashes mode, but they are missing from some requirements (it turns on "
        "automatically when any requirement has a hash):"
    )
    cases = [
        (([hashed, plain], False), f"{missing} b==2 (r.txt:2)"),
        (([plain], True), f"{missing} b==2 (r.txt:2)"),
        (
            ([hashed, ranged, plain], False),
            "In --require-hashes mode, all requirements must have their versions pinned with ==. These do not: "
            "c>=1 (r.txt:3)",
        ),
    ]
    for (requested, require), message in cases:
        with pytest.raises(RequirementsFileError) as caught:
            hash_mode(requested, require_hashes=require)
        assert str(caught.value) == message
    many = [parse_spec(f"p{n}==1", f"r.txt:{n}") for n in range(5)]
    with pytest.raises(RequirementsFileError) as caught:
        hash_mode([hashed, *many])
    assert str(caught.value).endswith("p0==1 (r.txt:0), p1==1 (r.txt:1), p2==1 (r.txt:2) and 2 more")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a==1\nb==2\n", "{path}: not a lock: no requirement has a --hash"),
        (
            f"a==1 --hash=sha256:{A}\nb==2\n",
            "Hashes are required in --require-hashes mode, but they are missing from some requirements (it turns on "
            "automatically when any requirement has a hash): b==2 ({path}:2)",
        ),
        (
            f"a==1 --hash=md5:{A[:32]}\n",
            "'a==1' ({path}:1): --hash algorithm 'md5' is not one pip accepts (sha256, sha384, sha512)",
        ),
        (
            f"a==1 --hash=sha256:{A}\nA==1 --hash=sha256:{A}\n",
            "{path}:2: a is already pinned at {path}:1; a lock names each project once",
        ),
        (
            f"a==1 ; sys_platform == 'no-such-platform' --hash=sha256:{A}\n",
            "{path}: no requirement applies to this environment",
        ),
    ],
)
def test_requirements_that_are_not_a_lock_are_refused_in_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = _reqs(tmp_path, text)
    assert _refused(path, environment=None) == message.format(path=path)


def test_a_hashed_requirements_lock_for_another_environment(tmp_path: Path) -> None:
    path = _reqs(
        tmp_path,
        f"a==1 ; python_version >= '3.12' --hash=sha256:{A}\nb==1 ; python_version < '3.12' --hash=sha256:{B}\n",
    )
    requested = read_requirements_file(path)
    assert [p.name for p in lock_from_requirements(requested, path, environment=LINUX312).packages] == ["a"]
    expected = "a" if sys.version_info >= (3, 12) else "b"
    assert [p.name for p in lock_from_requirements(requested, path).packages] == [expected]


def test_a_marker_that_cannot_be_evaluated_here_is_one_line_naming_it(tmp_path: Path) -> None:
    text = HEAD + _package("p", "1", _wheels(("p-1-py3-none-any.whl", A)))
    text += _package("q", "1", "marker = \"platform_release ~= 'abc'\"", _wheels(("q-1-py3-none-any.whl", B)))
    path = _write(tmp_path, text)
    assert _refused(path).startswith(
        f"{path}: packages[1].marker: \"platform_release ~= 'abc'\": cannot be evaluated: "
    )
