#!/usr/bin/env bash
# Repeat the README's quick start on a bare machine: a `debootstrap --variant=minbase` Debian root with
# only git, make, python3, python3-venv, python3-pip, ca-certificates and sudo; a fresh clone of this
# repository's HEAD (committed work only); then, inside it, `make test`, `make run` with no display
# (renders demo.mp4) and `xvfb-run -a make run` (the window stays open until the timeout).
# Usage: sudo scripts/test-fresh.sh [ROOT]     ROOT defaults to /var/tmp/avatar-studio-fresh and is
# recreated on every run; its log is ROOT.log. Takes roughly 15-25 min on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
ROOT=${1:-/var/tmp/avatar-studio-fresh}
SUITE=${FRESH_SUITE:-bookworm}
MIRROR=${FRESH_MIRROR:-http://deb.debian.org/debian}
BASE_PACKAGES=git,make,python3,python3-venv,python3-pip,ca-certificates,sudo

[ "$(id -u)" -eq 0 ] || { echo "error: scripts/test-fresh.sh needs root (debootstrap, chroot, mount)" >&2; exit 1; }

unmount_root() {
  for mount in dev/shm dev/pts dev sys proc opt/wheels; do
    mountpoint -q "$ROOT/$mount" 2>/dev/null && umount -l "$ROOT/$mount"
  done
  return 0
}
trap unmount_root EXIT

command -v debootstrap >/dev/null || {
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
}

unmount_root
rm -rf "$ROOT"
echo "== debootstrap $SUITE minbase into $ROOT"
debootstrap --variant=minbase --include="$BASE_PACKAGES" "$SUITE" "$ROOT" "$MIRROR" >"$ROOT.log" 2>&1 \
  || { echo "error: debootstrap failed; see $ROOT.log" >&2; exit 1; }

mount -t proc proc "$ROOT/proc"
mount -t sysfs sys "$ROOT/sys"
mount --bind /dev "$ROOT/dev"
mount -t devpts devpts "$ROOT/dev/pts" -o newinstance,ptmxmode=0666 2>/dev/null || mount --bind /dev/pts "$ROOT/dev/pts"
mount -t tmpfs shm "$ROOT/dev/shm"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf"

# The machine's own network setup is part of the machine, not of the project: carry in its extra
# certificate authorities (a TLS-inspecting egress proxy), pip config and local wheel folder, if any.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/"
  chroot "$ROOT" update-ca-certificates >/dev/null 2>&1
fi
pip_env=()
[ -f /etc/pip.conf ] && cp /etc/pip.conf "$ROOT/etc/pip.conf"
[ -d /etc/xdg/pip ] && mkdir -p "$ROOT/etc/xdg" && cp -r /etc/xdg/pip "$ROOT/etc/xdg/"
if [ -n "${PIP_FIND_LINKS:-}" ] && [ -d "$PIP_FIND_LINKS" ]; then
  mkdir -p "$ROOT$PIP_FIND_LINKS" && mount --bind "$PIP_FIND_LINKS" "$ROOT$PIP_FIND_LINKS"
fi
for var in $(compgen -e | grep '^PIP_' || true); do pip_env+=("$var=${!var}"); done

echo "== fresh clone of $(git rev-parse --short HEAD)"
git clone -q --no-local "$REPO" "$ROOT/root/avatar-studio"
git -C "$ROOT/root/avatar-studio" checkout -q "$(git rev-parse HEAD)"

in_root() {
  chroot "$ROOT" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "${pip_env[@]}" \
    bash -c "cd /root/avatar-studio && $1"
}

status=0
echo "== make test (fresh root)"
start=$(date +%s)
in_root "make test" || status=1
echo "== make test took $(( $(date +%s) - start )) s, exit $status"

echo "== make run with no display (renders demo.mp4)"
if in_root "make run" && [ -s "$ROOT/root/avatar-studio/demo.mp4" ]; then echo "make run: demo.mp4 written"; else
  echo "error: make run without a display did not write demo.mp4" >&2; status=1; fi

echo "== xvfb-run -a make run (the window must still be open after 90 s)"
rc=0; in_root "timeout 90 xvfb-run -a -s '-screen 0 1600x1000x24' make run" || rc=$?
if [ "$rc" -eq 124 ]; then echo "make run under xvfb-run: the studio window was running"; else
  echo "error: make run under xvfb-run exited with $rc before the timeout" >&2; status=1; fi
exit $status
