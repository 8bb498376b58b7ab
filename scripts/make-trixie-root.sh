#!/usr/bin/env bash
# Builds (once) a Debian trixie root with python3-torch (torch 2.6 on Python 3.13): the
# container-like target for end-to-end tests. Cached across runs; rebuilt when missing or
# incomplete. Prints the root's path on stdout.
set -euo pipefail

root=${TPROF_TRIXIE_ROOT:-/var/cache/tprof/trixie-torch}
stamp="$root/.tprof-complete"

log() { printf 'make-trixie-root: %s\n' "$*" >&2; }

if [ -f "$stamp" ] && [ -x "$root/usr/bin/python3" ]; then
  printf '%s\n' "$root"
  exit 0
fi

[ "$(id -u)" -eq 0 ] || { log "error: must run as root (debootstrap)"; exit 1; }
command -v debootstrap >/dev/null || { log "error: debootstrap missing; run scripts/install-deps.sh"; exit 1; }

rm -rf "$root"
mkdir -p "$(dirname "$root")"
log "building $root with debootstrap (about 2 minutes, 1.5 GB)"
# No mirror argument: debootstrap's default archive for the suite.
debootstrap --variant=minbase --include=python3-torch trixie "$root" >"$root.log" 2>&1 || {
  log "error: debootstrap failed; see $root.log"; tail -n 20 "$root.log" >&2; exit 1; }
chroot "$root" python3 -c 'import torch; print(torch.__version__)' >&2
touch "$stamp"
printf '%s\n' "$root"
