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
# Cache: ${HBX_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hermes-box-e2e}
# for amd64, the same with -arm64 appended for arm64 (one directory per
# architecture: each run prunes what it did not use within the hour, so a
# shared one would let make e2e and make e2e-arm64 evict each other's
# rootfs), outside the repository. The rootfs is keyed by a hash of this script, the
# mirror and the kernel package version; the image by that key plus the guest
# init binary. Later runs reuse both. Needs root (debootstrap, chroot, mkfs
# with root-owned files), debootstrap, e2fsprogs, apt and Go.
#
# arm64 (E2E_ARCH=arm64, for make e2e-arm64): debootstrap --foreign for
# arm64, its second stage in a chroot through qemu-user-static (binfmt_misc,
# registered here if it is not), the arm64 cloud kernel fetched by apt in
# that chroot, and the guest init built for arm64. Needs qemu-user-static
# and binfmt-support besides the above.
#
# Usage: [E2E_ARCH=amd64|arm64] images/e2e/build.sh
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
suite=bookworm
# Every package provision installs (guest-agent/internal/provision.Packages)
# is pre-included, so its apt steps find nothing to do and need no network.
# python3-yaml, -httpx, -requests, -dotenv and -rich are the modules the real
# Hermes 0.19.0 tree's approval code, auxiliary client and CLI import, which the
# stand-in installer's venv (tests/e2e/testdata/standin/install.sh) takes
# from the system Python instead of fetching them from PyPI.
packages=openssh-server,sudo,tmux,python3,ca-certificates,iproute2,procps,kmod,e2fsprogs,build-essential,curl,git,libatomic1,libffi-dev,ncurses-term,python3-dev,ripgrep,xz-utils,python3-yaml,python3-httpx,python3-requests,python3-dotenv,python3-rich
image_size=8G
init_path=sbin/smolvm-qemu-init
arch=${E2E_ARCH:-amd64}
case $arch in
amd64 | arm64) ;;
*) echo "build-e2e-image: E2E_ARCH must be amd64 or arm64, not $arch" >&2; exit 2 ;;
esac
cache=${HBX_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hermes-box-e2e}
[ "$arch" = amd64 ] || cache=$cache-$arch

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

# kernel_package prints the versioned cloud kernel package and its version
# (amd64; arm64's is resolved in its chroot).
kernel_package() {
  local pkg ver
  if [ "$arch" = arm64 ]; then
    echo "linux-image-cloud-arm64 chroot"
    return 0
  fi
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
[ "$(dpkg --print-architecture)" = amd64 ] || die "only amd64 hosts are supported"
if [ "$arch" = arm64 ]; then
  [ -x /usr/bin/qemu-aarch64-static ] || die "missing qemu-user-static (for the arm64 second stage)"
fi

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

rootfs_key=$( { sha256sum <"$0"; echo "$mirror_url $suite $kpkg $kver_pkg $arch"; } | sha256sum | cut -c1-16)
rootfs="$cache/rootfs-$rootfs_key"

# binfmt makes the kernel run arm64 programs through qemu-aarch64-static
# (with F, the interpreter is opened now, so it works inside the chroot).
enable_binfmt() {
  [ -d /proc/sys/fs/binfmt_misc ] || die "no binfmt_misc in /proc/sys/fs"
  [ -e /proc/sys/fs/binfmt_misc/register ] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
  [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] && return 0
  if command -v update-binfmts >/dev/null; then
    update-binfmts --enable qemu-aarch64 >&2 || true
  fi
  [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || die "could not register qemu-aarch64 with binfmt_misc"
}

# debootstrap_arm64 runs both stages for arm64 into $1 and fetches the
# cloud kernel's .deb into $2 from inside the chroot.
debootstrap_arm64() {
  local root=$1 out=$2
  enable_binfmt
  debootstrap --arch=arm64 --foreign --variant=minbase --include="$packages" "$suite" "$root" "$mirror_url" >"$out/debootstrap.log" 2>&1 ||
    { tail -n 30 "$out/debootstrap.log" >&2; die "debootstrap (first stage) failed"; }
  install -m 0755 /usr/bin/qemu-aarch64-static "$root/usr/bin/qemu-aarch64-static"
  chroot "$root" /debootstrap/debootstrap --second-stage >>"$out/debootstrap.log" 2>&1 ||
    { tail -n 30 "$out/debootstrap.log" >&2; die "debootstrap (second stage) failed"; }
  echo "deb $mirror_url $suite main" >"$root/etc/apt/sources.list"
  chroot "$root" apt-get update -qq >&2
  local pkg
  pkg=$(chroot "$root" apt-cache depends linux-image-cloud-arm64 | awk '/Depends: linux-image-/{print $2; exit}')
  [ -n "$pkg" ] || die "no arm64 cloud kernel package in the chroot's apt"
  (cd "$root/tmp" && chroot "$root" sh -c "cd /tmp && apt-get download -o APT::Sandbox::User=root $pkg" >&2)
  mv "$root"/tmp/"$pkg"_*.deb "$out/"
  rm -f "$root/usr/bin/qemu-aarch64-static"
  echo "$pkg"
}

build_rootfs() {
  local tmp="$cache/tmp-rootfs-$$" start=$SECONDS
  rm -rf "$tmp" && mkdir -p "$tmp"
  trap 'rm -rf "$tmp"' EXIT
  log "debootstrap $suite ($arch) from $mirror_url"
  if [ "$arch" = arm64 ]; then
    kpkg=$(debootstrap_arm64 "$tmp/root" "$tmp")
    kver=${kpkg#linux-image-}
    log "debootstrap done in $((SECONDS - start)) s; fetched $kpkg in the chroot"
  else
    debootstrap --variant=minbase --include="$packages" "$suite" "$tmp/root" "$mirror_url" >"$tmp/debootstrap.log" 2>&1 ||
      { tail -n 30 "$tmp/debootstrap.log" >&2; die "debootstrap failed"; }
    log "debootstrap done in $((SECONDS - start)) s; fetching $kpkg $kver_pkg"
    (cd "$tmp" && apt-get download -o APT::Sandbox::User=root "$kpkg=$kver_pkg" >&2)
  fi
  dpkg-deb -x "$tmp"/"$kpkg"_*.deb "$tmp/kernel"
  local m="lib/modules/$kver"
  mkdir -p "$tmp/root/$m"
  (cd "$tmp/kernel" && cp -a --parents "$m/kernel/drivers/virtio" "$m/kernel/drivers/block/virtio_blk.ko" \
    "$m/kernel/drivers/net/virtio_net.ko" "$m/kernel/drivers/net/net_failover.ko" \
    "$m/kernel/net/core/failover.ko" "$m/kernel/drivers/char/virtio_console.ko" \
    "$m/kernel/drivers/char/hw_random/virtio-rng.ko" "$m/modules.order" "$m/modules.builtin" \
    "$m/modules.builtin.modinfo" "$tmp/root/")
  if [ "$arch" = arm64 ]; then
    enable_binfmt
    install -m 0755 /usr/bin/qemu-aarch64-static "$tmp/root/usr/bin/qemu-aarch64-static"
  fi
  chroot "$tmp/root" depmod -a "$kver"
  rm -f "$tmp/root/usr/bin/qemu-aarch64-static"
  rm -rf "$tmp"/root/var/cache/apt/archives/*.deb "$tmp"/root/var/lib/apt/lists/*_Packages
  mkdir -p "$tmp/out"
  mv "$tmp/root" "$tmp/out/root"
  cp "$tmp/kernel/boot/vmlinuz-$kver" "$tmp/out/vmlinuz"
  cp "$tmp/kernel/boot/config-$kver" "$tmp/out/config"
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
(cd "$repo" && CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -ldflags '-s -w' -o "$initbin" ./images/e2e/guestinit)
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
