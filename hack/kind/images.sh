#!/usr/bin/env bash
# Builds the operator and worker images with nothing pulled, for air-gapped clusters and CI
# (hack/kind-e2e.sh): the same contents as Dockerfile and Dockerfile.worker, which need
# golang, distroless and debian images from a registry, assembled here from this checkout's
# static binaries and, for the worker, a Debian root filesystem made by debootstrap.
#
# Usage: hack/kind/images.sh OPERATOR_IMAGE WORKER_IMAGE     e.g. videogen-operator:e2e videogen-worker:e2e
#
# Needs root (debootstrap) and a Docker engine. Env: KIND_CACHE, DEBIAN_MIRROR as node-image.sh.
case ${1:-} in -h | --help) sed -n '2,/^set -/{/^set -/d;s/^# \{0,1\}//p;}' "$0"; exit 0 ;; esac
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD
[ $# -eq 2 ] || { echo "usage: $0 OPERATOR_IMAGE WORKER_IMAGE" >&2; exit 2; }
operator_image=$1 worker_image=$2

CACHE=${KIND_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/videogen-operator/kind}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
# shellcheck source=hack/kind/lib.sh
source "$ROOT/hack/kind/lib.sh"
LOG_PREFIX=kind-images

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# The binaries, as the Dockerfiles build them.
log "building manager, apiserver and worker (static)"
for cmd in manager apiserver worker; do
  CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$stage/bin/$cmd" "./cmd/$cmd"
done

# The operator image: what gcr.io/distroless/static:nonroot gives a static binary (CA
# certificates, the nonroot user 65532, a /tmp) and the two binaries at /.
op=$stage/operator
mkdir -p "$op/etc/ssl/certs" "$op/tmp"
chmod 1777 "$op/tmp"
cp /etc/ssl/certs/ca-certificates.crt "$op/etc/ssl/certs/"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$op/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$op/etc/group"
cp "$stage/bin/manager" "$stage/bin/apiserver" "$op/"
import_dir "$op" "$operator_image" 'USER 65532:65532' 'ENTRYPOINT ["/manager"]'
log "built $operator_image"

# The worker image: Dockerfile.worker's debian:bookworm-slim with ca-certificates, ffmpeg and
# facedetect, its user and directories, the worker and the demo portraits.
rootfs=$(debian_rootfs worker ca-certificates,ffmpeg,facedetect)
wk=$stage/worker
cp -a "$rootfs" "$wk"
chroot "$wk" groupadd --gid 65532 worker
chroot "$wk" useradd --uid 65532 --gid 65532 --home-dir /tmp --no-create-home --shell /usr/sbin/nologin worker
mkdir -p "$wk/var/lib/videogen/worker-blobs" "$wk/usr/share/videogen/portraits"
chown 65532:65532 "$wk/var/lib/videogen/worker-blobs"
install -m 0755 "$stage/bin/worker" "$wk/usr/local/bin/worker"
cp internal/portraits/*.jpg internal/portraits/NOTICE "$wk/usr/share/videogen/portraits/"
import_dir "$wk" "$worker_image" 'ENV HOME=/tmp PYTHONDONTWRITEBYTECODE=1' 'USER 65532:65532' 'EXPOSE 8080' \
  'ENTRYPOINT ["/usr/local/bin/worker"]'
log "built $worker_image"
