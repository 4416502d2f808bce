#!/usr/bin/env bash
# Lay out an image's whole root filesystem in DIR: build/image-root.sh [--arch ARCH] PROGRAM DIR
#
# The one definition of what each FROM-scratch image holds. The Dockerfiles' build stages run
# it into /out and their final stage copies /out/ to /; `make images` (build/images.sh) runs it
# into a folder that replaces that build stage. So `docker build` and `make images` make the
# same image. Every image gets an empty /tmp, mode 1777 (a Dockerfile cannot make one in a
# scratch image: COPY --chmod does not apply to an empty directory's own mode).
#
#   prestop          /prestop                                    from dist/prestop
#   drain-sidecar    /drain-sidecar                              from dist/drain-sidecar
#   (--arch arm64: from dist/linux-arm64/, where build/bundle.sh --arch arm64 writes them; the
#   default is this machine's own architecture, as build/bundle.sh's)
#   engine-emulator  /usr/local/bin/vllm, /usr/local/bin/sglang,  from build/out/engine-emulator
#                    /usr/bin/python3, /app/llm-d-routing-sidecar (one file, hard-linked: it
#                    answers to the name it is run by)
set -euo pipefail

case "$(uname -m)" in
    aarch64) ARCH=arm64 ;;
    *) ARCH=amd64 ;;
esac
if [ "${1:-}" = --arch ]; then
    ARCH="${2:?usage: build/image-root.sh [--arch amd64|arm64] PROGRAM DIR}"
    shift 2
fi
PROGRAM="${1:?usage: build/image-root.sh PROGRAM DIR}"
DIR="${2:?usage: build/image-root.sh PROGRAM DIR}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
case "$ARCH" in
    amd64) DIST="$REPO/dist" OUT="$REPO/build/out" ;;
    arm64) DIST="$REPO/dist/linux-arm64" OUT="$REPO/build/out/linux-arm64" ;;  # as build/bundle.sh's set_arch_paths
    *) echo "image-root: unknown architecture $ARCH (amd64, arm64)" >&2; exit 2 ;;
esac

install -d -m 0755 "$DIR"
install -d -m 1777 "$DIR/tmp"
case "$PROGRAM" in
    prestop | drain-sidecar)
        install -m 0755 "$DIST/$PROGRAM" "$DIR/$PROGRAM"
        ;;
    engine-emulator)
        install -D -m 0755 "$OUT/engine-emulator" "$DIR/usr/local/bin/vllm"
        ln -f "$DIR/usr/local/bin/vllm" "$DIR/usr/local/bin/sglang"
        install -d -m 0755 "$DIR/usr/bin"
        ln -f "$DIR/usr/local/bin/vllm" "$DIR/usr/bin/python3"
        # The stand-in for a direct decoder's routing proxy too, at its image's entrypoint path.
        install -d -m 0755 "$DIR/app"
        ln -f "$DIR/usr/local/bin/vllm" "$DIR/app/llm-d-routing-sidecar"
        ;;
    *)
        echo "image-root: unknown program $PROGRAM" >&2
        exit 2
        ;;
esac
