#!/bin/sh
# Install repoinstall's wheel in WHEEL_DIR with its dependencies and the uv extra (so pods may choose
# --installer uv), then prove the entry point runs:
#   install.sh WHEEL_DIR [extra pip options...]
# The Dockerfile runs it against the index; the test runs it in a fresh venv with --no-index.
set -eu
wheels="$1"
shift
wheel=$(ls "$wheels"/repoinstall-*.whl)
python -m pip install --no-cache-dir --disable-pip-version-check "$@" "${wheel}[uv]"
repoinstall --help >/dev/null
