#!/usr/bin/env bash
# Sets up a fresh machine and runs the whole test suite: unit tests and end-to-end tests
# that attach the real tprof to real Python/torch processes (torch 1.13 on the host and
# torch 2.6 and torch 2.14 in Debian trixie and sid roots, built once and cached).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
bash scripts/make-torch-root.sh trixie >/dev/null
bash scripts/make-torch-root.sh sid >/dev/null
cd build
ctest --output-on-failure --timeout 900 "$@"
