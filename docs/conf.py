"""The documentation site: Sphinx with the furo theme, pages in Markdown (MyST), the API reference from the
docstrings (autodoc). Built strict in the test suite (tests/test_docs.py): every warning is an error, so a broken
link, a page outside the table of contents or a reference that does not resolve fails CI.

    sphinx-build -W --keep-going -n -b html docs docs/_build/html
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from repoinstall import __version__  # noqa: E402

if TYPE_CHECKING:
    from docutils.nodes import Element
    from sphinx.addnodes import pending_xref
    from sphinx.application import Sphinx
    from sphinx.environment import BuildEnvironment

project = "repoinstall"
author = "repoinstall maintainers"
copyright = "repoinstall maintainers, MIT License"
release = version = __version__

extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
#: Headings get anchors (``page.md#a-heading``) and a link to one that does not exist is a warning.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]

html_theme = "furo"
html_title = f"repoinstall {__version__}"
html_static_path: list[str] = []
#: Nothing is fetched from elsewhere when the site is built or read (no web fonts, no analytics).
html_theme_options = {"top_of_page_buttons": []}

# The API reference: what ``repoinstall`` exports, typed as the code says.
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": False}
#: Every cross-reference must resolve (the build runs with -n): names of other projects' types, which no
#: inventory here describes (the build fetches nothing), are not held against it.
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(os|io|collections|contextlib|typing|types|pathlib|asyncio|concurrent|logging|threading)(\..*)?"),
    (r"py:.*", r"(httpx|distributed|ray|celery|kombu|click|typer|packaging|enum)(\..*)?"),
    (r"py:.*", r"(Version|SpecifierSet|Requirement)"),
    (r"py:.*", r"(Path|PathLike|Sequence|Mapping|Iterable|Iterator|Callable|Awaitable|AbstractContextManager)"),
    (r"py:.*", r"(Any|~?T|~?P|~?R|repoinstall\.celery\.R|Worker)"),
    # The private parts a public docstring or signature names (specs parsed, tree identities, record rows,
    # the engines' shared core): documented in the code for its readers, not on the site.
    (r"py:.*", r"repoinstall\._.*"),
    (r"py:.*", r"(Artifact|Dist|Packages\.\w+|repoinstall\.ray\.RuntimeEnvContext)"),
    # Public types as a signature names them in short (their entries are under their public names).
    (r"py:.*", r"(Requested|TreeId|TreeKind|Pin|FileIndex|Reference|Settings|RegistrySettings|Pushed|Obstacle)"),
]

#: The engine adapters' own engines, where this environment lacks them (``pip install '.[docs]'`` alone).
autodoc_mock_imports = [name for name in ("distributed", "ray", "celery") if importlib.util.find_spec(name) is None]


def _exported(app: Sphinx, env: BuildEnvironment, node: pending_xref, contnode: Element) -> Element | None:
    """Resolve a name the code spells by its defining private module (``repoinstall._results.EnsureResult``, as
    annotations give it) or bare (``:class:`NotInstalled``` in a docstring) to the documented public one,
    ``repoinstall.EnsureResult``. A name repoinstall does not export still fails the build."""
    import repoinstall

    if node.get("refdomain") != "py":
        return None
    parts = node["reftarget"].lstrip("~").split(".")
    if parts[0] == "repoinstall":  # repoinstall._results.EnsureResult: from the defining module on
        parts = parts[2:] if len(parts) > 2 and parts[1].startswith("_") else parts[1:]
    public = next((i for i, part in enumerate(parts) if part in repoinstall.__all__), None)
    if public is None:
        return None
    target = ".".join(["repoinstall", *parts[public:]])
    if target == node["reftarget"]:
        return None
    domain = env.get_domain("py")
    return domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], target, node, contnode)


def setup(app: Sphinx) -> None:
    app.connect("missing-reference", _exported)
