#!/usr/bin/env bash
# Build vgate's image here, where public base images cannot be pulled and a build container cannot
# reach PyPI: a Debian base made from Debian's packages (mmdebstrap, cached in .e2e/image), vgate's
# wheels built outside the container from what the Dockerfile copies, then the repository's
# Dockerfile with BASE pointing at that base. Prints the image's name and size.
set -euo pipefail
cd "$(dirname "$0")/.."
cache=.e2e/image
base=localhost/vgate-base:bookworm
image=${1:-localhost/vgate:dev}
mkdir -p "$cache"
if ! podman image exists "$base"; then
  [ -s "$cache/base.tar" ] || mmdebstrap --quiet --variant=apt --include=python3,python3-venv,ca-certificates \
    --components=main bookworm "$cache/base.tar" http://deb.debian.org/debian
  podman import -q "$cache/base.tar" "$base" >/dev/null
fi
# Wheels from a clean copy of what the Dockerfile copies (a build from the checkout can take stale
# modules from build/).
source=$(mktemp -d)
trap 'rm -rf "$source"' EXIT
cp pyproject.toml README.md "$source/"
cp -r webhook "$source/webhook"
find "$source" -name __pycache__ -prune -exec rm -rf {} +
find wheels -name '*.whl' -delete
"${PYTHON:-.venv/bin/python}" -m pip wheel -q -w wheels "$source"
buildah bud -q --layers=false --build-arg BASE="$base" -t "$image" -f Dockerfile . >/dev/null
podman image inspect "$image" --format '{{.Size}}' | awk -v name="$image" '{printf "%s %.0f MB\n", name, $1 / 1e6}'
