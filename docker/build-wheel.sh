#!/bin/sh
# Build repoinstall's wheel from a source tree: build-wheel.sh SOURCE_DIR WHEEL_DIR
# Used by the Dockerfile's build stage and by the test that checks the image's steps (CI has no container engine).
set -eu
python -m pip wheel --no-deps --no-build-isolation --no-cache-dir --wheel-dir "$2" "$1"
