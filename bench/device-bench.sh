#!/usr/bin/env bash
# bench/device-bench.sh: gocoll's device benchmark, ceilings and gocoll side by side in one run.
#
#   bench/device-bench.sh [prepare]   (here; also ./build.sh device-bench) build every binary into .devbench/,
#                                     fetch the Vulkan loader debs into .gl/, print the one `device` tool call
#   bench/device-bench.sh run         (there, inside that call; needs $OUT) run everything, write to $OUT:
#                                     results.json, results.md (gocoll-devbench: ceilings, T1-T7, verdicts),
#                                     torch.json (bench/torch_peer.py), allreduce-perf.json + .png (the sweep
#                                     and its plot), bench-h200.txt (benchstat-ready go test -bench), run.log
#   bench/device-bench.sh colls       (there, like run) the collectives beyond all-reduce: same-run ceilings
#                                     (ceilings.md/json, engine pairings for both PCIe directions included),
#                                     go test -bench of every collective, slice and tensor forms, and of the
#                                     element types (colls-h200.txt; staged-* lines: the 64 MiB calls with
#                                     imports off), the newest paths' tests (checks.txt), the allreduce-perf
#                                     type sweep (types.json)
#   bench/device-bench.sh exact       (there, like run) exactness on the GPU, logs in $OUT/exact/: TestConformance
#                                     with every session on vulkan (EXACT_CASES, default 600; EXACT_SEED; its log
#                                     counts the GPU sessions and the calls of subnormal inputs), the vulkan
#                                     package's Conformance and Subnormal tests, TestSubnormalAllReduce, and where
#                                     collective.test has them TestDeterministicPinnedMeanRepeat (20 groups) and
#                                     BenchmarkFreshSlice; at most 8 minutes
#   bench/device-bench.sh parity      (there, like run) the peer-parity operations on the GPU: same-run ceilings,
#                                     the allreduce-perf sweeps of int16, uint16, fp8e4m3 and fp8e5m2 (sum), the
#                                     bitwise and logical ops (int32), premulsum (float, half), scan and exscan
#                                     (float, int32), and BenchmarkScan; every table and JSON in $OUT/parity.tgz
#                                     (binaries from .devbench/, or gzipped in .devbench-gz/: pack-gz below)
#   bench/device-bench.sh pack-gz     (here) gzip .devbench's allreduce-perf, collective.test, gocoll-devbench and
#                                     gocoll-info into .devbench-gz/ (a smaller carry, beside mpi/bench.sh's kit)
#   bench/device-bench.sh compare REV [BENCHREV] (here) build REV's binaries into .devbench-old/ beside the
#                                     current ones (with BENCHREV's benchmark files where the current ones no
#                                     longer build against REV: `compare 2e2c1b3 f61e675`), then print the call
#                                     for the mode below
#   bench/device-bench.sh compare-run (there) the T5 selection, BenchmarkCollectives and BenchmarkSmallHost of
#                                     both builds, interleaved old/new (COMPARE_ROUNDS, default 3), and the
#                                     allreduce-perf sweep of each: old.txt/new.txt for benchstat, sweep-*.json
#   bench/device-bench.sh lavapipe    (here) the same go test -bench selection on lavapipe -> bench/lavapipe.txt,
#                                     and a small gocoll-devbench run -> bench/out/
#
# The device machine has no Go and no Vulkan loader: everything is built here (x86-64, glibc 2.36 binaries run
# there unchanged) and carried; the loader comes from Debian's libvulkan1 deb, unpacked there.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

D=.devbench
# The go test -bench selection of T5 (the same here and there, so benchstat compares like with like).
BENCH_VULKAN='^BenchmarkReduce$'
BENCH_COLL1='^BenchmarkAllReduce$/^vulkan$/^f32$'
BENCH_COLL2='^BenchmarkStrategies$/^vulkan$/.*/^bytes=4194304$'
BENCH_COUNT=${BENCH_COUNT:-5}
GL_DEBS=(libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 vulkan-validationlayers)

log() { printf '== %s\n' "$*" >&2; }
die() {
	printf 'device-bench.sh: %s\n' "$*" >&2
	exit 1
}

exclude() { # make sure git ignores what is carried
	local f=.git/info/exclude p
	[ -d .git ] || return 0
	mkdir -p .git/info
	for p in /.gl/ /$D/ /bench/out/; do
		grep -qxF "$p" "$f" 2>/dev/null || echo "$p" >>"$f"
	done
}

prepare() {
	command -v go >/dev/null || die "go is not installed"
	exclude
	rm -rf "$D"
	mkdir -p "$D"
	local ld=(-trimpath -ldflags "-s -w")
	log "building into $D/"
	go build "${ld[@]}" -o "$D/gocoll-devbench" ./cmd/gocoll-devbench || die "build gocoll-devbench"
	go build "${ld[@]}" -o "$D/gocoll-info" ./cmd/gocoll-info || die "build gocoll-info"
	go build "${ld[@]}" -o "$D/allreduce-perf" ./cmd/allreduce-perf || die "build allreduce-perf"
	go test -c "${ld[@]}" -o "$D/collective.test" ./collective || die "build collective.test"
	go test -c "${ld[@]}" -o "$D/vulkan.test" ./vulkan || die "build vulkan.test"
	if ! ls .gl/libvulkan1_*.deb .gl/vulkan-validationlayers_*.deb >/dev/null 2>&1; then
		log "fetching the loader debs into .gl/ (amd64, whatever this machine is)"
		mkdir -p .gl /tmp/amd64/partial
		local o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64)
		apt-get "${o[@]}" update >/dev/null || die "apt-get update failed"
		(cd .gl && apt-get "${o[@]}" download "${GL_DEBS[@]}") || die "apt-get download failed"
	fi
	du -sh "$D" .gl >&2
	cat <<'EOF'

Now make ONE device tool call (nvidia-h200), from the repository root:

  run  kind: nvidia-h200   timeout_s: 600
       carry: [".devbench", ".gl"]
       command: bash bench/device-bench.sh run

Then copy the fetched files: bench-h200.txt -> bench/h200.txt; results.md/results.json, allreduce-perf.png
-> docs/ as docs/PERFORMANCE.md says.
EOF
}

# step NAME SECONDS CMD...: run with a time limit, log it, never stop the script.
step() {
	local name=$1 secs=$2
	shift 2
	log "$name (limit ${secs}s): $*"
	local t0=$SECONDS
	timeout -k 10 "$secs" "$@"
	local rc=$?
	log "$name: rc=$rc after $((SECONDS - t0))s"
	return $rc
}

# step_to FILE NAME SECONDS CMD...: step with the command's output, stdout and stderr, in FILE.
step_to() {
	local out=$1 name=$2 secs=$3
	shift 3
	log "$name (limit ${secs}s, output in $out): $*"
	local t0=$SECONDS
	timeout -k 10 "$secs" "$@" >"$out" 2>&1
	local rc=$?
	log "$name: rc=$rc after $((SECONDS - t0))s"
	return $rc
}

run_there() {
	[ -n "${OUT:-}" ] || die "run: \$OUT is not set (this mode runs inside a device tool call)"
	[ -x "$D/gocoll-devbench" ] || die "run: $D/ is missing: run bench/device-bench.sh here first, and carry $D"
	exec > >(tee -a "$OUT/run.log") 2>&1
	local t0=$SECONDS
	# DEVBENCH_LOCAL=1 tries this mode here (lavapipe, small sizes, no debs unpacked).
	if [ -z "${DEVBENCH_LOCAL:-}" ]; then
		for f in .gl/*.deb; do dpkg -x "$f" /; done
		ldconfig
	fi
	export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
	export GOCOLL_VULKAN_VALIDATION=0
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv || true
	"$D/gocoll-info" | tee /tmp/info.txt
	if ! grep -qi nvidia /tmp/info.txt && [ -z "${DEVBENCH_LOCAL:-}" ]; then
		export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
		export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
		"$D/gocoll-info" | tee /tmp/info.txt
		grep -qi nvidia /tmp/info.txt || die "gocoll-info lists no NVIDIA device"
	fi
	# DEVBENCH_ARGS / TORCH_ARGS add flags (smaller sizes for a local try).
	step torch_peer 150 python3 bench/torch_peer.py ${TORCH_ARGS:-} --out "$OUT/torch.json"
	step gocoll-devbench 420 "$D/gocoll-devbench" ${DEVBENCH_ARGS:-} -torch "$OUT/torch.json" -json "$OUT/results.json" -md "$OUT/results.md" \
		-command "bash bench/device-bench.sh run (device tool, nvidia-h200; carry .devbench .gl)"
	cat "$OUT/results.md" 2>/dev/null | sed -n '/## Targets/,/## Ceilings/p'
	# The latency section again with a logical device per rank (GOCOLL_SHARE_DEVICE=0, the layout of separate
	# GPUs), for comparison with the default shared device (latencies only: T4 counts in the main pass).
	step gocoll-devbench-per-rank 90 env GOCOLL_SHARE_DEVICE=0 "$D/gocoll-devbench" ${DEVBENCH_ARGS:-} -skip ceilings,t1,t2a,t2b,t6,t7 \
		-alloc-windows 1 -torch "$OUT/torch.json" -md "$OUT/results-per-rank.md" -command "GOCOLL_SHARE_DEVICE=0 bash bench/device-bench.sh run (second pass)"
	cat "$OUT/results-per-rank.md" 2>/dev/null | sed -n '/## Targets/,/## Ceilings/p'
	step allreduce-perf 75 "$D/allreduce-perf" -g 2 --devices 0,0 --backend vulkan -b 4K -e "${ARP_MAX:-256M}" -f 4 -a all -n 5 -w 2 \
		-J "$OUT/allreduce-perf.json" --plot "$OUT/allreduce-perf.png"
	# T4 on the device: the zero-allocation and zero-object tests (without the validation layer:
	# GOCOLL_VULKAN_VALIDATION=0 is exported above, and both packages' tests honour it).
	(cd collective && step T4-collective 45 "../$D/collective.test" -test.run 'TestAllReduceZeroAllocs|TestStrategiesZeroAllocs' -test.v) | grep -E '^(=== RUN|--- |PASS|FAIL|ok)|allocs|objects' || true
	(cd vulkan && step T4-vulkan 30 "../$D/vulkan.test" -test.run '^TestSteadyState$' -test.v) || true
	# T5: benchstat-ready go test -bench output.
	bench_selection "$OUT/bench-h200.txt" "${BENCHTIME:-20x}" 150
	# AllToAll, Gather and Scatter (and the older collectives beside them, for scale): 4 ranks on the GPU.
	(cd collective && step collectives 150 "../$D/collective.test" -test.run '^$' \
		-test.bench '^BenchmarkCollectives$/^vulkan$/' -test.benchtime "${BENCHTIME:-20x}" -test.count 3) >>"$OUT/bench-h200.txt"
	log "done in $((SECONDS - t0))s"
}

# nvidia_loader: unpack the Vulkan loader from .gl/, point it at the NVIDIA driver, no validation layer (figures
# and checks of the code alone), and make sure gocoll sees the GPU. DEVBENCH_LOCAL=1 (a try here, on lavapipe)
# keeps this machine's loader and driver.
nvidia_loader() {
	export GOCOLL_VULKAN_VALIDATION=0
	[ -n "${DEVBENCH_LOCAL:-}" ] && return 0
	for f in .gl/*.deb; do dpkg -x "$f" /; done
	ldconfig
	export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
	nvidia-smi --query-gpu=name,driver_version --format=csv || true
	"$D/gocoll-info" | grep -i nvidia || die "gocoll-info lists no NVIDIA device"
}

# colls_there: the "colls" mode (see the top of this file).
colls_there() {
	[ -n "${OUT:-}" ] || die "colls: \$OUT is not set (this mode runs inside a device tool call)"
	[ -x "$D/gocoll-devbench" ] || die "colls: $D/ is missing: run bench/device-bench.sh here first, and carry $D"
	exec > >(tee -a "$OUT/run.log") 2>&1
	local t0=$SECONDS bt=${BENCHTIME:-10x} n=${BENCH_COUNT:-3}
	nvidia_loader
	step ceilings 120 "$D/gocoll-devbench" -skip t1,t2a,t2b,t3,t6,t7 -json "$OUT/ceilings.json" -md "$OUT/ceilings.md" \
		-command "bash bench/device-bench.sh colls (device tool, nvidia-h200; carry .devbench .gl)"
	local o="$OUT/colls-h200.txt"
	: >"$o"
	(cd collective && step collectives 240 "../$D/collective.test" -test.run '^$' -test.bench '^BenchmarkCollectives$/^vulkan$/' \
		-test.benchtime "$bt" -test.count "$n") >>"$o"
	(cd collective && step tensor-collectives 150 "../$D/collective.test" -test.run '^$' -test.bench '^BenchmarkTensorCollectives$/^vulkan$/' \
		-test.benchtime "$bt" -test.count "$n") >>"$o"
	(cd collective && step element-types 90 "../$D/collective.test" -test.run '^$' -test.bench '^BenchmarkElementTypes$/^vulkan$/' \
		-test.benchtime "$bt" -test.count "$n") >>"$o"
	# The same 64 MiB calls with every plain slice staged (no import), for comparison.
	(cd collective && GOCOLL_BENCH_IMPORT=off step collectives-staged 90 "../$D/collective.test" -test.run '^$' \
		-test.bench '^BenchmarkCollectives$/^vulkan$/.*/bytes=67108864$' -test.benchtime "$bt" -test.count 3) | sed 's/^Benchmark/staged-Benchmark/' >>"$o"
	# Correctness of the newest paths on this device.
	(cd collective && step checks 120 "../$D/collective.test" -test.run 'TestSharedTensorCollectives|TestGoSliceImportCollectives|TestMean16OneRounding|TestTensorReduceRandom|TestAutoHostRatePerType' -test.v) \
		| grep -E '^(--- |PASS|FAIL|ok)|CPU reduce' >"$OUT/checks.txt"
	step types 90 "$D/allreduce-perf" -g 2 --devices 0,0 --backend vulkan -b 4K -e 64M -f 4 \
		-d float,int8,uint8,int32,uint32,int64,uint64,half,bfloat16 -o sum -n 5 -w 2 -J "$OUT/types.json" >"$OUT/types.txt"
	# COLLS_EXTRA: more commands for the same call (diagnostics), run last.
	if [ -n "${COLLS_EXTRA:-}" ]; then step extra 200 bash -c "$COLLS_EXTRA"; fi
	log "done in $((SECONDS - t0))s"
}

# exact_there: the "exact" mode (see the top of this file). The step limits add up to under 8 minutes; on the
# H200 a conformance session took about 0.2 s, so 600 take about 2 of the 3.5 minutes allowed. A step cut short
# by its limit leaves its log so far (TestConformance logs its counts every 100 sessions).
exact_there() {
	[ -n "${OUT:-}" ] || die "exact: \$OUT is not set (this mode runs inside a device tool call)"
	[ -x "$D/collective.test" ] || die "exact: $D/ is missing: run bench/device-bench.sh here first, and carry $D"
	local o="$OUT/exact"
	mkdir -p "$o"
	exec > >(tee -a "$o/run.log") 2>&1
	local t0=$SECONDS seed=()
	nvidia_loader
	[ -n "${EXACT_SEED:-}" ] && seed=(-conformance.seed="$EXACT_SEED")
	# Every session on vulkan (-conformance.vulkan=100): the calls draw their data, subnormal inputs included,
	# as in CI.
	(cd collective && step_to "$o/conformance.log" conformance 210 "../$D/collective.test" -test.run 'TestConformance$' \
		-conformance.cases="${EXACT_CASES:-600}" -conformance.vulkan=100 "${seed[@]}" -test.v)
	grep -E 'sessions run|failures by kind|^ +[0-9]+ +seed=|^(--- |PASS|FAIL|ok)' "$o/conformance.log"
	(cd vulkan && step_to "$o/vulkan.log" vulkan-conformance 75 "../$D/vulkan.test" -test.run 'Conformance|Subnormal' -test.v)
	grep -E '^(--- |PASS|FAIL|ok)' "$o/vulkan.log"
	(cd collective && step_to "$o/subnormal.log" subnormal-allreduce 75 "../$D/collective.test" -test.run 'TestSubnormalAllReduce' -test.v)
	grep -E 'seed [0-9]|^(--- |PASS|FAIL|ok)' "$o/subnormal.log"
	# These two run where the binary has them (-test.list prints the names it has).
	local names
	names=$(cd collective && "../$D/collective.test" -test.list '^(TestDeterministicPinnedMeanRepeat|BenchmarkFreshSlice)$')
	if grep -qx TestDeterministicPinnedMeanRepeat <<<"$names"; then
		(cd collective && step_to "$o/repeat.log" pinned-mean-repeat 60 "../$D/collective.test" \
			-test.run '^TestDeterministicPinnedMeanRepeat$' -test.count "${REPEAT_COUNT:-20}" -test.v)
		grep -E '^(--- FAIL|PASS|FAIL|ok)' "$o/repeat.log"
		log "TestDeterministicPinnedMeanRepeat passed $(grep -c -- '--- PASS' "$o/repeat.log") times"
	else
		log "collective.test has no TestDeterministicPinnedMeanRepeat: skipped"
	fi
	if grep -qx BenchmarkFreshSlice <<<"$names"; then
		(cd collective && step_to "$o/fresh-slice.txt" fresh-slice 45 "../$D/collective.test" -test.run '^$' \
			-test.bench '^BenchmarkFreshSlice$/^vulkan$/' -test.benchtime "${BENCHTIME:-10x}" -test.count 1)
		log "BenchmarkFreshSlice: $(grep -c '^Benchmark' "$o/fresh-slice.txt") benchmark lines"
	else
		log "collective.test has no BenchmarkFreshSlice: skipped"
	fi
	log "done in $((SECONDS - t0))s"
}

# bench_selection FILE BENCHTIME SECONDS: the T5 selection, appended to FILE.
bench_selection() {
	local out=$1 bt=$2 secs=$3
	: >"$out"
	(cd vulkan && GOCOLL_VULKAN_VALIDATION=0 step T5-vulkan "$secs" "../$D/vulkan.test" -test.run '^$' -test.bench "$BENCH_VULKAN" \
		-test.benchtime "$bt" -test.count "$BENCH_COUNT") >>"$out"
	# Without the validation layer (GOCOLL_VULKAN_VALIDATION=0, exported above): figures of the code alone.
	(cd collective && step T5-collective-allreduce "$secs" "../$D/collective.test" -test.run '^$' -test.bench "$BENCH_COLL1" \
		-test.benchtime "$bt" -test.count "$BENCH_COUNT") >>"$out"
	(cd collective && step T5-collective-strategies "$secs" "../$D/collective.test" -test.run '^$' -test.bench "$BENCH_COLL2" \
		-test.benchtime "$bt" -test.count "$BENCH_COUNT") >>"$out"
	log "$(grep -c '^Benchmark' "$out") benchmark lines in $out"
}

# compare_prepare REV [BENCHREV]: the current tree's binaries in $D, REV's in $D-old (a temporary worktree;
# the benchmark files of the current tree, or of BENCHREV where the current ones no longer build against REV,
# are copied in, so both builds run the same benchmarks).
compare_prepare() {
	local rev=${1:?usage: bench/device-bench.sh compare REV [BENCHREV]} brev=${2:-}
	prepare >/dev/null
	local wt f
	wt=$(mktemp -d)
	git worktree add -f --detach "$wt" "$rev" >/dev/null || die "worktree of $rev"
	for f in collective/bench_test.go collective/bench_small_test.go; do
		if [ -n "$brev" ]; then
			git show "$brev:$f" >"$wt/$f" 2>/dev/null || rm -f "$wt/$f"
		else
			cp "$f" "$wt/$f" 2>/dev/null || true
		fi
	done
	rm -rf "$D-old"
	mkdir -p "$D-old"
	local ld=(-trimpath -ldflags "-s -w")
	(cd "$wt" && go test -c "${ld[@]}" -o "$OLDPWD/$D-old/collective.test" ./collective &&
		go test -c "${ld[@]}" -o "$OLDPWD/$D-old/vulkan.test" ./vulkan &&
		go build "${ld[@]}" -o "$OLDPWD/$D-old/allreduce-perf" ./cmd/allreduce-perf) || die "build of $rev"
	git worktree remove --force "$wt"
	# Both builds, compressed: uncompressed they pass the 64 MiB a device call carries.
	rm -rf "$D-cmp"
	mkdir -p "$D-cmp/old" "$D-cmp/new"
	for f in collective.test vulkan.test allreduce-perf; do
		gzip -c "$D-old/$f" >"$D-cmp/old/$f.gz"
		gzip -c "$D/$f" >"$D-cmp/new/$f.gz"
	done
	for f in "/$D-old/" "/$D-cmp/"; do
		grep -qxF "$f" .git/info/exclude 2>/dev/null || echo "$f" >>.git/info/exclude
	done
	du -sh "$D-cmp" >&2
	printf '%s\n' '' 'Now make ONE device tool call (nvidia-h200), from the repository root:' '' \
		'  run  kind: nvidia-h200   timeout_s: 600' '       carry: [".devbench-cmp", ".gl"]' \
		'       command: bash bench/device-bench.sh compare-run' '' 'Then: benchstat old.txt new.txt (files from $OUT).'
}

# compare_there: both builds' benchmarks, interleaved (see the top of this file).
pack_gz() {
	[ -x "$D/allreduce-perf" ] || die "pack-gz: build $D first (bench/device-bench.sh prepare)"
	mkdir -p "$D-gz"
	local f
	for f in allreduce-perf collective.test gocoll-devbench gocoll-info vulkan.test; do gzip -c "$D/$f" >"$D-gz/$f.gz"; done
	grep -qxF "/$D-gz/" .git/info/exclude 2>/dev/null || echo "/$D-gz/" >>.git/info/exclude
	log "$D-gz: $(du -sh "$D-gz" | cut -f1)"
}

parity_there() {
	[ -n "${OUT:-}" ] || die "parity: \$OUT is not set (this mode runs inside a device tool call)"
	local f
	if [ ! -x "$D/gocoll-devbench" ] && [ -d "$D-gz" ]; then
		mkdir -p "$D"
		for f in "$D-gz"/*.gz; do
			gunzip -c "$f" >"$D/$(basename "$f" .gz)" && chmod +x "$D/$(basename "$f" .gz)"
		done
	fi
	[ -x "$D/gocoll-devbench" ] || die "parity: $D/ is missing: run bench/device-bench.sh prepare (and pack-gz) here first"
	exec > >(tee -a "$OUT/run.log") 2>&1
	local t0=$SECONDS p=/tmp/parity
	mkdir -p $p
	nvidia_loader
	step ceilings 120 "$D/gocoll-devbench" -skip t1,t2a,t2b,t3,t6,t7 -json $p/ceilings.json -md $p/ceilings.md \
		-command "bash bench/device-bench.sh parity (device tool, nvidia-h200; carry .devbench-gz .gl)"
	local a=("$D/allreduce-perf" -g 2 --devices 0,0 --backend vulkan -b 4K -e 64M -f 4 -n 10 -w 3)
	step types 150 "${a[@]}" -d float,int16,uint16,fp8e4m3,fp8e5m2 -o sum -J $p/types.json >$p/types.txt
	step ops 150 "${a[@]}" -d int32 -o band,bor,bxor,land,lor,lxor -J $p/ops.json >$p/ops.txt
	step premulsum 100 "${a[@]}" -d float,half -o premulsum -J $p/premulsum.json >$p/premulsum.txt
	step scan 150 "${a[@]}" --coll scan,exscan -d float,int32 -o sum -J $p/scan.json >$p/scan.txt
	(cd collective && step scan-bench 150 "../$D/collective.test" -test.run '^$' -test.bench '^BenchmarkScan$/^vulkan$/' \
		-test.benchtime 10x -test.count 3) >$p/scan-h200.txt
	tar czf "$OUT/parity.tgz" -C /tmp parity
	log "done in $((SECONDS - t0))s"
}

compare_there() {
	[ -n "${OUT:-}" ] || die "compare-run: \$OUT is not set (this mode runs inside a device tool call)"
	for f in .gl/*.deb; do dpkg -x "$f" /; done
	ldconfig
	export GOCOLL_VULKAN_VALIDATION=0
	export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
	exec > >(tee -a "$OUT/run.log") 2>&1
	local t0=$SECONDS bt=${BENCHTIME:-20x} i which dir pat f
	for which in old new; do
		mkdir -p "/tmp/devbench-cmp/$which"
		for f in "$D-cmp/$which"/*.gz; do
			gunzip -c "$f" >"/tmp/devbench-cmp/$which/$(basename "$f" .gz)"
			chmod +x "/tmp/devbench-cmp/$which/$(basename "$f" .gz)"
		done
	done
	: >"$OUT/old.txt"
	: >"$OUT/new.txt"
	for i in $(seq "${COMPARE_ROUNDS:-3}"); do
		for which in old new; do
			dir=/tmp/devbench-cmp/$which
			(cd vulkan && step "$which-vulkan-$i" 60 "$dir/vulkan.test" -test.run '^$' -test.bench "$BENCH_VULKAN" \
				-test.benchtime "$bt" -test.count 1) >>"$OUT/$which.txt"
			for pat in "$BENCH_COLL1" "$BENCH_COLL2" '^BenchmarkCollectives$/^vulkan$/' '^BenchmarkSmallHost$'; do
				local pbt=$bt # a 4 KiB host call takes microseconds: time thousands
				[ "$pat" = '^BenchmarkSmallHost$' ] && pbt=${SMALL_BENCHTIME:-2000x}
				(cd collective && step "$which-collective-$i" 150 "$dir/collective.test" -test.run '^$' -test.bench "$pat" \
					-test.benchtime "$pbt" -test.count 1) >>"$OUT/$which.txt"
			done
		done
	done
	for which in old new; do
		dir=/tmp/devbench-cmp/$which
		step "$which-allreduce-perf" 60 "$dir/allreduce-perf" -g 2 --devices 0,0 --backend vulkan -b 4K -e 256M -f 4 -n 5 -w 2 \
			-J "$OUT/sweep-$which.json" >"$OUT/sweep-$which.txt"
	done
	log "done in $((SECONDS - t0))s"
}

lavapipe() {
	[ -x "$D/gocoll-devbench" ] || prepare >/dev/null
	mkdir -p bench/out
	bench_selection bench/lavapipe.txt "${BENCHTIME:-5x}" 900
	GOCOLL_VULKAN_VALIDATION=0 "$D/gocoll-devbench" -size 64M -reduce-size 16M -ar-size 32M -lat-iters 300 -calls 500 \
		-reps 3 -warmup 1 -batch 2 -ar-iters 3 -json bench/out/lavapipe.json -md bench/out/lavapipe.md
}

case "${1:-}" in
"" | prepare)
	if [ -n "${OUT:-}" ] && [ -z "${1:-}" ]; then run_there; else prepare; fi
	;;
run) run_there ;;
parity) parity_there ;;
pack-gz) pack_gz ;;
colls) colls_there ;;
exact) exact_there ;;
compare) compare_prepare "${2:-}" "${3:-}" ;;
compare-run) compare_there ;;
lavapipe) lavapipe ;;
*) die "usage: bench/device-bench.sh [prepare|run|colls|exact|compare REV|compare-run|lavapipe]" ;;
esac
