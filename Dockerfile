# repoinstall's image: `repoinstall ensure ...` as the entry point, run as a non-root user.
#
# The environment tag decides which trees an image can use: build this image FROM the same Python base
# (version, libc, architecture) as the workers that import from the repo, e.g.
#   docker build --build-arg PYTHON_IMAGE=python:3.12-slim-bookworm -t repoinstall:py312 .
# or install repoinstall into the workers' own image instead (README: "Running on Kubernetes").
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
COPY . /src
RUN python -m pip install --no-cache-dir --disable-pip-version-check hatchling \
 && sh /src/docker/build-wheel.sh /src /wheels

FROM ${PYTHON_IMAGE}
COPY --from=build /wheels /wheels
COPY docker/install.sh /tmp/install.sh
# Only the wheel, its runtime dependencies and uv: no compilers, no build backend, no pip cache.
RUN sh /tmp/install.sh /wheels \
 && rm -rf /wheels /tmp/install.sh \
 && useradd --uid 10001 --gid 0 --home-dir /home/repoinstall --create-home --shell /usr/sbin/nologin repoinstall
# A read-only root filesystem works: HOME and the caches point at /tmp, which the chart mounts as an emptyDir.
# pip's and uv's download caches live there, shared by the pod's installs (never linked into trees).
ENV HOME=/tmp XDG_CACHE_HOME=/tmp/.cache PYTHONUNBUFFERED=1
USER 10001:0
WORKDIR /tmp
ENTRYPOINT ["repoinstall"]
CMD ["--help"]
