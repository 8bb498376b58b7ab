#!/usr/bin/env bash
# Installs everything tprof needs to build, test and benchmark on a fresh Debian bookworm.
# Idempotent: a second run only verifies. Needs root and the Debian package archive.
#   bash scripts/install-deps.sh [--build-only]
# --build-only installs what building tprof takes and nothing the tests use (torch, the
# trixie root's debootstrap): deploy/Dockerfile's build stage.
#
# libbpf >= 1.3 (uprobe_multi) and a matching bpftool exist only in bookworm-backports, so
# that suite is enabled, reusing the archive URI this machine's apt sources already use.
set -euo pipefail

log() { printf 'install-deps: %s\n' "$*" >&2; }
die() { printf 'install-deps: error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "must run as root (apt-get install)"

export DEBIAN_FRONTEND=noninteractive

backports_list=/etc/apt/sources.list.d/tprof-bookworm-backports.sources

# The first Debian archive URI configured for the plain 'bookworm' suite.
debian_archive_uri() {
  local uri
  uri=$(awk '
    /^URIs:/ { uris=$2 }
    /^Suites:/ { for (i=2;i<=NF;i++) if ($i=="bookworm") { print uris; exit } }
  ' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
  if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
    uri=$(awk '$1=="deb" && $3=="bookworm" { for (i=2;i<=NF;i++) if ($i ~ /^(https?|file|mirror):/) { print $i; exit } }' \
      /etc/apt/sources.list)
  fi
  printf '%s' "$uri"
}

enable_backports() {
  if grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    return
  fi
  local uri
  uri=$(debian_archive_uri)
  [ -n "$uri" ] || die "no apt source for suite 'bookworm' found to derive a backports source from"
  log "enabling bookworm-backports from the configured Debian archive"
  cat >"$backports_list" <<SRC
Types: deb
URIs: $uri
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  apt-get update -qq
}

need_install=0
libbpf_version=$(dpkg-query -W -f='${Version}' libbpf-dev 2>/dev/null || true)
if ! dpkg --compare-versions "${libbpf_version:-0}" ge 1:1.3; then need_install=1; fi
base_packages=(build-essential cmake pkg-config clang llvm libelf-dev zlib1g-dev
               libgtest-dev libcli11-dev nlohmann-json3-dev libcap-dev libcapstone-dev libboost-dev systemtap-sdt-dev patchelf
               libjs-chart.js)
if [ "${1:-}" != "--build-only" ]; then
  # podman with runc: the e2e test of a real container runtime (crun refuses hybrid cgroups).
  # libclang-rt-dev: clang's libFuzzer and sanitizer runtimes, for scripts/fuzz.sh (only
  # recommended by clang, so --no-install-recommends leaves them out). chromium: the e2e test
  # that renders the HTML memory timeline headless and screenshots it.
  base_packages+=(python3-torch python3-yaml debootstrap time podman runc libclang-rt-dev chromium)
fi
for p in "${base_packages[@]}" bpftool; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need_install=1
done

if [ "$need_install" -eq 1 ]; then
  enable_backports
  [ -n "$(find /var/lib/apt/lists -name '*bookworm-backports*Packages*' 2>/dev/null | head -n1)" ] || apt-get update -qq
  log "installing packages (this takes a few minutes on a fresh machine)"
  apt-get install -y -qq --no-install-recommends "${base_packages[@]}" >/dev/null
  apt-get install -y -qq --no-install-recommends -t bookworm-backports libbpf-dev bpftool >/dev/null
fi

libbpf_version=$(dpkg-query -W -f='${Version}' libbpf-dev)
dpkg --compare-versions "$libbpf_version" ge 1:1.3 || die "libbpf-dev $libbpf_version is older than 1.3"
command -v bpftool >/dev/null || die "bpftool missing after install"
log "ok: libbpf-dev $libbpf_version, $(bpftool version | head -n1)"
