#!/usr/bin/env bash
# Runs every Go fuzz target in the module for a short time each (default 5s), so CI keeps
# looking for panics in parsers and decoders. Usage: hack/fuzz.sh [duration]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
fuzztime=${1:-5s}
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
