"""The pip backend: ``python -m pip install --target <staging>`` with the user's index options and pip config."""

from __future__ import annotations

import os

from ..._options import InstallOptions
from ..._requirements import Requested, hashed_requirements

#: pip settings that would send files somewhere other than --target; everything else in PIP_* and pip.conf
#: (indexes, certificates, proxies, find-links) stays in force, since that is how users reach private indexes.
_DESTINATION_VARIABLES = ("PIP_TARGET", "PIP_PREFIX", "PIP_ROOT", "PIP_USER", "PIP_EDITABLE", "PIP_UPGRADE")


def options_args(options: InstallOptions) -> list[str]:
    """The resolution options as pip arguments; index URLs are in :meth:`_Pip.environment`."""
    args: list[str] = []
    for location in options.find_links:
        args += ["--find-links", location]
    if options.no_index:
        args.append("--no-index")
    for path in options.constraints:
        args += ["--constraint", os.path.abspath(path)]
    if options.cache_dir:
        args += ["--cache-dir", os.path.join(os.path.abspath(options.cache_dir), "pip")]
    return args


class _Pip:
    name = "pip"

    def version(self) -> str:
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("pip")
        except PackageNotFoundError:
            return "unknown"

    def command(self, options: InstallOptions, target: str, requested: Requested, pin: str, scratch: str) -> list[str]:
        """The pip command line. ``--`` ends pip's options, so the requirement can never be read as one."""
        base = [
            options.python,
            "-m",
            "pip",
            "install",
            "--target",
            target,
            "--no-input",
            "--disable-pip-version-check",
            "--no-warn-script-location",
            # Bytecode now, by the interpreter the tree is for (and recorded in RECORD): pods import from a shared,
            # maybe read-only volume and must never need to write __pycache__ there. Beats pip.conf's no-compile.
            "--compile",
            *options_args(options),
        ]
        if requested.locked:  # a lock file's tree: ``pin`` is its requirements file, every line hashed
            return [*base, "--no-deps", "--require-hashes", "-r", pin]
        if not requested.hashes:
            return [*base, "--", pin]
        return [*base, "--require-hashes", "-r", hashed_requirements(scratch, requested, pin)]

    def environment(self, options: InstallOptions) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _DESTINATION_VARIABLES}
        # Index URLs may carry credentials: in pip's environment, never on its command line (/proc/<pid>/cmdline).
        # A variable beats pip.conf as the option would; the extra indexes are the merged list pip would build
        # from its configuration plus ours, since a variable replaces where an option adds.
        if options.index_url:
            env["PIP_INDEX_URL"] = options.index_url
        if options.extra_index_urls:
            from ..._pipconfig import index_config

            env["PIP_EXTRA_INDEX_URL"] = " ".join(index_config(options._replace(no_index=False)).index_urls[1:])
        return env

    def settle(self, target: str) -> None:
        """pip's tree needs nothing: it records its bytecode in RECORD itself."""


PIP = _Pip()
