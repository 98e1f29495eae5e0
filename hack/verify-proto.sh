#!/usr/bin/env bash
# Fails when the committed generated code differs from what hack/gen-proto.sh
# produces now (edited .proto without regenerating, or hand-edited output).
#
# Usage: hack/verify-proto.sh
case ${1:-} in -h | --help) sed -n '2,/^set -/{/^set -/d;s/^# \{0,1\}//p;}' "$0"; exit 0 ;; esac
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Every directory that holds generated code, relative to the repository root.
GENERATED=(apiserver/eventservice/gen)

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$ROOT/hack/gen-proto.sh" "$TMP"

stale=0
for dir in "${GENERATED[@]}"; do
	mkdir -p "$TMP/$dir"
	if ! diff -ru "$ROOT/$dir" "$TMP/$dir"; then
		stale=1
	fi
done
if ((stale)); then
	echo "verify-proto: generated protobuf code is stale; run hack/gen-proto.sh and commit the result" >&2
	exit 1
fi
echo "verify-proto: generated protobuf code is up to date"
