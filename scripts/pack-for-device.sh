#!/usr/bin/env bash
# Packs what a machine without tprof's build dependencies needs to run it (the GPU machines the
# device tool lends have no package manager): build/tprof, libtprof_cupti.so beside it, the
# shared libraries tprof links besides glibc, the GPU checks and their workloads.
#   bash scripts/pack-for-device.sh [BUILD_DIR] [PACK_DIR]     (default build/, .device-pack/)
# There: PACK_DIR/tprof finds the packed libraries through its RUNPATH ($ORIGIN/lib, set with
# patchelf), so that nothing it starts (tprof record's command) inherits them; and
#   bash PACK_DIR/tests/gpu/gpu_check.sh PACK_DIR OUT_DIR python3
# runs the GPU check (compiled_kernels_check.sh, torch.compile's, likewise). glibc comes from
# that machine (built here against Debian bookworm's 2.36).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$repo/build}
pack=${2:-$repo/.device-pack}
[ -x "$build/tprof" ] || { echo "pack-for-device: no $build/tprof (run scripts/build.sh)" >&2; exit 1; }
rm -rf "$pack"
mkdir -p "$pack/lib" "$pack/tests/gpu" "$pack/tests/workloads"
command -v patchelf >/dev/null || { echo "pack-for-device: needs patchelf (apt-get install patchelf)" >&2; exit 1; }
cp "$build/tprof" "$pack/tprof"
patchelf --set-rpath '$ORIGIN/lib' "$pack/tprof"
[ -f "$build/libtprof_cupti.so" ] && cp "$build/libtprof_cupti.so" "$pack/"
# Every library the binary links except glibc's own, which must match the kernel ABI there.
ldd "$build/tprof" | awk '/=> \// {print $1, $3}' | while read -r name path; do
  case "$name" in libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|ld-linux*) continue ;; esac
  cp -L "$path" "$pack/lib/$name"
done
cp "$repo/tests/gpu/gpu_check.sh" "$repo/tests/gpu/compiled_kernels_check.sh" "$repo/tests/gpu/gpu_machine.sh" "$pack/tests/gpu/"
cp "$repo/tests/workloads/cuda_train_loop.py" "$repo/tests/workloads/cuda_compiled_function.py" "$pack/tests/workloads/"
echo "pack-for-device: $(du -sh "$pack" | cut -f1) in $pack"
