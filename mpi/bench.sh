#!/usr/bin/env bash
# mpi/bench.sh: the multi-process benchmark of docs/PERFORMANCE.md ("Multi-process (MPI)").
#
#   mpi/bench.sh                                   # P = 2 and 4, 1 MiB to 64 MiB (x2), 3 repeats, all-reduce
#   NPROCS="2 4 8" COLLS="allreduce allgather reducescatter" MIN=1M MAX=64M STEP=4 ITERS=20 WARMUP=5 \
#     REPEAT=3 OUT=/tmp/mpibench mpi/bench.sh
#   STRATEGY=hierarchical mpi/bench.sh             # column A with another strategy than auto
#   SMALL_BELOW=16M SMALL_ITERS=160 mpi/bench.sh   # sizes below SMALL_BELOW time SMALL_ITERS calls (default
#                                                  # 16M and ITERS x 8), the others ITERS
#   mpi/bench.sh kit DIR                           # build the binaries into DIR and fetch Open MPI's runtime
#                                                  # debs into DIR/debs, for a machine with no Go, mpicc or MPI
#   MPIRUN_ARGS="--bind-to none" mpi/bench.sh      # more mpirun options for every run (gocoll's and C's)
#   PERF_ARGS=--go-heap mpi/bench.sh               # A, G, F with buffers on the Go heap (default: mpi.AllocShared)
#   MPI_COLL_THREAD=multiple MPIRUN_ARGS="-x MPI_COLL_THREAD" mpi/bench.sh   # D and E under MPI_THREAD_MULTIPLE
#                                                  # (gocoll's level) instead of MPI_Init's
#   KIT=DIR mpi/bench.sh                           # there: run DIR's binaries (unpacking DIR/debs when
#                                                  # mpirun is missing; needs root)
#   mpi/bench.sh table DIR                         # the table again, from DIR/samples.txt of a run
#
# Float sum, out of place, host backend. For each collective (COLLS: allreduce, allgather, reducescatter;
# sizes are nccl-tests': the whole buffer, so a rank's block is size/P), each P and each repeat, one
# after the other:
#   A, B  mpirun -np P allreduce-perf -g 1 [--mpi-baseline] -a $STRATEGY: gocoll across P processes over
#         MPI (one rank per process: Auto runs native, MPI's nonblocking collective on the caller's
#         slices) and, for all-reduce, size by size in the same processes on the same data (on Go heap
#         copies where A's buffers are mpi.AllocShared memory: process memory, as E's), MPI's own
#         all-reduce as mpi.World.AllreduceF32 does it (MPI_Iallreduce, tested until done; WARMUP calls at
#         each size before the timed ones, as D and E have), then (H) E's loop from C in those same
#         processes on the same buffers (every call in one call into C): B's peer with the placement,
#         thread level and memory of B;
#   C     allreduce-perf -g P: gocoll in one process with P ranks (no MPI; Auto picks by cost model);
#   D, E  mpirun -np P of a small C program on its own buffers (built with mpicc): D times the blocking
#         MPI call (MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block), E the nonblocking one then
#         MPI_Test in a spinning loop (what B does from Go, without Go): how fast MPI itself goes;
#   F     (P >= 4, even) mpirun -np 2 allreduce-perf -g P/2: the same P ranks as 2 processes of P/2 ranks
#         (in-process combining, then MPI among the 2 leaders), each process bound to P/2 cores (Open MPI:
#         --map-by slot:PE=P/2; its default binds each of 2 processes to one core), the P cores D has.
#   G     mpirun -np P allreduce-perf -g 1, each process bound to cores/P of the machine's cores (Open MPI:
#         --map-by slot:PE=cores/P): A with the cores C has (A itself runs where mpirun puts it: Open MPI
#         binds each of 2 processes to one core, more processes to a socket).
# Every gocoll and World row is verified by allreduce-perf (#wrong must be 0), the C program checks its
# own results. The script prints the machine (host, cores, CPU), the date and the load average at the
# start and the end, then per collective a Markdown table of the medians over the repeats of the time
# per call and the ratios A/D (target: <= 1.1 x D + 30 us below 4 MiB, <= 1.1 x D from 4 MiB), B/E (the
# Go binding against the same calls from C; target <= 1.10), B/H (the same, in the same processes),
# C/D (target <= 0.5), F/D (target <= 1) and
# G/C (processes sharing the node's memory against one process: target <= 2 from 16 MiB);
# every output stays under $OUT.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

NPROCS=${NPROCS:-"2 4"}
COLLS=${COLLS:-allreduce}
MIN=${MIN:-1M}
MAX=${MAX:-64M}
STEP=${STEP:-2}
ITERS=${ITERS:-20}
WARMUP=${WARMUP:-5}
SMALL_BELOW=${SMALL_BELOW:-16M}            # sizes below it run SMALL_ITERS timed calls instead of ITERS
SMALL_ITERS=${SMALL_ITERS:-$((ITERS * 8))} # (a call of 1-4 MiB takes 0.1-3 ms: more calls, less noise)
REPEAT=${REPEAT:-3}
STRATEGY=${STRATEGY:-auto}
KIT=${KIT:-}
MPIRUN_ARGS=${MPIRUN_ARGS:-} # more mpirun options for every run (e.g. --bind-to none), words split on spaces
PERF_ARGS=${PERF_ARGS:-}     # more allreduce-perf options for its runs across processes (A, G, F), e.g. --go-heap
# Open MPI 4.1's runtime on Debian 12 (what `kit` fetches for a machine that has no MPI).
MPI_DEBS=(openmpi-bin openmpi-common libopenmpi3 libpmix2 libevent-core-2.1-7 libevent-pthreads-2.1-7 libfabric1
	libhwloc15 libibverbs1 ibverbs-providers libmunge2 libnl-3-200 libnl-route-3-200 libnuma1 libpsm-infinipath1
	libpsm2-2 librdmacm1 libucx0)

die() {
	printf 'mpi/bench.sh: %s\n' "$*" >&2
	exit 1
}

bytes() { # 1M -> 1048576
	local v=$1 m=1
	case $v in
	*[kK]) m=1024 v=${v%?} ;;
	*[mM]) m=$((1 << 20)) v=${v%?} ;;
	*[gG]) m=$((1 << 30)) v=${v%?} ;;
	esac
	echo $((v * m))
}

load() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?"; }

machine() { # host, cores, CPU model
	local cpu
	cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
	echo "$(hostname 2>/dev/null || echo '?'), $(nproc 2>/dev/null || echo '?') cores, ${cpu:-?}, $(free -g 2>/dev/null | awk '/^Mem:/ { print $2 " GiB" }')"
}

# The C program of columns D and E: argv coll min max step iters warmup. For coll allreduce,
# allgather or reducescatter it times the blocking MPI call (D) and the nonblocking one then MPI_Test
# in a spinning loop (E) on floats (sum, out of place), sizes min..max bytes (the whole buffer, as
# nccl-tests counts it) times step; prints "bytes D E" in microseconds per size (the slowest
# process's average over iters calls after warmup calls) and checks every result of both.
C_SOURCE='#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
enum { ALLREDUCE, ALLGATHER, REDUCESCATTER };
static int coll, rank, size;
static float val(long i, int p) { return (float)((i * 7 + p * 13) % 11 - 5); }
static int check(const float *r, long n) { /* n: recv elements */
	int bad = 0;
	for (long i = 0; i < n; i++) {
		float want = 0;
		if (coll == ALLGATHER) want = val(i % (n / size), (int)(i / (n / size)));
		else {
			long g = coll == REDUCESCATTER ? (long)rank * n + i : i;
			for (int p = 0; p < size; p++) want += val(g, p);
		}
		if (r[i] != want) bad++;
	}
	return bad;
}
static void call(int mode, const float *s, float *r, int n) { /* n: the whole buffer in elements */
	MPI_Request q;
	int done = 0;
	switch (coll) {
	case ALLREDUCE:
		if (mode == 0) { MPI_Allreduce(s, r, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); return; }
		MPI_Iallreduce(s, r, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &q);
		break;
	case ALLGATHER:
		if (mode == 0) { MPI_Allgather(s, n / size, MPI_FLOAT, r, n / size, MPI_FLOAT, MPI_COMM_WORLD); return; }
		MPI_Iallgather(s, n / size, MPI_FLOAT, r, n / size, MPI_FLOAT, MPI_COMM_WORLD, &q);
		break;
	default:
		if (mode == 0) { MPI_Reduce_scatter_block(s, r, n / size, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); return; }
		MPI_Ireduce_scatter_block(s, r, n / size, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &q);
	}
	while (!done) MPI_Test(&q, &done, MPI_STATUS_IGNORE);
}
int main(int argc, char **argv) {
	/* MPI_COLL_THREAD=multiple: MPI_THREAD_MULTIPLE, as gocoll asks for (the cost of MPI'"'"'s locks) */
	const char *tl = getenv("MPI_COLL_THREAD");
	int provided;
	if (tl && strcmp(tl, "multiple") == 0) MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
	else MPI_Init(&argc, &argv);
	int bad = 0;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	coll = strcmp(argv[1], "allgather") == 0 ? ALLGATHER : strcmp(argv[1], "reducescatter") == 0 ? REDUCESCATTER : ALLREDUCE;
	long minb = atol(argv[2]), maxb = atol(argv[3]), step = atol(argv[4]);
	int iters = atoi(argv[5]), warmup = atoi(argv[6]);
	float *s = malloc(maxb), *r = malloc(maxb);
	for (long i = 0; i < maxb / 4; i++) s[i] = val(i, rank);
	for (long b = minb; b <= maxb; b *= step) {
		int n = (int)(b / 4 / size / 4 * 4 * size); /* whole 16-byte groups per block, as allreduce-perf */
		if (coll == ALLREDUCE) n = (int)(b / 4);
		double t[2], tmax[2];
		for (int mode = 0; mode < 2; mode++) {
			memset(r, 0, maxb);
			for (int k = 0; k < warmup; k++) call(mode, s, r, n);
			MPI_Barrier(MPI_COMM_WORLD);
			double t0 = MPI_Wtime();
			for (int k = 0; k < iters; k++) call(mode, s, r, n);
			t[mode] = (MPI_Wtime() - t0) / iters;
			bad += check(r, coll == REDUCESCATTER ? n / size : n);
		}
		MPI_Reduce(t, tmax, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
		if (rank == 0) printf("%ld %.1f %.1f\n", (long)n * 4, tmax[0] * 1e6, tmax[1] * 1e6);
	}
	int allbad = 0;
	MPI_Reduce(&bad, &allbad, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0 && allbad) printf("wrong %d\n", allbad);
	MPI_Finalize();
	return allbad != 0;
}'

# build puts allreduce-perf (-tags mpi) and the C program (when mpicc is there) into $1.
build() {
	echo "== building allreduce-perf (-tags mpi) into $1" >&2
	go build -tags mpi -o "$1/allreduce-perf" ./cmd/allreduce-perf
	if command -v mpicc >/dev/null; then
		printf '%s\n' "$C_SOURCE" >"$1/mpi_coll.c"
		mpicc -O2 -Wall -o "$1/mpi_coll" "$1/mpi_coll.c"
	fi
}

# kit builds into $1 and fetches the Open MPI runtime debs into $1/debs.
kit() {
	mkdir -p "$1/debs"
	build "$1"
	command -v mpicc >/dev/null || die "kit: mpicc is missing (./build.sh deps installs Open MPI)"
	(cd "$1/debs" && apt-get download "${MPI_DEBS[@]}" >/dev/null 2>&1) || die "kit: apt-get download of Open MPI's debs failed"
	gzip -f "$1/allreduce-perf" # the carry is smaller; run_all unpacks it
	echo "== kit in $1 ($(du -sh "$1" | cut -f1)): carry it and run KIT=$1 mpi/bench.sh there" >&2
}

# unpack installs $KIT/debs' Open MPI where mpirun is missing (the device host has no MPI).
unpack() {
	local d
	command -v mpirun >/dev/null && return 0
	[ -d "$KIT/debs" ] || die "mpirun not found and $KIT/debs is missing (mpi/bench.sh kit DIR fetches them)"
	for d in "$KIT"/debs/*.deb; do dpkg -x "$d" / || die "dpkg -x $d failed"; done
	ldconfig
	export PMIX_MCA_preg=native # mpirun segfaults in PMIx's preg otherwise (Ubuntu 24.04 host, Debian 12 debs)
}

# samples COLL P LABEL FILE: allreduce-perf rows of FILE as "COLL P bytes LABEL us" (out of place; every
# #wrong column must be 0); with --mpi-baseline rows (19 fields; 17 before the loop in C) also label B
# from the MPI columns and H from the loop in C.
samples() {
	awk -v coll="$1" -v P="$2" -v L="$3" -v f="$4" '!/^#/ && (NF == 13 || NF == 17 || NF == 19) {
		if ($9 != 0 || $13 != 0 || (NF >= 17 && $17 != 0) || (NF == 19 && $19 != 0)) { print "wrong values in " f > "/dev/stderr"; exit 1 }
		print coll, P, $1, L, $6
		if (NF >= 17) print coll, P, $1, "B", $14
		if (NF == 19) print coll, P, $1, "H", $18 }' "$4"
}

# passes prints the sweeps of a run, one per line as "first-bytes last-bytes iterations": the sizes MIN,
# MIN*STEP, ... up to MAX, those below SMALL_BELOW with SMALL_ITERS timed calls, the others with ITERS.
passes() {
	local lo hi small b small_hi=0 big_lo=0
	lo=$(bytes "$MIN") hi=$(bytes "$MAX") small=$(bytes "$SMALL_BELOW")
	[ "$STEP" -ge 2 ] || die "STEP must be an integer of 2 or more"
	for ((b = lo; b <= hi; b *= STEP)); do
		if [ "$b" -lt "$small" ]; then
			small_hi=$b
		elif [ "$big_lo" = 0 ]; then
			big_lo=$b
		fi
	done
	if [ "$small_hi" -gt 0 ]; then echo "$lo $small_hi $SMALL_ITERS"; fi
	if [ "$big_lo" -gt 0 ]; then echo "$big_lo $hi $ITERS"; fi
}

# sweep FILE CMD...: runs CMD (an allreduce-perf command line without -b, -e and -n) once per pass, all
# its output into FILE.
sweep() {
	local f=$1 lo hi n
	shift
	: >"$f"
	while read -r lo hi n; do
		"$@" -b "$lo" -e "$hi" -n "$n" >>"$f" </dev/null # mpirun reads stdin
	done < <(passes)
}

# cores_each N prints the mpirun options that give each process N cores: Open MPI binds each of 2 processes
# to one core by default, which would run F's P/2 ranks (and their worker pool) on one core where the P
# processes of D have P. With N below 1, fewer than 2N cores on the machine, or another MPI, it binds
# nothing.
cores_each() {
	if mpirun --version 2>&1 | grep -q 'Open MPI' && [ "$1" -ge 1 ] && [ "$(nproc)" -ge $((2 * $1)) ]; then
		echo "--map-by slot:PE=$1 --bind-to core"
	else
		echo "--bind-to none"
	fi
}

# run_all runs every repeat and writes the samples to $OUT/samples.txt.
run_all() {
	local bin=$OUT
	if [ -n "$KIT" ]; then
		bin=$KIT
		unpack
		if [ ! -x "$bin/allreduce-perf" ] && [ -f "$bin/allreduce-perf.gz" ]; then
			gunzip -c "$bin/allreduce-perf.gz" >"$bin/allreduce-perf" && chmod +x "$bin/allreduce-perf"
		fi
	else
		command -v mpirun >/dev/null || die "mpirun not found (Debian: apt-get install openmpi-bin libopenmpi-dev)"
		build "$OUT"
	fi
	local mpirun=(mpirun)
	if mpirun --version 2>&1 | grep -q 'Open MPI'; then
		# Root in containers, more processes than cores on small machines.
		mpirun+=(--oversubscribe --allow-run-as-root)
	fi
	# shellcheck disable=SC2206 # MPIRUN_ARGS is a list of words
	mpirun+=($MPIRUN_ARGS)
	local perf
	# shellcheck disable=SC2206 # PERF_ARGS is a list of words
	perf=($PERF_ARGS)
	local have_c=0
	[ -x "$bin/mpi_coll" ] && have_c=1
	echo "== machine: $(machine)" | tee "$OUT/run.log" >&2
	echo "== start $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load average $(load)" | tee -a "$OUT/run.log" >&2
	echo "== mpirun: ${mpirun[*]}; GOCOLL_MPI_PROGRESS=${GOCOLL_MPI_PROGRESS:-auto}; allreduce-perf across processes: ${perf[*]:-(default buffers: mpi.AllocShared)}" | tee -a "$OUT/run.log" >&2
	echo "== timed calls: $ITERS per size from $SMALL_BELOW, $SMALL_ITERS below; $WARMUP warm-up" | tee -a "$OUT/run.log" >&2
	: >"$OUT/samples.txt"
	local rep P coll f base common lo hi n
	for rep in $(seq 1 "$REPEAT"); do
		for coll in $COLLS; do
			common=(--backend host --coll "$coll" -d float -o sum -f "$STEP" -w "$WARMUP")
			base=()
			[ "$coll" = allreduce ] && base=(--mpi-baseline)
			for P in $NPROCS; do
				f=$OUT/$coll-np$P-r$rep.txt
				echo "== repeat $rep, $coll, P=$P: mpirun -np $P allreduce-perf -g 1 ${base[*]} -a $STRATEGY ${common[*]}" | tee -a "$OUT/run.log" >&2
				sweep "$f" "${mpirun[@]}" -np "$P" "$bin/allreduce-perf" -g 1 "${base[@]}" -a "$STRATEGY" "${perf[@]}" "${common[@]}"
				samples "$coll" "$P" A "$f" >>"$OUT/samples.txt"
				f=$OUT/$coll-np${P}all-r$rep.txt
				echo "== repeat $rep, $coll, P=$P: mpirun -np $P $(cores_each $(($(nproc) / P))) allreduce-perf -g 1 -a $STRATEGY ${common[*]}" | tee -a "$OUT/run.log" >&2
				sweep "$f" "${mpirun[@]}" -np "$P" $(cores_each $(($(nproc) / P))) "$bin/allreduce-perf" -g 1 -a "$STRATEGY" "${perf[@]}" "${common[@]}"
				samples "$coll" "$P" G "$f" >>"$OUT/samples.txt"
				f=$OUT/$coll-g$P-r$rep.txt
				echo "== repeat $rep, $coll, P=$P: allreduce-perf -g $P ${common[*]}" | tee -a "$OUT/run.log" >&2
				sweep "$f" "$bin/allreduce-perf" -g "$P" "${common[@]}"
				samples "$coll" "$P" C "$f" >>"$OUT/samples.txt"
				if [ "$P" -ge 4 ] && [ $((P % 2)) = 0 ]; then
					f=$OUT/$coll-np2g$((P / 2))-r$rep.txt
					echo "== repeat $rep, $coll, P=$P: mpirun -np 2 $(cores_each $((P / 2))) allreduce-perf -g $((P / 2)) -a $STRATEGY ${common[*]}" | tee -a "$OUT/run.log" >&2
					sweep "$f" "${mpirun[@]}" -np 2 $(cores_each $((P / 2))) "$bin/allreduce-perf" -g $((P / 2)) -a "$STRATEGY" "${perf[@]}" "${common[@]}"
					samples "$coll" "$P" F "$f" >>"$OUT/samples.txt"
				fi
				if [ $have_c = 1 ]; then
					f=$OUT/$coll-c-np$P-r$rep.txt
					echo "== repeat $rep, $coll, P=$P: mpirun -np $P mpi_coll $coll (C: blocking, nonblocking + MPI_Test)" | tee -a "$OUT/run.log" >&2
					: >"$f"
					while read -r lo hi n; do
						"${mpirun[@]}" -np "$P" "$bin/mpi_coll" "$coll" "$lo" "$hi" "$STEP" "$n" "$WARMUP" >>"$f" </dev/null
					done < <(passes)
					! grep -q wrong "$f" || die "the C program gave wrong values: $f"
					awk -v coll="$coll" -v P="$P" 'NF == 3 { print coll, P, $1, "D", $2; print coll, P, $1, "E", $3 }' "$f" >>"$OUT/samples.txt"
				fi
			done
		done
	done
	echo "== end $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load average $(load)" | tee -a "$OUT/run.log" >&2
}

# table prints the run's machine, dates and loads (from run.log) and, per collective, the medians over
# the repeats of $OUT/samples.txt as Markdown (and keeps it in table.md). Samples of four fields (runs
# before collectives were added) are all-reduce's.
table() {
	{
		grep -E '^== (machine|start|mpirun|timed|end)' "$OUT/run.log" 2>/dev/null | sed 's/^== /- /' || true
		awk 'NF == 4 { print "allreduce", $0; next } { print }' "$OUT/samples.txt" |
			sort -k1,1 -k2,2n -k3,3n -k4,4 -k5,5g | awk '
	function med(key,   n) {
		n = cnt[key]
		if (n == 0) return ""
		return (n % 2) ? v[key, (n + 1) / 2] : (v[key, n / 2] + v[key, n / 2 + 1]) / 2
	}
	function ratio(x, y) { return (x != "" && y != "" && y > 0) ? sprintf("%.2f", x / y) : "-" }
	function us(x) { return x == "" ? "-" : sprintf("%.0f", x) }
	# meets: whether A is within its target against D (1.1 x D + 30 us below 4 MiB, 1.1 x D from 4 MiB).
	function meets(a, d, bytes) {
		if (a == "" || d == "") return "-"
		return (a <= 1.1 * d + (bytes < 4194304 ? 30 : 0)) ? "yes" : "no"
	}
	{
		key = $1 SUBSEP $2 SUBSEP $3 SUBSEP $4
		v[key, ++cnt[key]] = $5
		if (!seen[$1 SUBSEP $2 SUBSEP $3]++) rows[++nrows] = $1 SUBSEP $2 SUBSEP $3
	}
	END {
		for (i = 1; i <= nrows; i++) {
			split(rows[i], k, SUBSEP)
			if (k[1] != last) {
				last = k[1]
				printf "\n%s\n\n", k[1]
				print "| P | size | A: gocoll, P processes over MPI (us) | B: World.AllreduceF32 (us) | C: gocoll, 1 process, P ranks (us) | D: MPI blocking, C (us) | E: MPI nonblocking + MPI_Test, C (us) | F: gocoll, 2 processes x P/2 ranks (us) | G: A, the cores split among the processes (us) | H: E, in the processes of B (us) | A/D | A meets 1.1 x D (+30 us < 4 MiB) | B/E (target <= 1.10) | B/H (the same processes) | C/D (target <= 0.5) | F/D (target <= 1) | G/C (target <= 2 from 16 MiB) |"
				print "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
			}
			p = k[1] SUBSEP k[2] SUBSEP k[3] SUBSEP
			a = med(p "A"); b = med(p "B"); c = med(p "C"); d = med(p "D"); e = med(p "E"); f = med(p "F"); g = med(p "G"); h = med(p "H")
			printf "| %d | %g MiB | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", k[2], k[3] / 1048576, us(a), us(b), us(c), us(d), us(e), us(f), us(g), us(h), ratio(a, d), meets(a, d, k[3]), ratio(b, e), ratio(b, h), ratio(c, d), ratio(f, d), ratio(g, c)
		}
	}'
	} | tee "$OUT/table.md"
}

case "${1:-}" in
table)
	[ -f "${2:-}/samples.txt" ] || die "usage: mpi/bench.sh table DIR (DIR/samples.txt from an earlier run)"
	OUT=$2
	;;
kit)
	[ -n "${2:-}" ] || die "usage: mpi/bench.sh kit DIR"
	kit "$2"
	exit 0
	;;
*)
	OUT=${OUT:-$(mktemp -d /tmp/gocoll-mpibench.XXXXXX)}
	mkdir -p "$OUT"
	run_all
	echo "== outputs in $OUT" >&2
	;;
esac
table
