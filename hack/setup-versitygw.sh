#!/usr/bin/env bash
# Builds the Versity S3 Gateway (an S3-compatible server) from Go modules, for the tests of the
# S3 blob store: a real S3 API on loopback instead of a mock. Cached by version outside the work
# tree and copied to bin/versitygw. Prints the binary's path.
#
# Usage: hack/setup-versitygw.sh      (make setup-versitygw)
case ${1:-} in -h | --help) sed -n '2,/^set -/{/^set -/d;s/^# \{0,1\}//p;}' "$0"; exit 0 ;; esac
set -euo pipefail

VERSION=${VERSITYGW_VERSION:-1.8.0}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${ENVTEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/videogen-operator/envtest}
out=$CACHE/versitygw-v$VERSION
dst=$ROOT/bin/versitygw

if [ ! -x "$out" ]; then
  echo "setup-versitygw: building versitygw v$VERSION (first time only, about a minute)" >&2
  mkdir -p "$CACHE"
  tmp=$(mktemp -d)
  printf 'module envtest.local/versitygw\n\ngo 1.26\n\nrequire github.com/versity/versitygw v%s\n' "$VERSION" >"$tmp/go.mod"
  printf 'package tools\n\nimport _ "github.com/versity/versitygw/cmd/versitygw"\n' >"$tmp/tools.go"
  (cd "$tmp" && GOFLAGS=-mod=mod go mod tidy >&2 && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags='-s -w' -o "$out.tmp" github.com/versity/versitygw/cmd/versitygw >&2)
  rm -rf "$tmp"
  mv "$out.tmp" "$out"
fi
mkdir -p "$ROOT/bin"
if [ ! -x "$dst" ] || ! cmp -s "$out" "$dst"; then cp "$out" "$dst.tmp" && mv "$dst.tmp" "$dst"; fi
echo "$dst"
