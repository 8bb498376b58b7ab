#!/usr/bin/env bash
# Configures and builds tprof into build/ (the binary is build/tprof).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"
