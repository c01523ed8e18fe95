#!/usr/bin/env bash
# Runs ./setup.sh and .ci/run as a user's fresh Debian bookworm would: in a
# minimal bookworm root made with Debian's debootstrap (--variant=minbase), on a
# clone of this repository's HEAD (committed work only), so that a package our
# own machines happen to have but setup.sh does not install shows up.
#
#   tests/fresh_bookworm.sh                    # /var/tmp/omnistage-bookworm, then .ci/run
#   ROOT=/srv/bookworm tests/fresh_bookworm.sh  # another place (reused when it exists)
#   FRESH=1 tests/fresh_bookworm.sh            # a new root even if one exists
#   tests/fresh_bookworm.sh bash -lc './setup.sh && bazel test //...'   # another command
#
# As root, on a machine that reaches Debian's archive (and npm's registry, for the
# validator's and the SDK test's packages). The root is bind-mounted on itself
# (podman, for deploy/podman/run_sim.sh, remounts "/") and gets /proc, /sys and
# /dev from the host, all in a mount namespace of its own (unshare), so nothing
# is left mounted when the script ends, however it ends.
set -euo pipefail
cd "$(dirname "$0")/.."

root="${ROOT:-/var/tmp/omnistage-bookworm}"
mirror="${MIRROR:-http://deb.debian.org/debian}"
if [ "$(id -u)" -ne 0 ]; then
  echo "fresh_bookworm: run as root (debootstrap and chroot need it)" >&2
  exit 2
fi
command -v debootstrap >/dev/null || {
  echo "fresh_bookworm: needs debootstrap: apt-get install debootstrap" >&2
  exit 2
}
if [ "${FRESH:-0}" = 1 ]; then rm -rf --one-file-system "$root"; fi
if [ ! -x "$root/bin/bash" ]; then
  echo "fresh_bookworm: debootstrap --variant=minbase bookworm $root"
  debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.debootstrap.log" 2>&1 || {
    tail -n 30 "$root.debootstrap.log" >&2
    exit 1
  }
  # What a fresh bookworm image also has: its security updates.
  cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
fi
cp /etc/resolv.conf "$root/etc/resolv.conf"
# The site's own certificate authorities (a proxy that inspects TLS, say) go
# along, as a machine of that site has them: installed with ca-certificates,
# and for Node.js through NODE_EXTRA_CA_CERTS when the host sets it.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  # A root that has ca-certificates already (a reused one) takes them now.
  if [ -x "$root/usr/sbin/update-ca-certificates" ]; then
    chroot "$root" /usr/sbin/update-ca-certificates >/dev/null
  fi
fi

# The repository as committed, where a user would clone it.
rm -rf "$root/src/omnistage"
mkdir -p "$root/src"
git clone -q . "$root/src/omnistage"
# setup.sh needs git only to have been cloned with; bazel needs none.

command=("$@")
if [ ${#command[@]} -eq 0 ]; then command=(env CI=true bash .ci/run); fi
printf -v quoted '%q ' "${command[@]}"
echo "fresh_bookworm: in $root/src/omnistage: ${quoted}"
# A mount namespace of our own: the mounts go when it ends.
exec unshare --mount --propagation private -- bash -c '
  set -e
  root="$1"; shift
  # The root a mount point of its own: container runtimes (podman) remount "/".
  mount --bind "$root" "$root"
  mount -t proc proc "$root/proc"
  mount --rbind /sys "$root/sys"
  mount --rbind /dev "$root/dev"
  mount -t tmpfs tmpfs "$root/tmp"
  exec chroot "$root" /usr/bin/env -i HOME=/root TERM="${TERM:-dumb}" LANG=C.UTF-8 \
      PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      ${NODE_EXTRA_CA_CERTS:+NODE_EXTRA_CA_CERTS="$NODE_EXTRA_CA_CERTS"} \
      bash -c "cd /src/omnistage && $*"
' fresh_bookworm "$root" "$quoted"
