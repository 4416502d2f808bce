#!/usr/bin/env bash
# The container tests' whole set-up, in one place: a private podman store holding the images
# deploy/'s manifests name, built and loaded as a user would get them.
#
#   tests/containers/pod-env.sh setup STORE [--tag NAME]... [--build NAME=DOCKERFILE]...
#   tests/containers/pod-env.sh clean STORE
#
# STORE names the store (build/containers.sh keeps it under a short path in /tmp).
#
# setup:
#   1. buildah, podman, runc, catatonit: apt-get installs them when missing (root only)
#   2. `make images build/out/images/engine-emulator.tar`: the static executables and their
#      images, as OCI archives (daemonless; rebuilt only when a source changed)
#   3. a fresh private store (build/containers.sh: vfs, runc, loopback-only Pods)
#   4. `podman load` of dist/images/prestop.tar, dist/images/drain-sidecar.tar and the
#      engine emulator's image (the test bed's engine: no Python, no shell, no libc)
#   5. --tag NAME: the engine emulator's image also answers to NAME (the engine images the
#      manifests name, e.g. vllm/vllm-openai:v0.32.0)
#   6. --build NAME=DOCKERFILE: deploy/'s own Dockerfiles (e.g. the engine image with the hook
#      baked in), built from the images above, offline
# It prints the environment that selects the store, one KEY=VALUE a line, for the caller.
# clean: stops and removes everything in the store, and the store.
# Exit 3, with the reason on stderr, where this machine cannot run containers (not root, or
# the packages missing and no root to install them): the tests skip on it, except under CI=true.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VERSION="$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$REPO/modeldrain/hook/__init__.py")"
EMULATOR_IMAGE="localhost/modeldrain-test/engine-emulator:$VERSION"
ARCHIVES=(dist/images/prestop.tar dist/images/drain-sidecar.tar build/out/images/engine-emulator.tar)

usage() { echo "usage: pod-env.sh setup|clean STORE [--tag NAME]... [--build NAME=DOCKERFILE]..." >&2; exit 2; }

ACTION="${1:-}"; STORE="${2:-}"
[ -n "$ACTION" ] && [ -n "$STORE" ] || usage
shift 2
# shellcheck source=build/containers.sh
. "$REPO/build/containers.sh" "$STORE"

case "$ACTION" in
    clean)
        containers_clean
        exit 0
        ;;
    setup) ;;
    *) usage ;;
esac

tags=(); builds=()
while [ $# -gt 0 ]; do
    case "$1" in
        --tag) tags+=("${2:?--tag NAME}"); shift 2 ;;
        --build) builds+=("${2:?--build NAME=DOCKERFILE}"); shift 2 ;;
        *) usage ;;
    esac
done

containers_require_root
containers_install
# The same lock as the tests' bundle fixture (tests/builds.py): one build at a time.
mkdir -p "$REPO/build/out"
flock "$REPO/build/out/.bundle-fixture.lock" \
    make -s -C "$REPO" images build/out/images/engine-emulator.tar >&2
containers_setup
for archive in "${ARCHIVES[@]}"; do
    podman load --quiet --input "$REPO/$archive" >&2
done
for name in ${tags[@]+"${tags[@]}"}; do
    podman tag "$EMULATOR_IMAGE" "$name"
done
for spec in ${builds[@]+"${builds[@]}"}; do
    name="${spec%%=*}"; dockerfile="$REPO/${spec#*=}"
    buildah build --quiet --network none --pull-never -f "$dockerfile" -t "$name" "$(dirname "$dockerfile")" >&2
done
printf '%s=%s\n' CONTAINERS_CONF "$CONTAINERS_CONF" CONTAINERS_STORAGE_CONF "$CONTAINERS_STORAGE_CONF" \
    CONTAINERS_REGISTRIES_CONF "$CONTAINERS_REGISTRIES_CONF"
