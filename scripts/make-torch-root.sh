#!/usr/bin/env bash
# Builds (once) a Debian root with that suite's python3-torch: the container-like targets of
# the end-to-end tests, each a torch and a Python the host does not have.
#   bash scripts/make-torch-root.sh trixie   # torch 2.6 on Python 3.13
#   bash scripts/make-torch-root.sh sid      # torch 2.14 on Python 3.14 (GCC 16)
# Cached in /var/cache/tprof/<suite>-torch (TPROF_<SUITE>_ROOT overrides it); rebuilt when
# missing or incomplete. Prints the root's path on stdout.
set -euo pipefail

log() { printf 'make-torch-root: %s\n' "$*" >&2; }

suite=${1:-}
case "$suite" in
  trixie | sid) ;;
  *) log "usage: make-torch-root.sh trixie|sid"; exit 2 ;;
esac
override_variable="TPROF_${suite^^}_ROOT"
root=${!override_variable:-/var/cache/tprof/$suite-torch}
stamp="$root/.tprof-complete"

# torch 2.14 reads /proc at import (its CPU feature and thread-count probes); a chroot sees
# the root's own /proc, so one is mounted there. Harmless for the older torches.
mount_proc() {
  mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
}

if [ -f "$stamp" ] && [ -x "$root/usr/bin/python3" ]; then
  [ "$(id -u)" -ne 0 ] || mount_proc
  printf '%s\n' "$root"
  exit 0
fi

[ "$(id -u)" -eq 0 ] || { log "error: must run as root (debootstrap)"; exit 1; }
command -v debootstrap >/dev/null || { log "error: debootstrap missing; run scripts/install-deps.sh"; exit 1; }

# A half-built root may still have its /proc mounted from an earlier attempt.
if mountpoint -q "$root/proc" 2>/dev/null; then umount "$root/proc"; fi
rm -rf "$root"
mkdir -p "$(dirname "$root")"
log "building $root with debootstrap (a few minutes, 1.5-2 GB)"
# No mirror argument: debootstrap's default archive for the suite.
debootstrap --variant=minbase --include=python3-torch "$suite" "$root" >"$root.log" 2>&1 || {
  log "error: debootstrap failed; see $root.log"; tail -n 20 "$root.log" >&2; exit 1; }
mount_proc
chroot "$root" python3 -c 'import sys, torch; print("torch", torch.__version__, "on Python", sys.version.split()[0])' >&2
touch "$stamp"
printf '%s\n' "$root"
