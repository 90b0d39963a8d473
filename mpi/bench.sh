#!/usr/bin/env bash
# mpi/bench.sh: the multi-process benchmark of docs/PERFORMANCE.md ("Multi-process (MPI)").
#
#   mpi/bench.sh                                   # P = 2 and 4, 1 MiB to 64 MiB (x2), 3 repeats
#   NPROCS="2 4" MIN=1M MAX=64M ITERS=20 WARMUP=5 REPEAT=3 OUT=/tmp/mpibench mpi/bench.sh
#   STRATEGY=hierarchical mpi/bench.sh             # column A with another strategy than auto
#   mpi/bench.sh table DIR                         # the table again, from DIR/samples.txt of a run
#
# Float sum, out of place, host backend. For each P, each repeat runs one after the other:
#   A, B  mpirun -np P allreduce-perf -g 1 --mpi-baseline -a $STRATEGY: gocoll across P processes over
#         MPI (one rank per process: Auto runs native, MPI_Iallreduce on the caller's slices) and, size by size in the same processes on the same
#         buffers and data, MPI's own all-reduce as mpi.World.AllreduceF32 does it (MPI_Iallreduce,
#         tested until done);
#   C     allreduce-perf -g P: gocoll in one process with P ranks (no MPI; Auto picks by cost model);
#   D, E  mpirun -np P of a small C program on its own buffers (built with mpicc when it is there):
#         D times blocking MPI_Allreduce, E nonblocking MPI_Iallreduce then MPI_Test in a spinning
#         loop (what B does from Go, without Go): how fast MPI itself goes, outside Go.
# Every gocoll and World row is verified by allreduce-perf (#wrong must be 0), the C program checks its
# own results. The script prints the machine (host, cores, CPU), the date and the load average at the
# start and the end, then a Markdown table of the medians over the repeats of the time per call and
# the ratios A/D (gocoll across processes against MPI's own all-reduce; target: <= 1.1 x D + 30 us
# below 4 MiB, <= 1.1 x D from 4 MiB), B/E (the Go binding against the same calls from C; target
# <= 1.10) and C/D (gocoll in one process against MPI across processes; target <= 0.5); every output
# stays under $OUT.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

NPROCS=${NPROCS:-"2 4"}
MIN=${MIN:-1M}
MAX=${MAX:-64M}
ITERS=${ITERS:-20}
WARMUP=${WARMUP:-5}
REPEAT=${REPEAT:-3}
STRATEGY=${STRATEGY:-auto}

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

# The C program of columns D and E: MPI_Allreduce (D, blocking) and MPI_Iallreduce then MPI_Test in
# a spinning loop (E) of floats (sum, out of place), sizes min..max bytes doubling; prints "bytes D E"
# in microseconds per size (the slowest process's average over iters calls after warmup calls) and
# checks every result of both.
C_SOURCE='#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
static int check(const float *r, long n, int size) {
	int bad = 0;
	for (long i = 0; i < n; i++) {
		float want = 0;
		for (int p = 0; p < size; p++) want += (float)((i * 7 + p * 13) % 11 - 5);
		if (r[i] != want) bad++;
	}
	return bad;
}
static void iallreduce(const float *s, float *r, int n) {
	MPI_Request q;
	int done = 0;
	MPI_Iallreduce(s, r, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &q);
	while (!done) MPI_Test(&q, &done, MPI_STATUS_IGNORE);
}
int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	int rank, size, bad = 0;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	long minb = atol(argv[1]), maxb = atol(argv[2]);
	int iters = atoi(argv[3]), warmup = atoi(argv[4]);
	float *s = malloc(maxb), *r = malloc(maxb);
	for (long i = 0; i < maxb / 4; i++) s[i] = (float)((i * 7 + rank * 13) % 11 - 5);
	for (long b = minb; b <= maxb; b *= 2) {
		int n = (int)(b / 4);
		double t[2], tmax[2];
		for (int mode = 0; mode < 2; mode++) {
			for (int k = 0; k < warmup; k++) {
				if (mode == 0) MPI_Allreduce(s, r, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
				else iallreduce(s, r, n);
			}
			MPI_Barrier(MPI_COMM_WORLD);
			double t0 = MPI_Wtime();
			for (int k = 0; k < iters; k++) {
				if (mode == 0) MPI_Allreduce(s, r, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
				else iallreduce(s, r, n);
			}
			t[mode] = (MPI_Wtime() - t0) / iters;
			bad += check(r, n, size);
		}
		MPI_Reduce(t, tmax, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
		if (rank == 0) printf("%ld %.1f %.1f\n", b, tmax[0] * 1e6, tmax[1] * 1e6);
	}
	int allbad = 0;
	MPI_Reduce(&bad, &allbad, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rank == 0 && allbad) printf("wrong %d\n", allbad);
	MPI_Finalize();
	return allbad != 0;
}'

# run_all builds the programs, runs every repeat and writes "P bytes label microseconds" lines to
# $OUT/samples.txt (A, B: gocoll and MPI_Iallreduce across processes; C: gocoll in one process; D, E:
# blocking and nonblocking MPI from C).
run_all() {
	command -v mpirun >/dev/null || die "mpirun not found (Debian: apt-get install openmpi-bin libopenmpi-dev)"
	local mpirun=(mpirun)
	if mpirun --version 2>&1 | grep -q 'Open MPI'; then
		# Root in containers, more processes than cores on small machines.
		mpirun+=(--oversubscribe --allow-run-as-root)
	fi
	echo "== building allreduce-perf (-tags mpi) into $OUT" >&2
	go build -tags mpi -o "$OUT/allreduce-perf" ./cmd/allreduce-perf
	local have_c=0
	if command -v mpicc >/dev/null; then
		printf '%s\n' "$C_SOURCE" >"$OUT/mpi_allreduce.c"
		mpicc -O2 -o "$OUT/mpi_allreduce" "$OUT/mpi_allreduce.c" && have_c=1
	fi
	local common=(--backend host -d float -o sum -b "$MIN" -e "$MAX" -f 2 -n "$ITERS" -w "$WARMUP")
	echo "== machine: $(machine)" | tee "$OUT/run.log" >&2
	echo "== start $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load average $(load)" | tee -a "$OUT/run.log" >&2
	: >"$OUT/samples.txt"
	local rep P f g c
	for rep in $(seq 1 "$REPEAT"); do
		for P in $NPROCS; do
			f=$OUT/mpi-np$P-r$rep.txt
			echo "== repeat $rep, P=$P: mpirun -np $P allreduce-perf -g 1 --mpi-baseline -a $STRATEGY ${common[*]}" | tee -a "$OUT/run.log" >&2
			"${mpirun[@]}" -np "$P" "$OUT/allreduce-perf" -g 1 --mpi-baseline -a "$STRATEGY" "${common[@]}" >"$f"
			g=$OUT/inproc-g$P-r$rep.txt
			echo "== repeat $rep, P=$P: allreduce-perf -g $P ${common[*]}" | tee -a "$OUT/run.log" >&2
			"$OUT/allreduce-perf" -g "$P" "${common[@]}" >"$g"
			c=$OUT/c-np$P-r$rep.txt
			: >"$c"
			if [ $have_c = 1 ]; then
				echo "== repeat $rep, P=$P: mpirun -np $P mpi_allreduce (C: MPI_Allreduce, MPI_Iallreduce + MPI_Test)" | tee -a "$OUT/run.log" >&2
				"${mpirun[@]}" -np "$P" "$OUT/mpi_allreduce" "$(bytes "$MIN")" "$(bytes "$MAX")" "$ITERS" "$WARMUP" >"$c"
				! grep -q wrong "$c" || die "the C MPI_Allreduce gave wrong values: $c"
			fi
			# Rows: size (field 1), time out of place (6), #wrong (9, 13), MPI time (14), MPI #wrong (17).
			awk -v P="$P" -v f="$f" '!/^#/ && NF == 17 {
				if ($9 != 0 || $13 != 0 || $17 != 0) { print "wrong values in " f > "/dev/stderr"; exit 1 }
				print P, $1, "A", $6; print P, $1, "B", $14 }' "$f" >>"$OUT/samples.txt"
			awk -v P="$P" -v f="$g" '!/^#/ && NF == 13 {
				if ($9 != 0 || $13 != 0) { print "wrong values in " f > "/dev/stderr"; exit 1 }
				print P, $1, "C", $6 }' "$g" >>"$OUT/samples.txt"
			awk -v P="$P" 'NF == 3 { print P, $1, "D", $2; print P, $1, "E", $3 }' "$c" >>"$OUT/samples.txt"
		done
	done
	echo "== end $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load average $(load)" | tee -a "$OUT/run.log" >&2
}

# table prints the run's machine, dates and loads (from run.log) and the medians over the repeats of
# $OUT/samples.txt as Markdown (and keeps it in table.md).
table() {
	{
		grep -E '^== (machine|start|end)' "$OUT/run.log" 2>/dev/null | sed 's/^== /- /' || true
		echo
		sort -k1,1n -k2,2n -k3,3 -k4,4g "$OUT/samples.txt" | awk '
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
		key = $1 SUBSEP $2 SUBSEP $3
		v[key, ++cnt[key]] = $4
		if (!seen[$1 SUBSEP $2]++) rows[++nrows] = $1 SUBSEP $2
	}
	END {
		print "| P | size | A: gocoll, P processes over MPI (us) | B: World.AllreduceF32 (us) | C: gocoll, 1 process, P ranks (us) | D: MPI_Allreduce, C (us) | E: MPI_Iallreduce + MPI_Test, C (us) | A/D | A meets 1.1 x D (+30 us < 4 MiB) | B/E (target <= 1.10) | C/D (target <= 0.5) |"
		print "|---|---|---|---|---|---|---|---|---|---|---|"
		for (i = 1; i <= nrows; i++) {
			split(rows[i], k, SUBSEP)
			a = med(k[1] SUBSEP k[2] SUBSEP "A"); b = med(k[1] SUBSEP k[2] SUBSEP "B")
			c = med(k[1] SUBSEP k[2] SUBSEP "C"); d = med(k[1] SUBSEP k[2] SUBSEP "D")
			e = med(k[1] SUBSEP k[2] SUBSEP "E")
			printf "| %d | %g MiB | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", k[1], k[2] / 1048576, us(a), us(b), us(c), us(d), us(e), ratio(a, d), meets(a, d, k[2]), ratio(b, e), ratio(c, d)
		}
	}'
	} | tee "$OUT/table.md"
}

if [ "${1:-}" = table ]; then
	[ -f "${2:-}/samples.txt" ] || die "usage: mpi/bench.sh table DIR (DIR/samples.txt from an earlier run)"
	OUT=$2
else
	OUT=${OUT:-$(mktemp -d /tmp/gocoll-mpibench.XXXXXX)}
	mkdir -p "$OUT"
	run_all
	echo "== outputs in $OUT" >&2
fi
table
