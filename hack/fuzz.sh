#!/usr/bin/env bash
# Runs every Go fuzz target in the module for a short budget each, so CI keeps looking for
# panics in parsers and decoders. Usage: hack/fuzz.sh [budget]
#
# The budget is an execution count (200000x) by default, not a duration: with a duration, Go
# 1.26's fuzz coordinator can report a spurious "context deadline exceeded" when the deadline
# races a busy worker (golang/go#75804, fixed in Go 1.27); a count has no deadline to race.
case ${1:-} in -h | --help) sed -n '2,/^set -/{/^set -/d;s/^# \{0,1\}//p;}' "$0"; exit 0 ;; esac
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
fuzztime=${1:-200000x}
count=0
while IFS=: read -r file _ line; do
  target=$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' <<<"$line")
  [ -n "$target" ] || continue
  pkg=./$(dirname "$file")
  echo "fuzz: $pkg $target ($fuzztime)"
  go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" >/tmp/fuzz.$$.log 2>&1 || { cat /tmp/fuzz.$$.log; rm -f /tmp/fuzz.$$.log; exit 1; }
  count=$((count + 1))
done < <(grep -rn --include='*_test.go' --exclude-dir=bin --exclude-dir=.git '^func Fuzz' . | sed 's|^./||' | sort)
rm -f /tmp/fuzz.$$.log
echo "fuzz: $count targets ran for $fuzztime each without a failure"
