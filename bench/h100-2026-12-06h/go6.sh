#!/bin/bash
# Device call 2: waiters drive MPI (the thread stands back), each process's workers its share of the node.
O=$OUT/r; mkdir -p $O
uptime > $O/uptime.txt
B="env KIT=.mpikit"
$B GOCOLL_MPI_STATS=1 MPIRUN_ARGS="-x GOCOLL_MPI_STATS" MIN=1M MAX=64M STEP=4 ITERS=10 WARMUP=3 NPROCS="2 4 8" COLLS="allreduce allgather reducescatter" REPEAT=2 OUT=$O/main timeout 250 bash mpi/bench.sh > $O/main.txt 2>&1
uptime >> $O/uptime.txt; cp $O/main/table.md $OUT/main-table.md 2>/dev/null
env KIT=.mpikit2 GOCOLL_MPI_STATS=1 MPIRUN_ARGS="-x GOCOLL_MPI_STATS" MIN=1M MAX=64M STEP=4 ITERS=10 WARMUP=3 NPROCS="2" COLLS="allgather" REPEAT=2 OUT=$O/pieces timeout 60 bash mpi/bench.sh > $O/pieces.txt 2>&1
$B MIN=4K MAX=256K STEP=4 ITERS=100 WARMUP=10 NPROCS="2 4 8" COLLS="allgather allreduce" REPEAT=1 OUT=$O/small timeout 50 bash mpi/bench.sh > $O/small.txt 2>&1
$B GOCOLL_MPI_STATS=1 MPIRUN_ARGS="-x GOCOLL_MPI_STATS --bind-to core" MIN=1M MAX=4M STEP=4 ITERS=10 WARMUP=3 NPROCS="4 8" COLLS="allreduce allgather" REPEAT=1 OUT=$O/core timeout 60 bash mpi/bench.sh > $O/core.txt 2>&1
uptime >> $O/uptime.txt
cd $OUT && tar czf r.tgz r && rm -rf r
