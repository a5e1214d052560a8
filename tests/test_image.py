"""The container image, without a container engine (CI has none): the Dockerfile's shape is checked, its build
context (what .dockerignore leaves) builds the wheel, and its install steps, the very scripts it runs, are run
in a fresh venv; the entry point then ensures a package as the image's non-root user with the image's
environment."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import dockerignore
import pytest
from helpers import isolated_env

import repoinstall

ROOT = Path(__file__).parent.parent
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def instructions() -> list[str]:
    """The Dockerfile's instructions, one a line: continuations joined, comments dropped."""
    lines = [line.strip() for line in re.sub(r"\\\n\s*", " ", DOCKERFILE).splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def final_stage() -> list[str]:
    every = instructions()
    start = max(i for i, line in enumerate(every) if line.startswith("FROM "))
    return every[start:]


def image_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for line in final_stage():
        if line.startswith("ENV "):
            env.update(pair.split("=", 1) for pair in line[4:].split())  # type: ignore[misc]
    return env


def test_dockerfile_shape() -> None:
    stage = final_stage()
    assert re.fullmatch(r"FROM \$\{PYTHON_IMAGE\}", stage[0])
    assert "ARG PYTHON_IMAGE=python:3.11-slim-bookworm" in DOCKERFILE  # slim base, overridable to match workers
    assert 'ENTRYPOINT ["repoinstall"]' in stage
    user = next(line for line in stage if line.startswith("USER "))
    assert re.fullmatch(r"USER [1-9][0-9]*:[0-9]+", user)  # numeric, so runAsNonRoot can verify it
    runs = " ".join(line for line in stage if line.startswith("RUN "))
    assert "docker/install.sh" in DOCKERFILE and "sh /tmp/install.sh /wheels" in runs
    assert "rm -rf /wheels" in runs
    # Nothing to build with is left in the image: no compilers, no build backend in the final stage.
    for tool in ("apt-get install", "gcc", "build-essential", "hatchling", "python3-dev"):
        assert tool not in runs, tool
    assert "sh /src/docker/build-wheel.sh /src /wheels" in DOCKERFILE  # the wheel comes from the build stage


def test_dockerignore_rules_as_docker_reads_them() -> None:
    rules = dockerignore.parse("*\n!keep/\n**/__pycache__\n# a comment\n/top.txt\n!top.txt\n*.md\n")
    assert not dockerignore.excluded(rules, "keep/a/b.py")  # a "!" line on a directory takes back all below it
    assert dockerignore.excluded(rules, "keep/a/__pycache__/b.pyc")  # the last matching line wins
    assert dockerignore.excluded(rules, "other/x.py") and dockerignore.excluded(rules, ".git/HEAD")
    assert not dockerignore.excluded(rules, "top.txt")
    # A * stays within one level: *.md is README.md at the top only.
    assert dockerignore.excluded(rules, "README.md") and not dockerignore.excluded(rules, "keep/README.md")


def test_the_build_context_holds_what_the_dockerfile_uses_and_no_git_venvs_or_caches(tmp_path: Path) -> None:
    """No engine here: the context .dockerignore leaves is copied as Docker would send it, every path the
    Dockerfile COPYs and runs is in it, and the build stage's own script builds the wheel from it."""
    rules = dockerignore.parse((ROOT / ".dockerignore").read_text())
    copies = [line.split()[1:] for line in instructions() if line.startswith("COPY ")]
    # The sources a COPY takes from the context (not --from= another stage), its destination dropped.
    sources = [w for words in copies if not any(w.startswith("--from=") for w in words) for w in words[:-1]]
    assert sources == [".", "docker/install.sh"], copies
    used = re.findall(r"/src/(\S+)", "\n".join(instructions()))  # what the build stage runs from the context
    assert used == ["docker/build-wheel.sh"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wheel_inputs = ["pyproject.toml", project["project"]["readme"], *project["project"]["license-files"]]
    package = [str(p.relative_to(ROOT)) for p in (ROOT / "repoinstall").rglob("*") if p.suffix in (".py", ".typed")]
    for path in ["docker/install.sh", *used, *wheel_inputs, *package]:
        assert not dockerignore.excluded(rules, path), path
    for path in (".git", ".git/HEAD", ".venv/bin/python", "venv/lib/site.py", "repoinstall/__pycache__/a.pyc",
                 ".pytest_cache/v/x", ".mypy_cache/3.11/x.json", "repoinstall/.ruff_cache/x", "build/lib/x.py",
                 "dist/repoinstall-0.1.0-py3-none-any.whl", "repoinstall.egg-info/PKG-INFO", "tests/test_image.py",
                 "bench/warm.py", "helm/repoinstall/Chart.yaml"):  # fmt: skip
        assert dockerignore.excluded(rules, path), path

    context = tmp_path / "src"
    for path in dockerignore.context(ROOT, rules):
        (context / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, context / path)
    sent = sorted(str(p.relative_to(context)) for p in context.rglob("*") if p.is_file())
    assert not [p for p in sent if p.startswith((".git", ".venv", "tests/")) or "__pycache__" in p], sent
    wheels = tmp_path / "wheels"
    built = subprocess.run(
        ["sh", context / "docker" / "build-wheel.sh", context, wheels], env=isolated_env(), capture_output=True,
        text=True, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.iterdir()
    with zipfile.ZipFile(wheel) as archive:
        assert set(package) <= set(archive.namelist()), sorted(set(package) - set(archive.namelist()))


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")
def test_install_steps_in_a_fresh_venv_and_the_entry_point_as_non_root(tmp_path: Path) -> None:
    from wheels import make_wheel

    wheels = tmp_path / "wheels"
    venv = tmp_path / "venv"
    env = isolated_env()
    subprocess.run(["sh", ROOT / "docker" / "build-wheel.sh", ROOT, wheels], env=env, check=True, capture_output=True)
    assert [p.name for p in wheels.iterdir()] == [f"repoinstall-{repoinstall.__version__}-py3-none-any.whl"]
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    # The image's dependencies come from the index; tests have no network, so the fresh venv sees this test
    # environment's packages as if a base layer held them, and install.sh runs with --no-index.
    site = next((venv / "lib").glob("python*/site-packages"))
    (site / "base-layer.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    venv_env = {**env, "PATH": f"{venv / 'bin'}{os.pathsep}{env['PATH']}", "VIRTUAL_ENV": str(venv)}
    done = subprocess.run(
        ["sh", ROOT / "docker" / "install.sh", wheels, "--no-index"],
        env=venv_env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    entry = venv / "bin" / "repoinstall"
    assert entry.is_file()
    where = subprocess.run(
        [venv / "bin" / "python", "-c", "import repoinstall; print(repoinstall.__file__)"],
        cwd=tmp_path, env=venv_env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert where.stdout.startswith(str(venv))  # the wheel's copy, not the source tree's

    # As the image runs it: its numeric user, its ENV (HOME and caches in /tmp), the entry point.
    packages = tmp_path / "packages"
    packages.mkdir()
    make_wheel(packages, "adaptor-img", "1.0")
    repo = tmp_path / "repo"
    repo.mkdir()
    os.chown(repo, 10001, 0)
    scratch = tmp_path / "tmp"
    scratch.mkdir(mode=0o1777)
    scratch.chmod(0o1777)
    user_env = {**venv_env, **{k: v.replace("/tmp", str(scratch)) for k, v in image_env().items()}}
    as_image_user = ["setpriv", "--reuid=10001", "--regid=0", "--clear-groups"]
    as_image_user += ["--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]
    ensured = subprocess.run(
        [*as_image_user, entry, "ensure", "adaptor-img==1.0", "--repo", repo, "--no-index", "--find-links", packages],
        env=user_env, capture_output=True, text=True, timeout=180, cwd=scratch, check=False,
    )  # fmt: skip
    assert ensured.returncode == 0, ensured.stderr
    tree = next((repo / "trees").glob("*/adaptor-img/1"))
    assert tree.stat().st_uid == 10001
    assert (tree / "adaptor_img" / "__init__.py").is_file()
    # The uv extra is installed: the image's user can build trees with it, its cache in the scratch dir.
    make_wheel(packages, "adaptor-img", "2.0")
    with_uv = subprocess.run(
        [*as_image_user, entry, "ensure", "adaptor-img==2.0", "--repo", repo, "--no-index", "--find-links", packages,
         "--installer", "uv"],
        env={k: v for k, v in user_env.items() if k not in ("UV_NO_CACHE", "PIP_NO_CACHE_DIR")},
        capture_output=True, text=True, timeout=180, cwd=scratch, check=False,
    )  # fmt: skip
    assert with_uv.returncode == 0, with_uv.stderr
    assert json.loads(next((repo / "records").rglob("2.json")).read_text())["installer"] == "uv"
    assert (scratch / ".cache" / "uv").is_dir()
