#!/usr/bin/env bash
# Regenerates vmlinux.h from the running kernel's BTF. CO-RE relocations make the committed
# header usable on other kernels; regenerate only to pick up new kernel types.
set -euo pipefail
cd "$(dirname "$0")"
bpftool btf dump file /sys/kernel/btf/vmlinux format c > vmlinux.h
echo "vmlinux.h regenerated from $(uname -r)"
