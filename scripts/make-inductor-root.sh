#!/usr/bin/env bash
# Builds (once) a root where torch.compile's inductor can compile C++ kernels: the suite's
# torch root (scripts/make-torch-root.sh) with g++, python3-dev and libtorch-dev added in an
# overlay, so that the cached torch root itself is never modified.
#   bash scripts/make-inductor-root.sh trixie   # torch 2.6 on Python 3.13
#   bash scripts/make-inductor-root.sh sid      # torch 2.14 on Python 3.14
# The overlay's layer is cached in /var/cache/tprof/<suite>-inductor.layer and mounted on
# /var/cache/tprof/<suite>-inductor (TPROF_<SUITE>_INDUCTOR_ROOT overrides it); it is rebuilt when
# missing, incomplete, or made on another build of the torch root. Prints the root's path.
set -euo pipefail

log() { printf 'make-inductor-root: %s\n' "$*" >&2; }

suite=${1:-}
case "$suite" in
  trixie | sid) ;;
  *) log "usage: make-inductor-root.sh trixie|sid"; exit 2 ;;
esac
[ "$(id -u)" -eq 0 ] || { log "error: must run as root (mount, apt-get in a chroot)"; exit 1; }

lower=$(bash "$(dirname "$0")/make-torch-root.sh" "$suite")
override_variable="TPROF_${suite^^}_INDUCTOR_ROOT"
root=${!override_variable:-/var/cache/tprof/$suite-inductor}
layer="$root.layer"
stamp="$layer/upper/.tprof-inductor-complete"
# The layer belongs to one build of the torch root: that build's completion time names it.
lower_build=$(stat -c %Y "$lower/.tprof-complete")

unmount_all() {
  if mountpoint -q "$root/proc" 2>/dev/null; then umount "$root/proc"; fi
  if mountpoint -q "$root" 2>/dev/null; then umount "$root"; fi
}

mount_overlay() {
  mkdir -p "$root" "$layer/upper" "$layer/work"
  mountpoint -q "$root" ||
    mount -t overlay overlay -o "lowerdir=$lower,upperdir=$layer/upper,workdir=$layer/work" "$root"
  # torch reads /proc at import; the lower root's /proc mount does not show through.
  mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
}

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$lower_build" ]; then
  mount_overlay
  printf '%s\n' "$root"
  exit 0
fi

unmount_all
rm -rf "$layer"
mount_overlay
log "adding g++, python3-dev and libtorch-dev to an overlay of $lower (a few minutes)"
{
  # The archive's sid may be a snapshot whose Release file has expired: its packages are still
  # the ones the torch root was built from.
  chroot "$root" apt-get -o Acquire::Check-Valid-Until=false update &&
    DEBIAN_FRONTEND=noninteractive chroot "$root" apt-get install -y --no-install-recommends \
      g++ python3-dev libtorch-dev
} >"$layer.log" 2>&1 || { log "error: apt-get in the overlay failed; see $layer.log"; tail -n 20 "$layer.log" >&2; exit 1; }
chroot "$root" apt-get clean
printf '%s\n' "$lower_build" >"$stamp"
printf '%s\n' "$root"
