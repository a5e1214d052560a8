"""A registry bound or rate that is not positive is one line naming its option (exit 2 on the command line)."""

from __future__ import annotations

import pytest

from repoinstall._cli.options import Options
from repoinstall._oci.settings import Settings


@pytest.mark.parametrize(
    ("field", "option"),
    [
        ("max_layers", "--registry-max-layers"),
        ("max_layer_bytes", "--registry-max-layer-bytes"),
        ("max_layer_files", "--registry-max-layer-files"),
        ("max_bytes", "--registry-max-bytes"),
        ("max_files", "--registry-max-files"),
        ("min_rate", "--registry-min-rate"),
        ("rate_window", "--registry-rate-window"),
    ],
)
def test_a_bound_that_is_not_positive_names_its_option(field: str, option: str) -> None:
    assert Settings().validate() is None
    for bad in (0, -1):
        problem = Settings()._replace(**{field: bad}).validate()
        assert problem is not None and problem.startswith(f"{option} must be a positive")


def test_the_command_lines_values_reach_the_settings() -> None:
    options = Options(registry_max_layers=7, registry_max_bytes=9, registry_min_rate=3, registry_rate_window=0.5)
    settings = options.registry_settings()
    assert (settings.max_layers, settings.max_bytes, settings.min_rate, settings.rate_window) == (7, 9, 3, 0.5)
    assert Options().registry_settings() == Settings()
