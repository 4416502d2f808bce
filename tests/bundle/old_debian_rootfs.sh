#!/usr/bin/env bash
# An older Debian root filesystem to run the bundle in: `old_debian_rootfs.sh SUITE DEST`.
# minbase: the essential packages only (no Python, as in many engine images' bases).
# Cached: an existing DEST (with its .complete mark) is reused, so only the first run pays
# (~40 s on 2 cores); build/out/ is removed by `make clean`. Needs root.
set -euo pipefail

SUITE="${1:?usage: old_debian_rootfs.sh SUITE DEST}"
DEST="${2:?usage: old_debian_rootfs.sh SUITE DEST}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

[ -f "$DEST/.complete" ] && exit 0
[ "$(id -u)" = 0 ] || { echo "old_debian_rootfs: needs root (debootstrap)" >&2; exit 1; }

if ! command -v debootstrap >/dev/null; then
    apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap >&2
fi

# Built beside DEST and renamed at the end: an interrupted run never leaves a half root.
partial="$DEST.partial"
rm -rf --one-file-system "$partial"
mkdir -p "$(dirname "$DEST")"
debootstrap --variant=minbase "$SUITE" "$partial" "$MIRROR" >&2
rm -f "$partial"/var/cache/apt/archives/*.deb  # 36 MB the tests never use
touch "$partial/.complete"
rm -rf --one-file-system "$DEST"
mv "$partial" "$DEST"
