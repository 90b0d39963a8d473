#!/bin/bash
# The direct all-reduce's claimed pieces (new, at most half the pieces' count of claiming loops) against
# one piece per process (old: binaries of b7f5ccd), alternating, 2 repeats; then the main bench's
# all-reduce (3 repeats) with the new binaries.
O=$OUT/r; mkdir -p $O
D=${D:-300}
uptime > $O/uptime-start.txt
export PMIX_MCA_preg=native
command -v mpirun >/dev/null || { for d in .mpikit/debs/*.deb; do dpkg -x "$d" /; done; ldconfig; }
M="mpirun --oversubscribe --allow-run-as-root -x GOCOLL_MPI_STATS=1"
for v in "" -old; do gunzip -c .mpikit/allreduce-perf$v.gz > .mpikit/arp$v && chmod +x .mpikit/arp$v; done
sw() { # file cmd...: the 1-4 MiB pass (80 calls) and the 16-64 MiB pass (10 calls)
	local f=$1; shift
	{ timeout 40 "$@" -b 1M -e 4M -n 80; timeout 40 "$@" -b 16M -e 64M -n 10; } > $f 2>&1
}
mkdir -p $O/cmp
for rep in 1 2; do
	for v in "" -old; do
		A=".mpikit/arp$v -a auto --backend host -d float -o sum -f 4 -w 3"
		for P in 4 8; do
			sw $O/cmp/ar-G$P$v-r$rep.txt $M -np $P --map-by slot:PE=$((16 / P)) --bind-to core $A -g 1 --coll allreduce
		done
	done
done
echo "cmp done at $SECONDS s" >> $O/seconds.txt
rm -f .mpikit/arp .mpikit/arp-old
KIT=.mpikit GOCOLL_MPI_STATS=1 MPIRUN_ARGS="-x GOCOLL_MPI_STATS" NPROCS="2 4 8" COLLS="allreduce" \
	MIN=1M MAX=64M STEP=4 ITERS=10 WARMUP=3 REPEAT=3 OUT=$O/main timeout $((D - SECONDS - 5)) bash mpi/bench.sh > $O/main.txt 2>&1
echo "main done at $SECONDS s" >> $O/seconds.txt
uptime > $O/uptime-end.txt
rm -f .mpikit/allreduce-perf
cd $OUT && tar czf r.tgz r && rm -rf r
