"""The installed version, at the bottom of the import graph: the repo's format statement names its writer's."""

#: pyproject.toml's ``version`` says the same (a test checks). A literal: reading the distribution's metadata would
#: cost the warm path an importlib.metadata import.
VERSION = "0.1.0"
