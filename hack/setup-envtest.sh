#!/usr/bin/env bash
# Builds the envtest control-plane binaries (kube-apiserver, etcd) from Go modules.
#
# setup-envtest downloads prebuilt binaries from the internet; these machines only reach the Go
# module proxy, so we compile the same components from source instead. Results are cached outside
# the work tree (keyed by version) so a fresh clone on the same machine reuses them, and copied into
# bin/k8s/<version>/, which is what KUBEBUILDER_ASSETS points at.
#
# Usage: hack/setup-envtest.sh            # prints the assets directory on stdout
# Env:   K8S_VERSION (1.37.1), ETCD_VERSION (3.6.7), ENVTEST_CACHE (~/.cache/videogen-operator/envtest)
case ${1:-} in -h | --help) sed -n '2,/^set -/{/^set -/d;s/^# \{0,1\}//p;}' "$0"; exit 0 ;; esac
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.37.1}
ETCD_VERSION=${ETCD_VERSION:-3.6.7}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ASSETS=${ENVTEST_ASSETS:-$ROOT/bin/k8s/$K8S_VERSION}
CACHE=${ENVTEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/videogen-operator/envtest}

log() { printf 'setup-envtest: %s\n' "$*" >&2; }

LOG_PREFIX=setup-envtest
# shellcheck source=hack/lib/gomodbuild.sh
source "$ROOT/hack/lib/gomodbuild.sh"

kube_apiserver() {
  # "-stamped": built with the release's version (gomod_kubernetes_ldflags); an older cached
  # build reported v0.0.0-master.
  local out=$CACHE/kube-apiserver-v$K8S_VERSION-stamped replaces
  [ -x "$out" ] && return 0
  replaces=$(gomod_kubernetes_replaces "$K8S_VERSION")
  log "building kube-apiserver from Go modules (first time only; about six minutes on two cores)"
  gomod_build kube-apiserver "$out" "module envtest.local/kubeapiserver

go 1.26

require k8s.io/kubernetes v$K8S_VERSION

$replaces" "$(gomod_kubernetes_ldflags "$K8S_VERSION")" k8s.io/kubernetes/cmd/kube-apiserver
}

etcd() {
  local out=$CACHE/etcd-v$ETCD_VERSION
  [ -x "$out" ] && return 0
  log "building etcd from Go modules (first time only; about a minute)"
  gomod_build etcd "$out" "module envtest.local/etcd

go 1.26

require go.etcd.io/etcd/server/v3 v$ETCD_VERSION" "" go.etcd.io/etcd/server/v3
}

# bin/k8s/<version>/ is enough on its own: a cleaned cache must not cost a rebuild. The stamp
# says which etcd is there (only the Kubernetes version is in the path).
STAMP="kube-apiserver v$K8S_VERSION (version stamped), etcd v$ETCD_VERSION"
if [ -x "$ASSETS/kube-apiserver" ] && [ -x "$ASSETS/etcd" ] && [ "$(cat "$ASSETS/.versions" 2>/dev/null)" = "$STAMP" ]; then
  echo "$ASSETS"
  exit 0
fi

mkdir -p "$CACHE" "$ASSETS"
kube_apiserver
etcd
# Copy (not link) so bin/ stays usable if the cache is cleaned.
for pair in "kube-apiserver:kube-apiserver-v$K8S_VERSION-stamped" "etcd:etcd-v$ETCD_VERSION"; do
  dst=$ASSETS/${pair%%:*} src=$CACHE/${pair#*:}
  if [ ! -x "$dst" ] || ! cmp -s "$src" "$dst"; then cp "$src" "$dst.tmp" && mv "$dst.tmp" "$dst"; fi
done
echo "$STAMP" >"$ASSETS/.versions"
echo "$ASSETS"
