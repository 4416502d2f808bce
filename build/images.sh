#!/usr/bin/env bash
# Build an image from its Dockerfile's final stage, without a daemon and without pulling
# anything, and write it as an OCI archive that `podman load` and `docker load` accept:
#
#   build/images.sh [--platforms linux/amd64,linux/arm64] PROGRAM ARCHIVE
#
#   prestop          Dockerfile.hook              localhost/modeldrain/prestop:VERSION
#   drain-sidecar    Dockerfile.sidecar           localhost/modeldrain/drain-sidecar:VERSION
#   engine-emulator  emulation/engine.Dockerfile  localhost/modeldrain-test/engine-emulator:VERSION (test bed)
#
# The Dockerfile's build stage ("build") is replaced by a folder holding what that stage
# would leave in /out: build/image-root.sh run here, on the executable `make bundle` built
# (`buildah build --build-context build=DIR`: a stage of that name is then never built, and
# its base image never pulled). Everything else is the Dockerfile's own final stage.
# Debian's buildah (installed when missing, as root) in a private store (build/containers.sh)
# that is removed afterwards. --timestamp 0: the same inputs give the same image ID.
# --platforms: one image per platform, each from that architecture's executable
# (build/image-root.sh --arch), gathered into one OCI image index under the same name, so a
# manifest names one image and each node pulls its own architecture. The final stages have no
# RUN: building them for another platform needs no emulation. Without --platforms: one image
# for this machine's architecture, as before.
# Exit 3 when this machine cannot build (not root, or buildah missing and no root to install).
set -euo pipefail

USAGE="usage: build/images.sh [--platforms linux/amd64,linux/arm64] PROGRAM ARCHIVE"
PLATFORMS=""
if [ "${1:-}" = --platforms ]; then
    PLATFORMS="${2:?$USAGE}"
    shift 2
fi
PROGRAM="${1:?$USAGE}"
ARCHIVE="${2:?$USAGE}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$REPO/modeldrain/hook/__init__.py")"

case "$PROGRAM" in
    prestop) DOCKERFILE=Dockerfile.hook; IMAGE="localhost/modeldrain/prestop:$VERSION" ;;
    drain-sidecar) DOCKERFILE=Dockerfile.sidecar; IMAGE="localhost/modeldrain/drain-sidecar:$VERSION" ;;
    engine-emulator) DOCKERFILE=emulation/engine.Dockerfile; IMAGE="localhost/modeldrain-test/engine-emulator:$VERSION" ;;
    *) echo "usage: build/images.sh prestop|drain-sidecar|engine-emulator ARCHIVE" >&2; exit 2 ;;
esac

# shellcheck source=build/containers.sh
. "$REPO/build/containers.sh" "img-$PROGRAM"
containers_require_root
containers_install
containers_setup
trap containers_clean EXIT

# build_image TAG [ARCH]: the Dockerfile's final stage around ARCH's executable, tagged TAG.
build_image() {
    local tag=$1 arch=${2:-} stage="$REPO/build/out/image-stage/$PROGRAM${2:+-$2}"
    local root_args=() platform_args=()
    if [ -n "$arch" ]; then
        root_args=(--arch "$arch")
        platform_args=(--platform "linux/$arch")  # the image config's architecture
    fi
    rm -rf "$stage"
    "$REPO/build/image-root.sh" "${root_args[@]}" "$PROGRAM" "$stage/out"
    buildah build --quiet --network none --pull-never --timestamp 0 "${platform_args[@]}" \
        --build-context "build=$stage" -f "$REPO/$DOCKERFILE" -t "$tag" "$REPO" >/dev/null
    rm -rf "$stage"
}

mkdir -p "$(dirname "$ARCHIVE")"
rm -f "$ARCHIVE.partial"
if [ -z "$PLATFORMS" ]; then
    build_image "$IMAGE"
    buildah push --quiet "$IMAGE" "oci-archive:$ARCHIVE.partial:$IMAGE"
    what="$IMAGE"
else
    buildah manifest create "$IMAGE" >/dev/null
    for platform in ${PLATFORMS//,/ }; do
        case "$platform" in
            linux/amd64 | linux/arm64) arch="${platform#linux/}" ;;
            *) echo "images: unknown platform $platform (linux/amd64, linux/arm64)" >&2; exit 2 ;;
        esac
        build_image "localhost/modeldrain-build/$PROGRAM:$arch" "$arch"
        buildah manifest add --os linux --arch "$arch" "$IMAGE" \
            "containers-storage:localhost/modeldrain-build/$PROGRAM:$arch" >/dev/null
    done
    # --all: the index and every image it lists, not only this machine's.
    buildah manifest push --quiet --all --format oci "$IMAGE" "oci-archive:$ARCHIVE.partial:$IMAGE"
    what="$IMAGE, an OCI image index of $PLATFORMS"
fi
mv -f "$ARCHIVE.partial" "$ARCHIVE"  # a reader never loads a half-written archive
printf 'images: wrote %s (%s, %s bytes)\n' "${ARCHIVE#"$REPO"/}" "$what" "$(stat -c %s "$ARCHIVE")" >&2
