#!/usr/bin/env bash
# Wheels for bench/gpu_device.sh, into .whl/ (ignored by git through .git/info/exclude).
#
# The device machine's image (python3 3.12 with torch, transformers and accelerate; nothing can
# be installed there from a registry) lacks diffusers and pydantic, and holds another
# transformers than the one tested here. This downloads, for its Python 3.12 on x86-64, the
# packages bench/gpu_generate.py needs beyond that image, each at the version this checkout's
# .venv holds (so the GPU runs the versions the tests ran). 23 MB; the device call carries
# at most 64 MiB with the working tree.
#
# Run:  bash bench/gpu_wheels.sh        (needs the .venv that `make test` makes)
#       PYVER=3.11 bash bench/gpu_wheels.sh   (for `bash bench/gpu_device.sh --smoke` here)
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-.venv/bin/python}
dest=.whl
pyver=${PYVER:-3.12}
# Not in the image: diffusers; pydantic (medibench's configs) and what it needs; importlib
# metadata, which diffusers declares. At another version there: transformers (5.17 against the
# tested one), and regex and typing-extensions, whose lower bounds the ones above raise.
packages=(diffusers transformers pydantic pydantic-core annotated-types typing-inspection
          typing-extensions regex importlib-metadata lazy-importer)
if [ -d .git ] && ! grep -qx '/.whl/' .git/info/exclude 2>/dev/null; then
  echo /.whl/ >>.git/info/exclude
fi
rm -rf "$dest"
mkdir -p "$dest"
for name in "${packages[@]}"; do
  version=$("$py" -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' "$name") || {
    echo "gpu_wheels: $name is not installed in $py; run make test first (it makes .venv)" >&2
    exit 1
  }
  "$py" -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 -d "$dest" "$name==$version"
done
ls "$dest"
du -sh "$dest"
