# syntax=docker/dockerfile:1
# One image, two entrypoints:
#   * runner Jobs (built by ptah.workload.job) set no command, only args, so the image's
#     ENTRYPOINT is the runner: `ptah-runner <operation> ...`;
#   * the operator Deployment (deploy/helm/ptah) sets command: [ptah, operator, run].
# tests/unit/test_dockerfile.py checks that every file and entrypoint named here exists.

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml ./
# The pinned dependencies (and the build backend) in a layer of their own, read from
# pyproject.toml: a change to the source or the README rebuilds only the layers below,
# in seconds.
RUN python -m venv /opt/ptah \
 && /opt/ptah/bin/python -c 'import tomllib; d = tomllib.load(open("pyproject.toml", "rb")); print("\n".join(d["project"]["dependencies"] + d["build-system"]["requires"]))' > /tmp/requirements.txt \
 && /opt/ptah/bin/pip install -r /tmp/requirements.txt
COPY README.md ./
COPY src ./src
RUN /opt/ptah/bin/pip install --no-deps --no-build-isolation . \
 && /opt/ptah/bin/pip uninstall --yes --quiet setuptools \
 && /opt/ptah/bin/ptah --help >/dev/null \
 && test -x /opt/ptah/bin/ptah-runner

FROM python:3.11-slim
LABEL org.opencontainers.image.title="ptah" \
      org.opencontainers.image.description="Ptah operator and runner: safe relational schema changes on Kubernetes" \
      org.opencontainers.image.source="https://github.com/ptah-io/ptah"
RUN groupadd --system --gid 10001 ptah \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin ptah
# The base image ships its standard library without bytecode (docker-library/python
# deletes every .pyc) and at run time nothing can write any (PYTHONDONTWRITEBYTECODE, a
# non-root user on a read-only layer): every runner Job, CLI command and operator start
# compiled each stdlib module it imports from source, 2.7x the runner's CPU time to its
# first database round trip. Compiled once here (12 MB), they load from bytecode; the
# venv's packages were compiled by pip in the build stage.
RUN python -m compileall -q -j0 \
      -x '/(idlelib|tkinter|turtledemo|lib2to3|ensurepip|pydoc_data|site-packages)/' \
      /usr/local/lib/python3.11
COPY --from=build /opt/ptah /opt/ptah
ENV PATH=/opt/ptah/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
WORKDIR /tmp
# Numeric, so runAsNonRoot can verify it without reading /etc/passwd.
USER 10001:10001
ENTRYPOINT ["ptah-runner"]
