#!/usr/bin/env bash
# Builds, from Go modules and this machine's C compiler, every program a kind node of Kubernetes
# K8S_VERSION runs, because neither kind's node images nor Kubernetes' release binaries can be
# downloaded here:
#   kubelet, kubeadm, kubectl, kube-apiserver, kube-controller-manager, kube-scheduler,
#   kube-proxy (k8s.io/kubernetes, with the version stamped as the release build stamps it);
#   etcd (the envtest build, hack/setup-envtest.sh); coredns (github.com/coredns/coredns, the
#   version kubeadm deploys); pause (the C program of k8s.io/kubernetes/build/pause, static).
# Cached by version outside the work tree; prints the directory that holds them.
#
# Env: K8S_VERSION (1.37.1), ETCD_VERSION (3.6.7), COREDNS_VERSION (1.14.6), PAUSE_VERSION
# (3.10.2), KIND_CACHE (~/.cache/videogen-operator/kind).
#
# Usage: hack/kind/build-kubernetes.sh      (prints the directory of the programs)
case ${1:-} in -h | --help) sed -n '2,/^set -/{/^set -/d;s/^# \{0,1\}//p;}' "$0"; exit 0 ;; esac
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.37.1}
ETCD_VERSION=${ETCD_VERSION:-3.6.7}
COREDNS_VERSION=${COREDNS_VERSION:-1.14.6}
PAUSE_VERSION=${PAUSE_VERSION:-3.10.2}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CACHE=${KIND_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/videogen-operator/kind}
OUT=$CACHE/bin-v$K8S_VERSION

LOG_PREFIX=kind-build
# shellcheck source=hack/lib/gomodbuild.sh
source "$ROOT/hack/lib/gomodbuild.sh"
log() { printf '%s: %s\n' "$LOG_PREFIX" "$*" >&2; }

commands=(kubelet kubeadm kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy)
mkdir -p "$OUT"

kubernetes() {
  local missing=() c replaces
  for c in "${commands[@]}"; do [ -x "$OUT/$c" ] || missing+=("$c"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  replaces=$(gomod_kubernetes_replaces "$K8S_VERSION")
  log "building ${missing[*]} v$K8S_VERSION from Go modules (first time only; about ten minutes on two cores, less after the envtest kube-apiserver)"
  gomod_build "Kubernetes v$K8S_VERSION" "$OUT/k8s/" "module kind.local/kubernetes

go 1.26

require k8s.io/kubernetes v$K8S_VERSION

$replaces" "$(gomod_kubernetes_ldflags "$K8S_VERSION")" "${missing[@]/#/k8s.io/kubernetes/cmd/}"
  for c in "${missing[@]}"; do mv "$OUT/k8s/$c" "$OUT/$c"; done
  rm -rf "$OUT/k8s"
}

coredns() {
  [ -x "$OUT/coredns" ] && return 0
  log "building coredns v$COREDNS_VERSION from Go modules (first time only; a few minutes)"
  gomod_build "coredns v$COREDNS_VERSION" "$OUT/coredns" "module kind.local/coredns

go 1.26

require github.com/coredns/coredns v$COREDNS_VERSION" "" github.com/coredns/coredns
}

pause() {
  [ -x "$OUT/pause" ] && return 0
  local src
  src=$(GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')/build/pause/linux/pause.c
  [ -f "$src" ] || { log "no $src in the module k8s.io/kubernetes@v$K8S_VERSION"; exit 1; }
  command -v gcc >/dev/null || { log "gcc is needed for the pause program: apt-get install gcc libc6-dev"; exit 1; }
  log "building pause $PAUSE_VERSION (gcc -static, from k8s.io/kubernetes@v$K8S_VERSION)"
  # The flags of build/pause/Makefile.
  gcc -Os -Wall -Werror -static -DVERSION="v$PAUSE_VERSION-k8s.io/kubernetes@v$K8S_VERSION" -o "$OUT/pause.tmp" "$src"
  mv "$OUT/pause.tmp" "$OUT/pause"
}

etcd() {
  [ -x "$OUT/etcd" ] && return 0
  local assets
  assets=$(K8S_VERSION=$K8S_VERSION ETCD_VERSION=$ETCD_VERSION "$ROOT/hack/setup-envtest.sh")
  cp "$assets/etcd" "$OUT/etcd.tmp" && mv "$OUT/etcd.tmp" "$OUT/etcd"
}

kubernetes
etcd
coredns
pause
printf 'kubernetes v%s\netcd v%s\ncoredns v%s\npause %s\n' "$K8S_VERSION" "$ETCD_VERSION" "$COREDNS_VERSION" "$PAUSE_VERSION" >"$OUT/VERSIONS"
echo "$OUT"
