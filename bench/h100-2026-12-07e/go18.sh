#!/bin/bash
# The main bench (inputs and results in mpi.AllocShared memory, 3 repeats).
O=$OUT/r; mkdir -p $O
D=${D:-560}
uptime > $O/uptime-start.txt
KIT=.mpikit GOCOLL_MPI_STATS=1 MPIRUN_ARGS="-x GOCOLL_MPI_STATS" NPROCS="2 4 8" COLLS="allreduce allgather reducescatter" \
	MIN=1M MAX=64M STEP=4 ITERS=10 WARMUP=3 REPEAT=3 OUT=$O/main timeout $((D - 10)) bash mpi/bench.sh > $O/main.txt 2>&1
echo "main done at $SECONDS s" >> $O/seconds.txt
uptime > $O/uptime-end.txt
rm -f .mpikit/allreduce-perf
cd $OUT && tar czf r.tgz r && rm -rf r
