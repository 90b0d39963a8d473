#!/usr/bin/env bash
# bench/lavapipe-compare.sh: old against new on this machine (lavapipe and the host backend), interleaved.
#
#   bench/lavapipe-compare.sh [OLDREV [BENCHREV]]   (defaults 2e2c1b3 f61e675)
#   ROUNDS=10 OUT=/tmp/lvcmp bench/lavapipe-compare.sh
#
# Builds collective.test and vulkan.test of OLDREV (in a temporary worktree, with BENCHREV's
# collective/bench*_test.go where OLDREV's no longer match the selection) and of the working tree, then
# runs ROUNDS rounds, alternating which build goes first: vulkan's '^BenchmarkReduce$' (10x), collective's
# 'BenchmarkAllReduce/vulkan/f32' and 'BenchmarkStrategies/vulkan/.*/bytes=4194304$' (10x) and
# 'BenchmarkSmallHost' (2000x). Writes $OUT/old.txt and $OUT/new.txt and prints benchstat's comparison.
# Run it with nothing else on the machine: the figures are wall-clock times.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OLDREV=${1:-2e2c1b3}
BENCHREV=${2:-f61e675}
ROUNDS=${ROUNDS:-10}
OUT=${OUT:-$(mktemp -d /tmp/gocoll-lvcmp.XXXXXX)}
mkdir -p "$OUT"
wt=$(mktemp -d /tmp/gocoll-lvcmp-old.XXXXXX)
trap 'git worktree remove --force "$wt" >/dev/null 2>&1 || true' EXIT
git worktree add -q --detach "$wt" "$OLDREV"
if [ -n "$BENCHREV" ]; then
	git show "$BENCHREV:collective/bench_test.go" >"$wt/collective/bench_test.go"
	git show "$BENCHREV:collective/bench_small_test.go" >"$wt/collective/bench_small_test.go"
fi
echo "== building $OLDREV (benchmarks of ${BENCHREV:-$OLDREV}) and the working tree into $OUT" >&2
(cd "$wt/collective" && go test -c -o "$OUT/old-collective.test" .)
(cd "$wt/vulkan" && go test -c -o "$OUT/old-vulkan.test" .)
(cd collective && go test -c -o "$OUT/new-collective.test" .)
(cd vulkan && go test -c -o "$OUT/new-vulkan.test" .)
: >"$OUT/old.txt"
: >"$OUT/new.txt"
one() { # one build's selection, appended to $OUT/$1.txt
	(cd vulkan && "$OUT/$1-vulkan.test" -test.run '^$' -test.bench '^BenchmarkReduce$' -test.benchtime 10x) >>"$OUT/$1.txt"
	(cd collective && "$OUT/$1-collective.test" -test.run '^$' -test.bench 'BenchmarkAllReduce/vulkan/f32' -test.benchtime 10x) >>"$OUT/$1.txt"
	(cd collective && "$OUT/$1-collective.test" -test.run '^$' -test.bench 'BenchmarkStrategies/vulkan/.*/bytes=4194304$' -test.benchtime 10x) >>"$OUT/$1.txt"
	(cd collective && "$OUT/$1-collective.test" -test.run '^$' -test.bench 'BenchmarkSmallHost' -test.benchtime 2000x) >>"$OUT/$1.txt"
}
echo "== $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for i in $(seq "$ROUNDS"); do
	if [ $((i % 2)) = 1 ]; then one old; one new; else one new; one old; fi
	echo "== round $i of $ROUNDS done, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
done
echo "== outputs in $OUT" >&2
if command -v benchstat >/dev/null; then benchstat "$OUT/old.txt" "$OUT/new.txt"; else "$(go env GOPATH)/bin/benchstat" "$OUT/old.txt" "$OUT/new.txt"; fi
