"""The worker runtime API: asyncio ensure (single-flight, cancellation), events, activation and isolation,
`repoinstall run`, bytecode compiled at install time, and two real workers sharing one repo."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import isolated_env, run, snapshot, wait_until, while_ticking
from indexserver import IndexServer

from repoinstall import ActivationConflict, EnsureResult, Event, InstallOptions, Repo

ROOT = Path(__file__).parent.parent


def make_repo(path: Path, index: IndexServer, **kwargs: object) -> Repo:
    options = InstallOptions(find_links=(index.url,), no_index=True)
    return Repo(path, install=options, stale_after=5, heartbeat=1, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def forget_adaptors() -> Iterator[None]:
    """Tests that import adaptors into this process take them out again for the next test."""
    yield
    for name in [n for n in sys.modules if n.startswith(("adaptor_", "dep_c"))]:
        del sys.modules[name]


# ---- asyncio -----------------------------------------------------------------------------------------------


def test_tasks_share_one_install_and_the_loop_keeps_running(repo: Path, index: IndexServer) -> None:
    index.delays["slow_pkg"] = 1.5

    async def scenario(r: Repo) -> tuple[list[EnsureResult], int]:
        all_six = asyncio.gather(*(r.aensure("slow-pkg==1.0") for _ in range(6)))
        return await while_ticking(all_six, during=lambda: index.downloading("slow_pkg") > 0)

    with make_repo(repo, index) as r:
        results, ticks = asyncio.run(scenario(r))
    assert index.downloads("slow_pkg") == 1
    assert sorted(x.action for x in results) == ["installed"] + ["waited"] * 5
    assert len({x.path for x in results}) == 1
    assert ticks >= 1  # the loop ran while the install was downloading: the install ran off the loop


def test_sync_threads_and_async_tasks_share_one_install(repo: Path, index: IndexServer) -> None:
    index.delays["slow_pkg"] = 1.0
    with make_repo(repo, index) as r:
        from_thread: list[EnsureResult] = []
        thread = threading.Thread(target=lambda: from_thread.append(r.ensure("slow-pkg==1.0")))
        thread.start()
        index.wait_for_download("slow_pkg")
        from_task = asyncio.run(r.aensure("slow-pkg==1.0"))
        thread.join()
    assert index.downloads("slow_pkg") == 1
    assert {from_thread[0].action, from_task.action} == {"installed", "waited"}


def test_cancelled_waiter_leaves_the_install_whole(repo: Path, index: IndexServer) -> None:
    index.delays["slow_pkg"] = 1.5

    async def scenario(r: Repo) -> EnsureResult:
        first = asyncio.create_task(r.aensure("slow-pkg==1.0"))
        second = asyncio.create_task(r.aensure("slow-pkg==1.0"))
        await asyncio.to_thread(index.wait_for_download, "slow_pkg")
        first.cancel()  # the task that started the install
        with pytest.raises(asyncio.CancelledError):
            await first
        return await second

    with make_repo(repo, index) as r:
        result = asyncio.run(scenario(r))
        assert result.action == "waited" and result.path is not None
        assert [report.ok for report in r.verify(["slow-pkg==1.0"])] == [True]
    assert index.downloads("slow_pkg") == 1
    assert not list((repo / "staging").rglob("owner.json"))


def test_cancelling_the_only_waiter_still_finishes_the_install(repo: Path, index: IndexServer) -> None:
    index.delays["slow_pkg"] = 1.0

    async def scenario(r: Repo) -> None:
        task = asyncio.create_task(r.aensure("slow-pkg==1.0"))
        await asyncio.to_thread(index.wait_for_download, "slow_pkg")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with make_repo(repo, index) as r:
        asyncio.run(scenario(r))
    # Repo.close() waited for the install the cancelled task had started: it is published whole.
    with make_repo(repo, index) as r:
        assert r.ensure("slow-pkg==1.0").action == "present"
    assert index.downloads("slow_pkg") == 1


def test_aensure_all_and_events(repo: Path, index: IndexServer) -> None:
    events: list[Event] = []
    with make_repo(repo, index, on_event=events.append) as r:
        specs = ["adaptor-a==1.0", "adaptor-d==1.0", 'adaptor-a==1.0; python_version < "3"']
        results = asyncio.run(r.aensure_all(specs))
        again = r.ensure("adaptor-a==1.0")
    assert [x.action for x in results] == ["installed", "installed", "skipped"]  # type: ignore[union-attr]
    assert again.action == "present"
    ensured = [e for e in events if e.kind == "ensured"]
    assert sorted((e.requirement, e.action) for e in ensured) == [
        ("adaptor-a==1.0", "installed"),
        ("adaptor-a==1.0", "present"),
        ('adaptor-a==1.0; python_version < "3"', "skipped"),
        ("adaptor-d==1.0", "installed"),
    ]
    installed = [e for e in ensured if e.action == "installed"]
    assert all(e.seconds_installing > 0 and e.seconds == e.seconds_waited + e.seconds_installing for e in installed)
    assert {e.kind for e in events} == {"start", "done", "ensured"}


# ---- activation and isolation -----------------------------------------------------------------------------


def test_activate_imports_the_version_then_restores_sys_path(
    repo: Path, index: IndexServer, forget_adaptors: None
) -> None:
    with make_repo(repo, index) as r:
        r.ensure_all(["adaptor-a==1.0", "adaptor-a==1.1"])
        before = list(sys.path)
        with r.activate("adaptor-a==1.0") as paths:
            import adaptor_a  # type: ignore[import-not-found]

            assert adaptor_a.VERSION == "1.0"
            assert sys.path[0] == paths[0] == r.tree_path("adaptor-a==1.0")
        assert sys.path == before
        with r.activate("adaptor-a==1.0"):
            pass  # the same version again is fine
        with pytest.raises(ActivationConflict) as conflict:
            r.activate("adaptor-a==1.1").__enter__()
        assert "adaptor-a 1.1" in str(conflict.value) and "adaptor-a 1.0" in str(conflict.value)
        assert "call_isolated" in str(conflict.value)
        assert sys.path == before
        # Full isolation: a fresh interpreter sees exactly the other version.
        assert r.call_isolated(["adaptor-a==1.1"], "adaptor_a:version", 1, 2) == ("1.1", [1, 2])
        with pytest.raises(AttributeError):
            r.call_isolated(["adaptor-a==1.1"], "adaptor_a:no_such_function")


def test_activation_refuses_a_dependency_imported_from_another_version(
    repo: Path, tmp_path: Path, forget_adaptors: None
) -> None:
    from wheels import make_wheel

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    make_wheel(wheels, "dep-c", "1.0")
    make_wheel(wheels, "dep-c", "2.0")
    make_wheel(wheels, "adaptor-y", "1.0", requires=("dep-c==2.0",))
    options = InstallOptions(find_links=(str(wheels),), no_index=True)
    with Repo(repo, install=options) as r:
        r.ensure_all(["dep-c==1.0", "adaptor-y==1.0"])
        with r.activate("dep-c==1.0"):
            import dep_c  # type: ignore[import-not-found]

            assert dep_c.VERSION == "1.0"
        with pytest.raises(ActivationConflict) as conflict:
            r.activate("adaptor-y==1.0").__enter__()
    assert "'dep_c'" in str(conflict.value) and "dep-c 1.0" in str(conflict.value)


# ---- repoinstall run --------------------------------------------------------------------------------------


def test_run_puts_trees_first_and_exits_with_the_commands_code(repo: Path, index: IndexServer, tmp_path: Path) -> None:
    (tmp_path / "adaptor_a.py").write_text("VERSION = 'shadowed'\n")
    script = "import adaptor_a, sys, os; print(adaptor_a.VERSION); print(os.environ['PYTHONPATH']); sys.exit(7)"
    env = isolated_env(PYTHONPATH=str(tmp_path))
    done = run(
        "run", "adaptor-a==1.1", "--repo", repo, "--no-index", "--find-links", index.url,
        "--", sys.executable, "-c", script, env=env,
    )  # fmt: skip
    assert done.returncode == 7, done.stderr
    version, pythonpath = done.stdout.splitlines()
    assert version == "1.1"
    assert pythonpath.split(os.pathsep)[-1] == str(tmp_path)  # what was there stays, after the trees
    missing = run("run", "adaptor-a==1.1", "--repo", repo, "--no-index", "--", "no-such-command-here")
    assert missing.returncode == 127 and "cannot run no-such-command-here" in missing.stderr
    no_command = run("run", "adaptor-a==1.1", "--repo", repo)
    assert no_command.returncode == 2 and "after --" in no_command.stderr
    failing = run("run", "no-such-pkg==1.0", "--repo", repo, "--no-index", "--find-links", index.url, "--", "true")
    assert failing.returncode == 1 and "pip failed" in failing.stderr


# ---- bytecode ---------------------------------------------------------------------------------------------


def test_trees_are_compiled_so_importing_writes_nothing(
    repo: Path, index: IndexServer, tmp_path: Path, installer: str
) -> None:
    # Even when pip is configured not to compile, the tree gets bytecode for this interpreter at install time.
    config = tmp_path / "pip.conf"
    config.write_text("[install]\ncompile = false\n")
    done = run(
        "ensure", "adaptor-b==1.0", "--repo", repo, "--no-index", "--find-links", index.url,
        env=isolated_env(PIP_CONFIG_FILE=str(config)),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with Repo(repo) as r:
        tree = Path(r.tree_path("adaptor-b==1.0"))
    tag = sys.implementation.cache_tag
    sources = [p for p in tree.rglob("*.py")]
    assert sources
    for source in sources:
        assert (source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc").is_file(), source
    before = snapshot(repo)
    env = {k: v for k, v in isolated_env(PYTHONPATH=str(tree)).items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-c", "import adaptor_b, dep_c"], env=env, check=True, timeout=60)
    assert snapshot(repo) == before
    with Repo(repo) as r:
        assert all(report.ok for report in r.verify())


# ---- the example worker -----------------------------------------------------------------------------------


def test_two_workers_share_one_repo(repo: Path, index: IndexServer, tmp_path: Path) -> None:
    index.delays["adaptor_"] = 0.3  # installs take a moment, so both workers are busy at once
    queue = tmp_path / "queue"
    (queue / "new").mkdir(parents=True)
    wanted = {}
    versions = ["adaptor-a==1.0", "adaptor-a==1.1", "adaptor-a==2.0", "adaptor-d==1.0", "adaptor-e==1.0"]
    for number in range(15):
        adaptor = versions[number % len(versions)]
        module = adaptor.split("==")[0].replace("-", "_")
        job = {"id": f"job-{number:02d}", "adaptor": adaptor, "call": f"{module}:version", "args": [number]}
        (queue / "new" / f"{job['id']}.json").write_text(json.dumps(job))
        wanted[job["id"]] = (adaptor.split("==")[1], number)
    worker = [sys.executable, str(ROOT / "examples" / "worker" / "worker.py"), "--repo", str(repo)]
    worker += ["--queue", str(queue), "--find-links", index.url, "--no-index", "--concurrency", "3", "--until-empty"]
    pods = [
        subprocess.Popen([*worker, "--name", name], env=isolated_env(), stderr=subprocess.PIPE, text=True)
        for name in ("w1", "w2")
    ]
    logs = [pod.communicate(timeout=300)[1] for pod in pods]
    assert [pod.returncode for pod in pods] == [0, 0], logs
    wait_until(lambda: not list((queue / "claimed").iterdir()), what="claimed jobs finished")
    assert not list((queue / "failed").iterdir()), [p.read_text() for p in (queue / "failed").iterdir()]
    done = {p.stem: json.loads(p.read_text()) for p in (queue / "done").glob("*.json")}
    assert set(done) == set(wanted)
    for job_id, (version, number) in wanted.items():
        assert done[job_id]["result"] == [version, [number]], done[job_id]
    assert {d["worker"] for d in done.values()} == {"w1", "w2"}  # both took jobs
    for prefix in ("adaptor_a-1.0-", "adaptor_a-1.1-", "adaptor_a-2.0-", "adaptor_d-1.0-", "adaptor_e-1.0-"):
        assert index.downloads(prefix) == 1, prefix  # each tree installed once for both workers
    assert "ensured adaptor-a==1.0" in "".join(logs)
