"""The Ray adapter: a runtime_env plugin that puts repo trees on a task's or actor's ``sys.path``.

Register the plugin where Ray runs (every node: ``ray start``, the KubeRay head and worker pods, or the process
that calls ``ray.init()`` for a local cluster)::

    RAY_RUNTIME_ENV_PLUGINS='[{"class": "repoinstall.ray.RepoInstallPlugin"}]'

then ask for packages in a ``runtime_env``, built and checked by :func:`runtime_env`::

    env = repoinstall.ray.runtime_env(["attrs==26.1.0"], repo="/shared/repo")
    # {"repoinstall": {"packages": ["attrs==26.1.0"], "repo": "/shared/repo"}}
    task.options(runtime_env=env).remote()

The value under ``"repoinstall"`` is :meth:`Packages.of <repoinstall._workers.Packages.of>`'s arguments as JSON:
``packages``, ``requirements``, ``lock`` (files), ``repo``, ``install`` (a mapping of
:class:`~repoinstall.InstallOptions` fields) and :class:`~repoinstall.Repo` options (``wait_timeout``, ``jobs``...).

Ray runs the plugin in each node's runtime-env agent: :meth:`RepoInstallPlugin.validate` refuses bad input before
anything is installed, :meth:`~RepoInstallPlugin.create` ensures the trees (installed at most once per cluster on
a shared repo), :meth:`~RepoInstallPlugin.modify_context` puts them first on the workers' ``PYTHONPATH``. A failure
fails the task or actor creation (``RuntimeEnvSetupError``) with repoinstall's one-line error.

Ray silently ignores a ``runtime_env`` key no plugin registered (the task then fails with ``ImportError``):
:func:`runtime_env` and :func:`check_registered` make that loud.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import ray
from ray._private.runtime_env.plugin import RuntimeEnvPlugin

from ._errors import InvalidInput, RepoinstallError
from ._options import InstallOptions
from ._workers import Packages, one_line


class RuntimeEnvContext(Protocol):
    """What the plugin uses of the context Ray hands it: the workers' environment variables. Structural, so that
    the plugin's base class stays the only one of Ray's private modules this package imports."""

    env_vars: dict[str, str]


__all__ = ["NAME", "PLUGINS", "PluginNotRegistered", "RepoInstallPlugin", "check_registered", "runtime_env"]

#: The ``runtime_env`` key the plugin answers to.
NAME = "repoinstall"
#: The value of ``RAY_RUNTIME_ENV_PLUGINS`` that registers the plugin.
PLUGINS = json.dumps([{"class": f"{__name__}.RepoInstallPlugin"}])
#: Set on every worker the plugin prepared: the trees it put on ``PYTHONPATH`` (``os.pathsep``-joined, maybe none).
TREES_ENV = "REPOINSTALL_RAY_TREES"

_PLUGINS_ENV = "RAY_RUNTIME_ENV_PLUGINS"
#: A runtime_env value that installs nothing: :func:`check_registered` asks each node's agent for it.
_PROBE: dict[str, Any] = {"probe": True}
#: How long a failed creation is answered with its error (Ray's retries of it come within ~2 s).
_FAILED_FOR = 10.0
_KEYS = ("packages", "requirements", "lock", "repo", "install")

default_logger = logging.getLogger(__name__)


class PluginNotRegistered(RepoinstallError):
    """A ``runtime_env`` asks for ``repoinstall`` where Ray has not loaded the plugin (Ray would ignore the key)."""


def packages_of(value: Any) -> Packages:
    """The :class:`Packages` a ``runtime_env["repoinstall"]`` value asks for; :class:`InvalidInput` (one line) for
    a value that is not a mapping of :meth:`Packages.of`'s arguments."""
    if not isinstance(value, Mapping):
        raise InvalidInput(f'runtime_env["{NAME}"] must be a mapping such as {{"packages": [...], "repo": DIR}}')
    given = dict(value)
    repo = given.get("repo")
    if repo is not None and (not isinstance(repo, str) or not os.path.isabs(repo)):
        raise InvalidInput(
            f"repo must be an absolute path (the plugin runs in each node's runtime env agent): {repo!r}"
        )
    options = {k: v for k, v in given.items() if k not in _KEYS}
    return Packages.of(
        given.get("packages", ()),
        requirements=given.get("requirements", ()),
        lock=given.get("lock", ()),
        repo=repo,
        install=given.get("install"),
        **options,
    )


def _is_probe(value: Any) -> bool:
    return isinstance(value, Mapping) and dict(value) == _PROBE


class RepoInstallPlugin(RuntimeEnvPlugin):
    """``runtime_env={"repoinstall": {"packages": [...], "repo": "/shared/repo", ...}}``: ensure the trees on the
    node, put them first on the workers' ``PYTHONPATH``.

    No URIs: the node holds nothing of its own (the trees live in the shared repo, which its own ``gc``/``remove``
    manage), so there is nothing for Ray's per-node URI cache to count or evict, and :meth:`delete_uri` never
    deletes anything. Ray's agent creates a runtime env once per node and reuses it while workers use it; each
    creation ensures again, which on trees already there is a check that reads the repo, no index.
    """

    name = NAME
    # After working_dir (created first) and before the default priority (10) of other third-party plugins.
    priority = 5

    def __init__(self) -> None:
        # Trees found by create(), read by modify_context() right after it, keyed by the value's JSON (a few
        # entries: one per distinct value this node was asked for). The agent creates runtime envs concurrently,
        # each through its own create() then modify_context(); equal values find equal trees.
        self._trees: dict[str, list[str]] = {}
        #: A value whose creation failed: until when its error is given again instead of a new installer run.
        self._failed: dict[str, tuple[float, type[RepoinstallError], str]] = {}
        self._guard = threading.Lock()

    @staticmethod
    def validate(runtime_env_dict: dict[str, Any]) -> None:
        """Refuse bad input before anything runs (Ray calls this on the node before :meth:`create`): the one-line
        :class:`InvalidInput`, which the agent reports as the runtime env's setup error."""
        value = runtime_env_dict.get(NAME)
        if value is None or _is_probe(value):
            return
        try:
            packages_of(value).check()
        except RepoinstallError as error:
            raise type(error)(str(error)) from None  # Ray shows the traceback: this frame and the one line

    async def create(
        self,
        uri: str | None,
        runtime_env: Any,
        context: RuntimeEnvContext,
        logger: logging.Logger = default_logger,
    ) -> float:
        value = runtime_env.get(NAME)
        if value is None or _is_probe(value):
            return 0
        packages = packages_of(value)
        key = _key(value)
        with self._guard:
            failed = self._failed.get(key)
        if failed is not None and time.monotonic() < failed[0]:
            # Ray's agent retries a failed creation at once (RUNTIME_ENV_RETRY_TIMES, 1 s apart): the same
            # failure again, not the same installer run again.
            raise failed[1](failed[2]) from None
        logger.info("repoinstall: ensuring %s in %s", packages.describe(), packages.repo or "the default repo")
        try:
            # Blocking work (locks, the installer run) off the agent's event loop, on repoinstall's own threads (the
            # agent's default executor is its own). Each tree is installed at most once cluster-wide:
            # Packages.ensure goes through the repo's per-tree lock and re-checks under it, so concurrent creates
            # here and on other nodes' agents wait for the one install and then use its tree.
            trees = await packages.aensure()
        except RepoinstallError as error:
            logger.error("repoinstall: %s", one_line(error))
            # The agent reports the traceback: keep it to Ray's frames and the error as the CLI prints it (its
            # one line first, then the installer's reason), not repoinstall's own frames.
            with self._guard:
                self._failed[key] = (time.monotonic() + _FAILED_FOR, type(error), str(error).strip())
            raise type(error)(str(error).strip()) from None
        logger.info("repoinstall: trees %s", ", ".join(trees))
        with self._guard:
            self._failed.pop(key, None)
            self._trees[key] = trees
        return 0

    def modify_context(
        self,
        uris: list[str],
        runtime_env: Any,
        context: RuntimeEnvContext,
        logger: logging.Logger = default_logger,
    ) -> None:
        value = runtime_env.get(NAME)
        if value is None:
            return
        if _is_probe(value):
            context.env_vars[TREES_ENV] = ""
            return
        with self._guard:
            trees = self._trees[_key(value)]
        # Ours first, then whatever was there: working_dir's or the user's env_vars PYTHONPATH, else the node's.
        behind = context.env_vars.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
        context.env_vars["PYTHONPATH"] = os.pathsep.join([*trees, *([behind] if behind else [])])
        context.env_vars[TREES_ENV] = os.pathsep.join(trees)

    def delete_uri(self, uri: str, logger: logging.Logger = default_logger) -> float:
        """Never called (no URIs); were it, the trees are shared by every node and stay: nothing is deleted."""
        return 0


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def runtime_env(
    packages: str | Iterable[str] = (),
    *,
    requirements: str | Iterable[str] = (),
    lock: str | Iterable[str] | bool = (),
    repo: str | os.PathLike[str] | None = None,
    install: InstallOptions | Mapping[str, Any] | None = None,
    check: bool = True,
    **options: Any,
) -> dict[str, Any]:
    """A ``runtime_env`` asking for these packages (merge it with other fields as you like), checked here: bad
    input raises its one-line :class:`InvalidInput`, and with ``check`` :class:`PluginNotRegistered` unless the
    plugin is registered (:func:`check_registered`)."""
    value: dict[str, Any] = {"packages": list(Packages.of(packages).specs)}
    if requirements:
        value["requirements"] = [requirements] if isinstance(requirements, str) else list(requirements)
    if isinstance(lock, bool):
        value["lock"] = lock  # Repo's own option: False is --no-lock
    elif lock:
        value["lock"] = [lock] if isinstance(lock, str) else list(lock)
    if repo is not None:
        value["repo"] = os.fspath(repo)
    if install is not None:
        value["install"] = _install_fields(install)
    value.update(options)
    packages_of(value).check()
    if check:
        check_registered()
    return {NAME: value}


def _install_fields(install: InstallOptions | Mapping[str, Any]) -> dict[str, Any]:
    """The fields set apart from their defaults, as JSON (``python`` only if given: the driver's is not the
    nodes')."""
    if isinstance(install, Mapping):
        return {k: list(v) if isinstance(v, tuple) else v for k, v in install.items()}
    if not isinstance(install, InstallOptions):
        raise InvalidInput(f"install must be InstallOptions or a mapping of its fields, got {type(install).__name__}")
    defaults = InstallOptions()
    return {
        name: list(v) if isinstance(v, tuple) else v
        for name, v in install._asdict().items()
        if v != getattr(defaults, name)
    }


#: Nodes whose agent answered the probe, per cluster (GCS address) this process has talked to.
_registered_nodes: set[tuple[str, str]] = set()


def check_registered(timeout: float = 120) -> None:
    """Raise :class:`PluginNotRegistered` (one line) unless the plugin is registered where it will run.

    Connected to a cluster (after ``ray.init()``): each alive node not checked before runs a tiny task with a
    probe ``runtime_env`` (one worker per node, once per process); a node whose agent did not load the plugin is
    named. Before ``ray.init()``: this process's ``RAY_RUNTIME_ENV_PLUGINS``, which ``ray.init()`` hands to the
    local cluster it starts (a driver meant for a running cluster: call this after ``ray.init()``).
    """
    if not ray.is_initialized():
        if not _lists_plugin(os.environ.get(_PLUGINS_ENV, "")):
            raise PluginNotRegistered(
                f"the repoinstall Ray plugin is not registered: start Ray with {_PLUGINS_ENV}='{PLUGINS}' "
                "(or check after ray.init() to ask a running cluster)"
            )
        return
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    cluster = ray.get_runtime_context().gcs_address
    alive = [node["NodeID"] for node in ray.nodes() if node["Alive"]]  # type: ignore[no-untyped-call,unused-ignore]
    nodes = [node for node in alive if (cluster, node) not in _registered_nodes]
    probe = ray.remote(_probe)
    refs = [
        probe.options(
            num_cpus=0,
            max_retries=0,
            runtime_env={NAME: _PROBE},
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
        ).remote()
        for node in nodes
    ]
    answers = ray.get(refs, timeout=timeout)
    for node, registered in zip(nodes, answers, strict=True):
        if not registered:
            raise PluginNotRegistered(
                f"the repoinstall Ray plugin is not registered on node {node}: start its Ray with "
                f"{_PLUGINS_ENV}='{PLUGINS}'"
            )
        _registered_nodes.add((cluster, node))


def _probe() -> bool:
    """On a worker: did the plugin prepare this worker (its agent loaded the plugin)?"""
    return TREES_ENV in os.environ


def _lists_plugin(setting: str) -> bool:
    try:
        configs = json.loads(setting) if setting else []
    except ValueError:
        return False
    wanted = f"{__name__}.RepoInstallPlugin"
    return isinstance(configs, list) and any(isinstance(c, dict) and c.get("class") == wanted for c in configs)
