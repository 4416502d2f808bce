#!/usr/bin/env bash
# Build an image from its Dockerfile's final stage, without a daemon and without pulling
# anything, and write it as an OCI archive that `podman load` and `docker load` accept:
#
#   build/images.sh PROGRAM ARCHIVE
#
#   prestop          Dockerfile.hook              modeldrain/prestop:VERSION
#   drain-sidecar    Dockerfile.sidecar           modeldrain/drain-sidecar:VERSION
#   engine-emulator  emulation/engine.Dockerfile  modeldrain-test/engine-emulator:VERSION (test bed)
#
# The Dockerfile's build stage ("build") is replaced by a folder holding what that stage
# would leave in /out: build/image-root.sh run here, on the executable `make bundle` built
# (`buildah build --build-context build=DIR`: a stage of that name is then never built, and
# its base image never pulled). Everything else is the Dockerfile's own final stage.
# Debian's buildah (installed when missing, as root) in a private store (build/containers.sh)
# that is removed afterwards. --timestamp 0: the same inputs give the same image ID.
# Exit 3 when this machine cannot build (not root, or buildah missing and no root to install).
set -euo pipefail

PROGRAM="${1:?usage: build/images.sh PROGRAM ARCHIVE}"
ARCHIVE="${2:?usage: build/images.sh PROGRAM ARCHIVE}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$REPO/hook/__init__.py")"

case "$PROGRAM" in
    prestop) DOCKERFILE=Dockerfile.hook; IMAGE="modeldrain/prestop:$VERSION" ;;
    drain-sidecar) DOCKERFILE=Dockerfile.sidecar; IMAGE="modeldrain/drain-sidecar:$VERSION" ;;
    engine-emulator) DOCKERFILE=emulation/engine.Dockerfile; IMAGE="modeldrain-test/engine-emulator:$VERSION" ;;
    *) echo "usage: build/images.sh prestop|drain-sidecar|engine-emulator ARCHIVE" >&2; exit 2 ;;
esac

# shellcheck source=build/containers.sh
. "$REPO/build/containers.sh" "img-$PROGRAM"
containers_require_root
containers_install
containers_setup
trap containers_clean EXIT

stage="$REPO/build/out/image-stage/$PROGRAM"
rm -rf "$stage"
"$REPO/build/image-root.sh" "$PROGRAM" "$stage/out"

buildah build --quiet --network none --pull-never --timestamp 0 \
    --build-context "build=$stage" -f "$REPO/$DOCKERFILE" -t "$IMAGE" "$REPO" >/dev/null
mkdir -p "$(dirname "$ARCHIVE")"
rm -f "$ARCHIVE.partial"
buildah push --quiet "$IMAGE" "oci-archive:$ARCHIVE.partial:$IMAGE"
mv -f "$ARCHIVE.partial" "$ARCHIVE"  # a reader never loads a half-written archive
rm -rf "$stage"
printf 'images: wrote %s (%s, %s bytes)\n' "${ARCHIVE#"$REPO"/}" "$IMAGE" "$(stat -c %s "$ARCHIVE")" >&2
