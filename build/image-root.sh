#!/usr/bin/env bash
# Lay out an image's whole root filesystem in DIR: build/image-root.sh PROGRAM DIR
#
# The one definition of what each FROM-scratch image holds. The Dockerfiles' build stages run
# it into /out and their final stage copies /out/ to /; `make images` (build/images.sh) runs it
# into a folder that replaces that build stage. So `docker build` and `make images` make the
# same image. Every image gets an empty /tmp, mode 1777 (a Dockerfile cannot make one in a
# scratch image: COPY --chmod does not apply to an empty directory's own mode).
#
#   prestop          /prestop                                    from dist/prestop
#   drain-sidecar    /drain-sidecar                              from dist/drain-sidecar
#   engine-emulator  /usr/local/bin/vllm, /usr/local/bin/sglang,  from build/out/engine-emulator
#                    /usr/bin/python3, /app/llm-d-routing-sidecar (one file, hard-linked: it
#                    answers to the name it is run by)
set -euo pipefail

PROGRAM="${1:?usage: build/image-root.sh PROGRAM DIR}"
DIR="${2:?usage: build/image-root.sh PROGRAM DIR}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

install -d -m 0755 "$DIR"
install -d -m 1777 "$DIR/tmp"
case "$PROGRAM" in
    prestop | drain-sidecar)
        install -m 0755 "$REPO/dist/$PROGRAM" "$DIR/$PROGRAM"
        ;;
    engine-emulator)
        install -D -m 0755 "$REPO/build/out/engine-emulator" "$DIR/usr/local/bin/vllm"
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
