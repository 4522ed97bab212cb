# vgate: build wheels in one stage, run from a slim image with no compilers, as a non-root user.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY webhook ./webhook
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
RUN groupadd --system --gid 10001 vgate && useradd --system --uid 10001 --gid vgate --home /app vgate
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels vgate && rm -rf /wheels
WORKDIR /app
COPY policies ./policies
RUN mkdir -p audit reports certs keys exceptions && chown vgate:vgate audit reports certs keys exceptions
USER 10001:10001
EXPOSE 8443
ENTRYPOINT ["vgate"]
CMD ["serve"]
