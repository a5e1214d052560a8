#!/bin/sh
# Install the wheel(s) in WHEEL_DIR with their dependencies, then prove the entry point runs:
#   install.sh WHEEL_DIR [extra pip options...]
# The Dockerfile runs it against the index; the test runs it in a fresh venv with --no-index.
set -eu
wheels="$1"
shift
python -m pip install --no-cache-dir --disable-pip-version-check "$@" "$wheels"/repoinstall-*.whl
repoinstall --help >/dev/null
