#!/usr/bin/env bash
# Runs the benchmarks one after another on one control plane kind and prints their markdown
# tables, then a summary of the goals. Usage: hack/bench/run.sh [all|scale]
# Output is kept in bin/bench/ (BENCH_OUT). Each program stops by itself (-timeout).
case ${1:-} in -h | --help) sed -n '2,/^set -/{/^set -/d;s/^# \{0,1\}//p;}' "$0"; exit 0 ;; esac
set -euo pipefail
what=${1:-all}
# Anything else ran every benchmark, minutes of both cores, for a typo or a --help.
case $what in all | scale) ;; *) echo "usage: hack/bench/run.sh [all|scale] (-h for more)" >&2; exit 2 ;; esac
cd "$(dirname "$0")/../.."
out=${BENCH_OUT:-bin/bench}
mkdir -p "$out"

run() { # name, command...
	local name=$1
	shift
	echo "==> $name: $*" >&2
	{ echo "Command: \`$*\`"; echo; "$@"; } >"$out/$name.md"
	cat "$out/$name.md"
	echo
}

if [[ $what == scale ]]; then
	run scale go run ./hack/bench/scale -finished "${SCALE_FINISHED:-10000}" -active "${SCALE_ACTIVE:-1000}" -accounts 100 -steady 60s
	# The same, as after a manager restart: the active tasks already run.
	run scale-running go run ./hack/bench/scale -finished "${SCALE_FINISHED:-10000}" -active "${SCALE_ACTIVE:-1000}" -accounts 100 -steady 60s -active-state running
	grep -h '^Goal' "$out/scale.md" "$out/scale-running.md"
	exit 0
fi

run submit go run ./hack/bench/submit -runs "${BENCH_RUNS:-5}" -n1 "${SUBMIT_N1:-1000}" -n8 "${SUBMIT_N8:-2400}" -n64 "${SUBMIT_N64:-3200}"
run statuscost go run ./hack/bench/statuscost -n 500
run lifecycle go run ./hack/bench/lifecycle -runs "${BENCH_RUNS:-5}" -tasks "${LIFECYCLE_TASKS:-1000}" -accounts 16 -c 32
run connectors go test -run '^$' -bench . -benchmem ./internal/connectors/...
run stripecompare go -C hack/bench/stripecompare run .
run webhooks go run ./hack/bench/webhooks -tasks "${WEBHOOK_TASKS:-300}" -accounts 4 -c 16

echo "==> summary (tables above; kept in $out/)"
grep -h '^Goal' "$out"/submit.md "$out"/lifecycle.md "$out"/stripecompare.md
grep -h '^| Benchmark' "$out"/connectors.md || true
grep -h '^Benchmark' "$out"/connectors.md | awk '{printf "  %-32s %10s ns/op %8s allocs/op\n", $1, $3, $(NF-1)}'
sed -n '/^| deliveries/,/^$/p' "$out"/webhooks.md
