"""Each command-line option is declared once, and the commands that share it take it from that declaration."""

from __future__ import annotations

import ast
from pathlib import Path

import typer.main

from repoinstall._cli.app import app
from repoinstall._cli.options import DECLARED, Options

CLI = Path(__file__).parents[2] / "repoinstall" / "_cli"


def _declared_flags() -> list[str]:
    """Every ``--flag`` named in a typer.Option(...) call anywhere in the command line's source."""
    flags = []
    for path in CLI.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "Option":
                flags += [
                    str(a.value) for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("--")
                ]
    return flags


def test_no_option_is_declared_twice() -> None:
    flags = _declared_flags()
    assert len(flags) > 20
    assert sorted(f for f in set(flags) if flags.count(f) > 1) == []


def _options_of(command: str) -> dict[str, object]:
    click_app = typer.main.get_command(app)
    sub = click_app.commands[command]  # type: ignore[attr-defined]
    return {p.name: p.default for p in sub.params}


def test_ensure_run_and_verify_share_one_declaration_with_the_apis_defaults() -> None:
    defaults = Options()
    for command in ("ensure", "run", "verify"):
        found = _options_of(command)
        for name in ("repo", "no_lock", "stale_after", "heartbeat", "wait_timeout", "installer", "index_url"):
            assert name in found, (command, name)
            assert found[name] == getattr(defaults, name), (command, name)
    assert set(DECLARED) == set(Options._fields)


def test_every_option_that_takes_a_value_names_it_in_upper_case() -> None:
    """One metavar style, as the usage lines write placeholders: upper-case words (FILE, URL, SECONDS, N), never
    typer's type names (``<str>``, ``<int>``); a lower-case alternative only where it is a value typed as it is."""
    from typer.core import TyperOption

    from repoinstall._cli.options import LOG_FORMATS
    from repoinstall._options import INSTALLERS

    literal = {*INSTALLERS, *LOG_FORMATS, ":all:", ":none:"}
    checked = 0
    for name, command in typer.main.get_command(app).commands.items():  # type: ignore[attr-defined]
        for param in command.params:
            if not isinstance(param, TyperOption) or param.is_flag or param.count:
                continue
            checked += 1
            assert param.metavar, (name, param.opts)
            for word in param.metavar.split("|"):
                assert word in literal or (word.isupper() and "<" not in word), (name, param.opts, param.metavar)
    assert checked > 20


def test_help_says_where_each_index_and_format_option_goes() -> None:
    """They are read to resolve unpinned specs as well as given to pip or uv, and the help says both."""
    from repoinstall._cli.options import DECLARED

    for name in ("index_url", "extra_index_url", "find_links", "no_index", "constraint", "no_binary", "only_binary"):
        (option,) = DECLARED[name].__metadata__
        assert "resolve unpinned specs" in option.help and "pip or uv" in option.help, (name, option.help)


def test_no_compile_is_taken_wherever_a_command_names_trees() -> None:
    # ensure, run, push and verify (repair) install trees; path, export and remove name them: each may be asked for
    # the trees without bytecode, which are other trees.
    for command in ("ensure", "run", "push", "verify", "path", "export", "remove"):
        assert _options_of(command)["no_compile"] is False, command
    assert Options().install_options().bytecode and not Options(no_compile=True).install_options().bytecode
    assert Options().tree_keywords() == {}
    assert not Options(no_compile=True).tree_keywords()["install"].bytecode
