#!/usr/bin/env bash
# Generates the Go code for api/proto/ into the work tree (or into OUT_DIR).
#
# protoc comes from Debian (protobuf-compiler, plus libprotobuf-dev for the
# well-known types such as google/protobuf/timestamp.proto). The plugins are
# the `tool` directives in go.mod, so their versions are pinned with the
# runtime libraries the generated code links against.
#
# Usage: hack/gen-proto.sh [OUT_DIR]   # OUT_DIR defaults to the repository root
# Env:   PROTOC (protoc), PROTOC_VERSION (3.21.12: the generated files name it,
#        so another version would make hack/verify-proto.sh report them stale)
case ${1:-} in -h | --help) sed -n '2,/^set -/{/^set -/d;s/^# \{0,1\}//p;}' "$0"; exit 0 ;; esac
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${1:-$ROOT}
PROTOC=${PROTOC:-protoc}
PROTOC_VERSION=${PROTOC_VERSION:-3.21.12}
MODULE=github.com/videogen-dev/videogen-operator
INCLUDE=/usr/include

die() { printf 'gen-proto: %s\n' "$*" >&2; exit 1; }

command -v "$PROTOC" >/dev/null ||
	die "protoc not found: apt-get install -y protobuf-compiler libprotobuf-dev"
got=$("$PROTOC" --version)
[[ $got == "libprotoc $PROTOC_VERSION" ]] ||
	die "need libprotoc $PROTOC_VERSION (Debian bookworm's protobuf-compiler), found '$got'"
[[ -f $INCLUDE/google/protobuf/timestamp.proto ]] ||
	die "well-known types missing from $INCLUDE: apt-get install -y libprotobuf-dev"

BIN=$(mktemp -d)
trap 'rm -rf "$BIN"' EXIT
# go build (not go install) so nothing outside the temp dir changes.
(cd "$ROOT" && go build -o "$BIN/" \
	google.golang.org/protobuf/cmd/protoc-gen-go \
	connectrpc.com/connect/cmd/protoc-gen-connect-go)

mkdir -p "$OUT"
cd "$ROOT/api/proto"
mapfile -t protos < <(find . -name '*.proto' | sed 's|^\./||' | LC_ALL=C sort)
"$PROTOC" \
	--proto_path=. --proto_path="$INCLUDE" \
	--plugin=protoc-gen-go="$BIN/protoc-gen-go" \
	--plugin=protoc-gen-connect-go="$BIN/protoc-gen-connect-go" \
	--go_out="$OUT" --go_opt=module="$MODULE" \
	--connect-go_out="$OUT" --connect-go_opt=module="$MODULE" \
	"${protos[@]}"
