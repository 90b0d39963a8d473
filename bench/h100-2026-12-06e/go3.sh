#!/bin/bash
# A shorter second call: the full table with F bound to P/2 cores a process (2 repeats); all-gather across
# processes through MPI's own collective (GOCOLL_MPI_SHM=0) for A; all-reduce with the progress thread
# yielding instead of spinning (GOCOLL_MPI_PROGRESS=yield) for B.
O=$OUT/r; mkdir -p $O
uptime > $O/uptime.txt
env KIT=.mpikit MIN=1M MAX=64M STEP=4 ITERS=10 WARMUP=3 NPROCS="2 4 8" COLLS="allreduce allgather reducescatter" REPEAT=2 OUT=$O/main timeout 220 bash mpi/bench.sh > $O/main.txt 2>&1
uptime >> $O/uptime.txt
env KIT=.mpikit MIN=1M MAX=64M STEP=4 ITERS=10 WARMUP=3 NPROCS="2 4 8" COLLS="allgather" REPEAT=1 GOCOLL_MPI_SHM=0 MPIRUN_ARGS="-x GOCOLL_MPI_SHM" OUT=$O/noshm timeout 40 bash mpi/bench.sh > $O/noshm.txt 2>&1
env KIT=.mpikit MIN=1M MAX=16M STEP=4 ITERS=10 WARMUP=3 NPROCS="4 8" COLLS="allreduce" REPEAT=1 GOCOLL_MPI_PROGRESS=yield MPIRUN_ARGS="-x GOCOLL_MPI_PROGRESS" OUT=$O/yield timeout 35 bash mpi/bench.sh > $O/yield.txt 2>&1
uptime >> $O/uptime.txt
cp $O/main.txt $OUT/main.txt
cd $OUT && tar czf r.tgz r && rm -rf r
