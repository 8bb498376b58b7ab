# Sourced by the GPU checks (gpu_check.sh, compiled_kernels_check.sh) after they set `check`
# (their name, for messages) and, where they need more than torch, `python_modules` (say
# "torch, triton"): reads their arguments [BUILD_DIR] [OUT_DIR] [PYTHON] into build, out and
# python, defines skip (exit 77, loudly) and fail (exit 1), and skips without an NVIDIA GPU, a
# python whose torch has CUDA (and those modules), root or a kernel with BTF (gVisor has none).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${1:-$repo/build}
out=${2:-$(mktemp -d)}
python=${3:-python3}
mkdir -p "$out"

skip() { echo "*** SKIPPED LOUDLY: $* ***"; exit 77; }
fail() { echo "$check: FAILED: $*"; exit 1; }

command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || skip "no NVIDIA GPU here; $check did NOT run"
"$python" -c "import sys, ${python_modules:-torch}; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null \
  || skip "$python has no ${python_modules:-torch} with CUDA; $check did NOT run"
[ -x "$build/tprof" ] && [ -f "$build/libtprof_cupti.so" ] || fail "no tprof or libtprof_cupti.so in $build"
[ "$(id -u)" -eq 0 ] || skip "BPF needs root; $check did NOT run"
grep -q . /sys/kernel/btf/vmlinux 2>/dev/null || skip "this kernel has no BTF (gVisor?): tprof cannot attach; $check did NOT run"
