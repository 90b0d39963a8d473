#!/usr/bin/env bash
# bench/device-bisect.sh: one benchmark selection over several revisions' collective.test, interleaved, on
# the device machine (bisecting a slower line found by bench/device-bench.sh compare-run).
#
#   bench/device-bisect.sh build REV...   (here: builds each REV's collective.test into .devbis/REV.test.gz;
#                                          old = 2e2c1b3 with f61e675's benchmark files, head = the working tree)
#   device call: carry [".devbis", ".gl"], command: BUILDS="old REV... head" ROUNDS=8 bash bench/device-bisect.sh run
#
# run: ROUNDS rounds (alternating order) of BENCH (default Broadcast and Reduce at 4 MiB on vulkan) at BT
# calls (20x) per build, into $OUT/BUILD.txt, then the one-rank 4 KiB all-reduce at 100,000 calls x 6 for old
# and head ($OUT/ar1-*.txt), and every file in $OUT/all.tgz (a device call brings back 8 files at most).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
K=.devbis
case "${1:-}" in
build)
	shift
	mkdir -p "$K"
	grep -qxF "/$K/" .git/info/exclude 2>/dev/null || echo "/$K/" >>.git/info/exclude
	ld=(-trimpath -ldflags "-s -w")
	for rev in old "$@" head; do
		if [ "$rev" = head ]; then
			(cd collective && go test -c "${ld[@]}" -o "/tmp/devbis-head.test" .)
		else
			r=$rev
			[ "$rev" = old ] && r=2e2c1b3
			wt=$(mktemp -d)
			git worktree add -q --detach "$wt" "$r"
			if [ "$rev" = old ]; then
				for f in collective/bench_test.go collective/bench_small_test.go; do git show "f61e675:$f" >"$wt/$f"; done
			fi
			(cd "$wt/collective" && go test -c "${ld[@]}" -o "/tmp/devbis-$rev.test" .)
			git worktree remove --force "$wt"
		fi
		gzip -c "/tmp/devbis-$rev.test" >"$K/$rev.test.gz"
	done
	du -sh "$K"
	;;
run)
	: "${OUT:?run: \$OUT is not set (this mode runs inside a device tool call)}"
	for f in .gl/*.deb; do dpkg -x "$f" /; done
	ldconfig
	export GOCOLL_VULKAN_VALIDATION=0 VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
	builds=${BUILDS:-old head}
	bench=${BENCH:-'^BenchmarkCollectives$/^vulkan$/^(Broadcast|Reduce)$/^bytes=4194304$'}
	mkdir -p /tmp/bis
	for b in $builds; do gunzip -c "$K/$b.test.gz" >"/tmp/bis/$b.test" && chmod +x "/tmp/bis/$b.test"; done
	t0=$SECONDS
	cd collective
	for i in $(seq "${ROUNDS:-8}"); do
		order=$builds
		[ $((i % 2)) = 0 ] && order=$(echo "$builds" | tr ' ' '\n' | tac | tr '\n' ' ')
		for b in $order; do
			timeout 60 "/tmp/bis/$b.test" -test.run '^$' -test.bench "$bench" -test.benchtime "${BT:-20x}" >>"$OUT/$b.txt" 2>&1 || true
		done
		echo "round $i done at $((SECONDS - t0)) s" | tee -a "$OUT/log.txt"
		[ $((SECONDS - t0)) -gt "${LIMIT:-400}" ] && break
	done
	for b in old head; do
		timeout 60 "/tmp/bis/$b.test" -test.run '^$' -test.bench '^BenchmarkAllReduce$/^vulkan$/^f32$/^ranks=1$/^bytes=4096$' \
			-test.benchtime 100000x -test.count 6 >>"$OUT/ar1-$b.txt" 2>&1 || true
	done
	(cd "$OUT" && tar czf all.tgz ./*.txt)
	;;
*) echo "usage: bench/device-bisect.sh build REV... | run" >&2; exit 2 ;;
esac
