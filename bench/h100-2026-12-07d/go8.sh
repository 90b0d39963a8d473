#!/bin/bash
# The main bench at the tip (shared inputs, 3 repeats), then B against E alternating at P = 4 and 8.
O=$OUT/r; mkdir -p $O
D=${D:-540}
uptime > $O/uptime-start.txt
KIT=.mpikit GOCOLL_MPI_STATS=1 MPIRUN_ARGS="-x GOCOLL_MPI_STATS" NPROCS="2 4 8" COLLS="allreduce allgather reducescatter" \
	MIN=1M MAX=64M STEP=4 ITERS=10 WARMUP=3 REPEAT=3 OUT=$O/main timeout $((D - 60)) bash mpi/bench.sh > $O/main.txt 2>&1
echo "main done at $SECONDS s" >> $O/seconds.txt
uptime > $O/uptime-main.txt
export PMIX_MCA_preg=native
M="mpirun --oversubscribe --allow-run-as-root"
gunzip -c .mpikit/allreduce-perf.gz > .mpikit/allreduce-perf && chmod +x .mpikit/allreduce-perf
mkdir -p $O/be
for rep in 1 2 3 4; do
	for P in 4 8; do
		[ $SECONDS -lt $((D - 12)) ] || break 2
		timeout 20 $M -np $P .mpikit/allreduce-perf -g 1 --mpi-baseline -a auto --backend host -d float -o sum -b 1M -e 4M -f 4 -n 20 -w 3 --coll allreduce > $O/be/b-np$P-r$rep.txt 2>&1
		timeout 20 $M -np $P .mpikit/mpi_coll allreduce 1048576 4194304 4 20 3 > $O/be/e-np$P-r$rep.txt 2>&1
	done
done
echo "be done at $SECONDS s" >> $O/seconds.txt
uptime > $O/uptime-end.txt
rm -f .mpikit/allreduce-perf
cd $OUT && tar czf r.tgz r && rm -rf r
