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
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.37.1}
ETCD_VERSION=${ETCD_VERSION:-3.6.7}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ASSETS=${ENVTEST_ASSETS:-$ROOT/bin/k8s/$K8S_VERSION}
CACHE=${ENVTEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/videogen-operator/envtest}

log() { printf 'setup-envtest: %s\n' "$*" >&2; }

# progress NAME TOTAL: counts the package names `go build -v` prints on stdin and shows how far
# the build is: a line rewritten in place on a terminal, a line per tenth elsewhere (CI logs).
# TOTAL counts every dependency; cached ones are not printed, so the count may end below it.
progress() {
  local name=$1 total=$2 n=0 step=0 start=$SECONDS line
  while IFS= read -r line; do
    n=$((n + 1))
    [ "$n" -le "$total" ] || continue
    if [ -t 2 ]; then
      printf '\rsetup-envtest: building %s: %d/%d packages, %ds ' "$name" "$n" "$total" $((SECONDS - start)) >&2
    elif [ $((n * 10 / total)) -gt "$step" ]; then
      step=$((n * 10 / total))
      log "building $name: $n/$total packages, $((SECONDS - start))s"
    fi
  done
  if [ -t 2 ]; then printf '\n' >&2; fi
  log "built $name in $((SECONDS - start))s ($n packages compiled, the rest cached)"
}

# build_in_module NAME OUTPUT GO_MOD_BODY PACKAGE: builds PACKAGE inside a throwaway module.
build_in_module() {
  local name=$1 out=$2 gomod=$3 pkg=$4 tmp total
  tmp=$(mktemp -d)
  printf '%s\n' "$gomod" >"$tmp/go.mod"
  printf 'package tools\n\nimport _ "%s"\n' "$pkg" >"$tmp/tools.go"
  log "building $name from Go modules (first time only; kube-apiserver takes about six minutes on two cores)"
  (
    cd "$tmp"
    log "downloading the modules of $name"
    GOFLAGS=-mod=mod go mod tidy >&2
    total=$(GOFLAGS=-mod=mod go list -deps "$pkg" | wc -l)
    # -v names each package as it is compiled: that is the progress. The log is shown on failure.
    if ! CGO_ENABLED=0 GOFLAGS=-mod=mod go build -v -trimpath -ldflags='-s -w' -o "$out.tmp" "$pkg" 2>&1 </dev/null |
      tee "$tmp/build.log" | progress "$name" "$total"; then
      log "building $name failed:"
      tail -n 40 "$tmp/build.log" >&2
      exit 1
    fi
  )
  rm -rf "$tmp"
  mv "$out.tmp" "$out"
}

kube_apiserver() {
  local out=$CACHE/kube-apiserver-v$K8S_VERSION gomodfile replaces
  [ -x "$out" ] && return 0
  # k8s.io/kubernetes points its staging modules at ./staging/src/...; outside its own tree those
  # must be replaced with the published k8s.io/<name> v0.X.Y modules of the same release.
  gomodfile=$(GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" |
    sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
  [ -f "$gomodfile" ] || { log "cannot read go.mod of k8s.io/kubernetes@v$K8S_VERSION"; exit 1; }
  replaces=$(sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/src/k8s\.io/.*$#replace \1 => \1 v0.'"${K8S_VERSION#1.}"'#p' "$gomodfile")
  build_in_module kube-apiserver "$out" "module envtest.local/kubeapiserver

go 1.26

require k8s.io/kubernetes v$K8S_VERSION

$replaces" k8s.io/kubernetes/cmd/kube-apiserver
}

etcd() {
  local out=$CACHE/etcd-v$ETCD_VERSION
  [ -x "$out" ] && return 0
  build_in_module etcd "$out" "module envtest.local/etcd

go 1.26

require go.etcd.io/etcd/server/v3 v$ETCD_VERSION" go.etcd.io/etcd/server/v3
}

# bin/k8s/<version>/ is enough on its own: a cleaned cache must not cost a rebuild. The stamp
# says which etcd is there (only the Kubernetes version is in the path).
STAMP="kube-apiserver v$K8S_VERSION, etcd v$ETCD_VERSION"
if [ -x "$ASSETS/kube-apiserver" ] && [ -x "$ASSETS/etcd" ] && [ "$(cat "$ASSETS/.versions" 2>/dev/null)" = "$STAMP" ]; then
  echo "$ASSETS"
  exit 0
fi

mkdir -p "$CACHE" "$ASSETS"
kube_apiserver
etcd
# Copy (not link) so bin/ stays usable if the cache is cleaned.
for pair in "kube-apiserver:kube-apiserver-v$K8S_VERSION" "etcd:etcd-v$ETCD_VERSION"; do
  dst=$ASSETS/${pair%%:*} src=$CACHE/${pair#*:}
  if [ ! -x "$dst" ] || ! cmp -s "$src" "$dst"; then cp "$src" "$dst.tmp" && mv "$dst.tmp" "$dst"; fi
done
echo "$STAMP" >"$ASSETS/.versions"
echo "$ASSETS"
