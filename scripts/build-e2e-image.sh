#!/usr/bin/env bash
# Builds the guest image for the end-to-end tests (the QEMU-backed smolvm
# stand-in under tests/smolvm-qemu): a Debian bookworm rootfs made with
# debootstrap from the mirror this machine's apt already uses, the matching
# Debian cloud kernel and its virtio modules, and the stand-in's own guest
# init, packed into a sparse ext4 image with mkfs.ext4 -d (no loop mount).
#
# Output: a directory holding root.img, vmlinuz and KEY; its path is the last
# line on stdout. Everything else goes to stderr.
#
# Cache: ${HBX_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hermes-box-e2e},
# outside the repository. The rootfs is keyed by a hash of this script, the
# mirror and the kernel package version; the image by that key plus the guest
# init binary. Later runs reuse both. Needs root (debootstrap, chroot, mkfs
# with root-owned files), debootstrap, e2fsprogs, apt and Go.
#
# Usage: scripts/build-e2e-image.sh
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cache=${HBX_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hermes-box-e2e}
suite=bookworm
# Every package provision installs (guest-agent/internal/provision.Packages)
# is pre-included, so its apt steps find nothing to do and need no network.
packages=openssh-server,sudo,tmux,python3,ca-certificates,iproute2,procps,kmod,e2fsprogs,build-essential,curl,git,libffi-dev,ncurses-term,python3-dev,ripgrep,xz-utils
image_size=8G
init_path=sbin/smolvm-qemu-init

log() { echo "build-e2e-image: $*" >&2; }
die() { log "error: $*"; exit 1; }

# mirror prints the first Debian mirror URI that apt uses for $suite main,
# from one-line sources (sources.list, *.list) or deb822 (*.sources).
mirror() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -r "$f" ] || continue
    awk -v s="$suite" '
      $1 == "deb" {
        i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
        if ($(i+1) == s) { for (j = i + 2; j <= NF; j++) if ($j == "main") { print $i; exit } }
      }' "$f"
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -r "$f" ] || continue
    awk -v s="$suite" '
      function flush() { if (deb && suites && comps && uri != "") { print uri; found = 1 } deb = 0; suites = 0; comps = 0; uri = "" }
      /^[ \t]*$/ { flush(); if (found) exit; next }
      /^Types:/ { for (j = 2; j <= NF; j++) if ($j == "deb") deb = 1 }
      /^URIs:/ { uri = $2 }
      /^Suites:/ { for (j = 2; j <= NF; j++) if ($j == s) suites = 1 }
      /^Components:/ { for (j = 2; j <= NF; j++) if ($j == "main") comps = 1 }
      END { if (!found) flush() }' "$f"
  done
}

# kernel_package prints the versioned cloud kernel package and its version.
kernel_package() {
  local pkg ver
  pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null | awk '/Depends: linux-image-/{print $2; exit}')
  [ -n "$pkg" ] || return 1
  ver=$(apt-cache policy "$pkg" | awk '/Candidate:/{print $2; exit}')
  [ -n "$ver" ] && [ "$ver" != "(none)" ] || return 1
  echo "$pkg $ver"
}

[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap, chroot and mkfs.ext4 -d keep root-owned files)"
for tool in debootstrap mkfs.ext4 apt-get apt-cache dpkg-deb go chroot flock sha256sum; do
  command -v "$tool" >/dev/null || die "missing tool: $tool"
done
[ "$(dpkg --print-architecture)" = amd64 ] || die "only amd64 hosts are supported (the Debian cloud kernel is amd64)"

mirror_url=$(mirror | head -n 1)
[ -n "$mirror_url" ] || die "no Debian $suite main mirror found in /etc/apt/sources.list*"
if ! kinfo=$(kernel_package); then
  log "apt lists have no linux-image-cloud-amd64; running apt-get update"
  apt-get update -qq >&2
  kinfo=$(kernel_package) || die "no candidate for linux-image-cloud-amd64 from apt"
fi
read -r kpkg kver_pkg <<<"$kinfo"
kver=${kpkg#linux-image-}

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9

rootfs_key=$( { sha256sum <"$0"; echo "$mirror_url $suite $kpkg $kver_pkg"; } | sha256sum | cut -c1-16)
rootfs="$cache/rootfs-$rootfs_key"

build_rootfs() {
  local tmp="$cache/tmp-rootfs-$$" start=$SECONDS
  rm -rf "$tmp" && mkdir -p "$tmp"
  trap 'rm -rf "$tmp"' EXIT
  log "debootstrap $suite from $mirror_url"
  debootstrap --variant=minbase --include="$packages" "$suite" "$tmp/root" "$mirror_url" >"$tmp/debootstrap.log" 2>&1 ||
    { tail -n 30 "$tmp/debootstrap.log" >&2; die "debootstrap failed"; }
  log "debootstrap done in $((SECONDS - start)) s; fetching $kpkg $kver_pkg"
  (cd "$tmp" && apt-get download -o APT::Sandbox::User=root "$kpkg=$kver_pkg" >&2)
  dpkg-deb -x "$tmp"/"$kpkg"_*.deb "$tmp/kernel"
  local m="lib/modules/$kver"
  mkdir -p "$tmp/root/$m"
  (cd "$tmp/kernel" && cp -a --parents "$m/kernel/drivers/virtio" "$m/kernel/drivers/block/virtio_blk.ko" \
    "$m/kernel/drivers/net/virtio_net.ko" "$m/kernel/drivers/net/net_failover.ko" \
    "$m/kernel/net/core/failover.ko" "$m/kernel/drivers/char/virtio_console.ko" \
    "$m/kernel/drivers/char/hw_random/virtio-rng.ko" "$m/modules.order" "$m/modules.builtin" \
    "$m/modules.builtin.modinfo" "$tmp/root/")
  chroot "$tmp/root" depmod -a "$kver"
  rm -rf "$tmp"/root/var/cache/apt/archives/*.deb "$tmp"/root/var/lib/apt/lists/*_Packages
  mkdir -p "$tmp/out"
  mv "$tmp/root" "$tmp/out/root"
  cp "$tmp/kernel/boot/vmlinuz-$kver" "$tmp/out/vmlinuz"
  mv "$tmp/out" "$rootfs"
  rm -rf "$tmp"
  trap - EXIT
  log "rootfs ready in $((SECONDS - start)) s"
}

[ -d "$rootfs" ] || build_rootfs

# The guest init is built on every run (Go's cache makes it quick) and its
# hash keys the image, so a change to it rebuilds only the ext4 step.
initbin="$cache/tmp-init-$$"
trap 'rm -f "$initbin"' EXIT
(cd "$repo" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags '-s -w' -o "$initbin" ./tests/smolvm-qemu/guestinit)
image_key=$( { echo "$rootfs_key $image_size"; sha256sum <"$initbin"; } | sha256sum | cut -c1-16)
image="$cache/image-$image_key"

if [ ! -f "$image/KEY" ]; then
  start=$SECONDS
  tmp="$cache/tmp-image-$$"
  rm -rf "$tmp" && mkdir -p "$tmp"
  install -m 0755 "$initbin" "$rootfs/root/$init_path"
  mkfs.ext4 -q -F -L smolvmroot -d "$rootfs/root" "$tmp/root.img" "$image_size" >&2
  cp "$rootfs/vmlinuz" "$tmp/vmlinuz"
  echo "$image_key" >"$tmp/KEY"
  rm -rf "$image" && mv "$tmp" "$image"
  log "image ready in $((SECONDS - start)) s"
fi

# Drop older builds that nothing has touched for an hour.
find "$cache" -mindepth 1 -maxdepth 1 \( -name 'rootfs-*' -o -name 'image-*' -o -name 'tmp-*' \) \
  ! -name "rootfs-$rootfs_key" ! -name "image-$image_key" -mmin +60 -exec rm -rf {} + 2>/dev/null || true
touch "$image"
echo "$image"
