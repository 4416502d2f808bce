# shellcheck shell=bash
# A private, throwaway buildah/podman environment: sourced by build/images.sh (`make images`)
# and by the container tests' set-up (tests/containers/pod-env.sh).
#
#   . build/containers.sh NAME    # select the store NAME of this checkout (nothing is created yet)
#   containers_install            # apt-get the tools when missing (root only), else exit 3
#   containers_setup              # remove what a crashed run left in DIR, write the configs
#   ... buildah / podman commands: they read the CONTAINERS_* variables exported here ...
#   containers_clean              # stop and remove everything in DIR, then DIR itself
#
# Every setting lives in DIR and is selected by CONTAINERS_CONF, CONTAINERS_STORAGE_CONF and
# CONTAINERS_REGISTRIES_CONF: no daemon, no registry, nothing in /etc/containers or
# /var/lib/containers is used, and no network is made (every container gets only a loopback
# interface, a Pod's containers share it). The settings, and why:
#   storage driver vfs         needs no kernel overlay support or fuse inside CI's machines
#   runtime runc               crun fails to set rlimits on some CI machines; runc is Debian's
#   cgroup manager cgroupfs    no systemd needed (a CI container has none)
#   default_ulimits = []       runc cannot raise RLIMIT_NOFILE without CAP_SYS_RESOURCE
#   netns none                 loopback only: no CNI bridge, iptables rule or route is made
#   lock_type file             locks in DIR, not podman's machine-wide shared-memory table
#   no search registries       an image name never resolves to a pull
set -o pipefail

CONTAINERS_PACKAGES=(buildah podman runc catatonit)  # catatonit: podman builds its pause image from it
EXIT_CANNOT_RUN=3  # the caller skips (or, under CI=true, fails) with the reason on stderr

# The store lives in /tmp under a short name, one per checkout and NAME: conmon puts each
# container's attach socket at DIR/root/vfs-containers/<64 hex>/userdata/attach, and with a DIR
# longer than 46 characters every attached `podman run` or `podman exec` waits 20 s before it
# gets its output (measured with podman 4.3 and conmon 2.1.6). A checkout's own build/out/ is
# usually deeper than that.
_containers_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CONTAINERS_DIR="/tmp/modeldrain-$(printf %s "$_containers_repo" | sha256sum | cut -c1-8)-${1:?usage: . build/containers.sh NAME}"
[ ${#CONTAINERS_DIR} -le 46 ] || { echo "containers: store path too long: $CONTAINERS_DIR" >&2; exit 2; }
export CONTAINERS_CONF="$CONTAINERS_DIR/containers.conf"
export CONTAINERS_STORAGE_CONF="$CONTAINERS_DIR/storage.conf"
export CONTAINERS_REGISTRIES_CONF="$CONTAINERS_DIR/registries.conf"

containers_cannot_run() { printf 'containers: cannot run here: %s\n' "$*" >&2; exit "$EXIT_CANNOT_RUN"; }

containers_install() {
    local missing=() package
    command -v dpkg-query >/dev/null || {
        command -v buildah >/dev/null && command -v podman >/dev/null && command -v runc >/dev/null \
            && return 0
        containers_cannot_run "needs ${CONTAINERS_PACKAGES[*]} (not a Debian machine: install them)"
    }
    for package in "${CONTAINERS_PACKAGES[@]}"; do
        dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null | grep -qx installed \
            || missing+=("$package")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    [ "$(id -u)" = 0 ] || containers_cannot_run "needs Debian packages ${missing[*]} (install them, or run as root)"
    printf 'containers: installing %s\n' "${missing[*]}" >&2
    # One installer at a time (the suite's workers set up in parallel): a lock of our own, and
    # apt's own locks waited on (DPkg::Lock::Timeout; the package lists' lock by retrying).
    (
        flock 8
        for _ in $(seq 60); do apt-get -o DPkg::Lock::Timeout=600 update -q >&2 && break; sleep 5; done
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends \
            "${missing[@]}" >&2
    ) 8>/var/lock/modeldrain-apt.lock
}

containers_require_root() {
    # Rootless podman needs subordinate ids and a user session; the tests' Secret and fsGroup
    # layouts need chown. CI runs as root.
    [ "$(id -u)" = 0 ] || containers_cannot_run "needs root for buildah and podman's private store"
}

containers_clean() {
    if [ -f "$CONTAINERS_STORAGE_CONF" ] && [ -f "$CONTAINERS_CONF" ]; then
        podman pod rm --all --force --time 0 >/dev/null 2>&1 || true      # best effort: the store
        podman rm --all --force --time 0 >/dev/null 2>&1 || true          # may be half made
        buildah rm --all >/dev/null 2>&1 || true
        podman system reset --force >/dev/null 2>&1 || true
    fi
    # A store whose database is gone still has its monitors (conmon) and mounts: each conmon
    # whose command line names this store, with its container; then the store's mounts.
    local pid child mount
    for pid in $(pgrep -x conmon 2>/dev/null || true); do
        tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- " $CONTAINERS_DIR/" || continue
        for child in $(pgrep -P "$pid" 2>/dev/null || true); do kill -9 "$child" 2>/dev/null || true; done
        kill -9 "$pid" 2>/dev/null || true
    done
    if [ -d "$CONTAINERS_DIR" ]; then
        { findmnt -rn -o TARGET | grep -F "$CONTAINERS_DIR/" || true; } | sort -r | while read -r mount; do
            umount -l "$mount" 2>/dev/null || true
        done
        rm -rf --one-file-system "$CONTAINERS_DIR"
    fi
}

containers_setup() {
    containers_clean
    mkdir -p "$CONTAINERS_DIR"/{root,run,tmp,net,volumes}
    cat >"$CONTAINERS_CONF" <<CONF
[containers]
default_ulimits = []
netns = "none"
[network]
network_config_dir = "$CONTAINERS_DIR/net"
[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
lock_type = "file"
events_logger = "file"
events_logfile_path = "$CONTAINERS_DIR/events.log"
tmp_dir = "$CONTAINERS_DIR/tmp"
volume_path = "$CONTAINERS_DIR/volumes"
image_copy_tmp_dir = "$CONTAINERS_DIR/tmp"
CONF
    cat >"$CONTAINERS_STORAGE_CONF" <<CONF
[storage]
driver = "vfs"
graphroot = "$CONTAINERS_DIR/root"
runroot = "$CONTAINERS_DIR/run"
CONF
    echo 'unqualified-search-registries = []' >"$CONTAINERS_REGISTRIES_CONF"
}
