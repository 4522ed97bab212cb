# vgate: wheels built (or taken prebuilt) in one stage, installed into a venv on a base with no
# compilers, run as a non-root user.
#
# BASE: the published python:3.11-slim where it can be pulled; where it cannot, a Debian base made
# from Debian's packages (e2e/image.sh makes one with mmdebstrap: python3, python3-venv).
# wheels/: prebuilt wheels, for a build container that cannot reach PyPI (e2e/image.sh builds them
# outside); when it holds none, they are built here.
ARG BASE=python:3.11-slim

FROM ${BASE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY webhook ./webhook
COPY wheels/ /wheels/
RUN ls /wheels/*.whl >/dev/null 2>&1 || python3 -m pip wheel --no-cache-dir --wheel-dir /wheels .

FROM ${BASE}
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PATH=/opt/vgate/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RUN groupadd --system --gid 10001 vgate && useradd --system --uid 10001 --gid vgate --home /app vgate
COPY --from=build /wheels /wheels
RUN python3 -m venv /opt/vgate && /opt/vgate/bin/pip install --no-cache-dir --no-index --find-links /wheels vgate \
    && rm -rf /wheels
WORKDIR /app
COPY policies ./policies
RUN mkdir -p audit reports certs keys exceptions && chown vgate:vgate audit reports certs keys exceptions
USER 10001:10001
EXPOSE 8443
ENTRYPOINT ["vgate"]
CMD ["serve"]
