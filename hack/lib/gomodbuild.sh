# shellcheck shell=bash
# Builds programs of published Go modules outside this module (sourced by hack/setup-envtest.sh
# and hack/kind/build-kubernetes.sh): prebuilt downloads are out of reach on these machines, the
# Go module proxy is not.

# gomod_progress NAME TOTAL: counts the package names `go build -v` prints on stdin and shows how
# far the build is: a line rewritten in place on a terminal, a line per tenth elsewhere (CI
# logs). TOTAL counts every dependency; cached ones are not printed, so the count may end below.
gomod_progress() {
  local name=$1 total=$2 n=0 step=0 start=$SECONDS line
  while IFS= read -r line; do
    n=$((n + 1))
    [ "$n" -le "$total" ] || continue
    if [ -t 2 ]; then
      printf '\r%s: building %s: %d/%d packages, %ds ' "$LOG_PREFIX" "$name" "$n" "$total" $((SECONDS - start)) >&2
    elif [ $((n * 10 / total)) -gt "$step" ]; then
      step=$((n * 10 / total))
      printf '%s: building %s: %d/%d packages, %ds\n' "$LOG_PREFIX" "$name" "$n" "$total" $((SECONDS - start)) >&2
    fi
  done
  if [ -t 2 ]; then printf '\n' >&2; fi
  printf '%s: built %s in %ds (%d packages compiled, the rest cached)\n' "$LOG_PREFIX" "$name" $((SECONDS - start)) "$n" >&2
}

# gomod_build NAME OUTPUT GO_MOD_BODY LDFLAGS PACKAGE...: builds the PACKAGEs inside a throwaway
# module whose go.mod is GO_MOD_BODY, statically, into OUTPUT: a file for one package, a
# directory (ending in /) for several, each binary named after its package.
gomod_build() {
  local name=$1 out=$2 gomod=$3 ldflags=$4 tmp total
  shift 4
  tmp=$(mktemp -d)
  printf '%s\n' "$gomod" >"$tmp/go.mod"
  {
    printf 'package tools\n\nimport (\n'
    printf '\t_ "%s"\n' "$@"
    printf ')\n'
  } >"$tmp/tools.go"
  (
    cd "$tmp"
    printf '%s: downloading the modules of %s\n' "$LOG_PREFIX" "$name" >&2
    GOFLAGS=-mod=mod go mod tidy >&2
    total=$(GOFLAGS=-mod=mod go list -deps "$@" | sort -u | wc -l)
    local dst=$out.tmp
    case $out in */) dst=${out%/}.tmp/ && rm -rf "$dst" && mkdir -p "$dst" ;; esac
    # -v names each package as it is compiled: that is the progress. The log is shown on failure.
    if ! CGO_ENABLED=0 GOFLAGS=-mod=mod go build -v -trimpath -ldflags="-s -w $ldflags" -o "$dst" "$@" 2>&1 </dev/null |
      tee "$tmp/build.log" | gomod_progress "$name" "$total"; then
      printf '%s: building %s failed:\n' "$LOG_PREFIX" "$name" >&2
      tail -n 40 "$tmp/build.log" >&2
      exit 1
    fi
  ) || { rm -rf "$tmp"; return 1; }
  rm -rf "$tmp"
  case $out in
    */) rm -rf "${out%/}" && mv "${out%/}.tmp" "${out%/}" ;;
    *) mv "$out.tmp" "$out" ;;
  esac
}

# gomod_kubernetes_replaces VERSION: the replace directives a module needs to build commands of
# k8s.io/kubernetes@vVERSION: its go.mod points its staging modules at ./staging/src/..., which
# outside its own tree must be the published k8s.io/<name> v0.X.Y modules of the same release.
gomod_kubernetes_replaces() {
  local version=$1 gomodfile
  gomodfile=$(GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v$version" |
    sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
  [ -f "$gomodfile" ] || { printf '%s: cannot read go.mod of k8s.io/kubernetes@v%s\n' "$LOG_PREFIX" "$version" >&2; return 1; }
  sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/src/k8s\.io/.*$#replace \1 => \1 v0.'"${version#1.}"'#p' "$gomodfile"
}

# gomod_kubernetes_ldflags VERSION: what hack/lib/version.sh of Kubernetes stamps into a release
# build. Unstamped, a server reports v0.0.0-master+$Format:%H$, which `kubectl version` cannot
# parse (it exits 1) and kubeadm cannot compare with its own version.
gomod_kubernetes_ldflags() {
  local version=$1 minor pkg flags=()
  minor=${version#*.}
  minor=${minor%%.*}
  for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    flags+=("-X '$pkg.gitVersion=v$version'" "-X '$pkg.gitMajor=1'" "-X '$pkg.gitMinor=$minor'"
      "-X '$pkg.gitTreeState=clean'" "-X '$pkg.buildDate=1970-01-01T00:00:00Z'")
  done
  printf '%s' "${flags[*]}"
}
