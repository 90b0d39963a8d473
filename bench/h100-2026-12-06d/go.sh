#!/bin/bash
# One device call: the C-column comparison (old/new), then the MPI table of all three collectives, bounded so
# that the results are packed before the call's limit.
O=$OUT/r; mkdir -p $O
uptime > $O/uptime.txt
REPS="${REPS:-1}" timeout 80 bash .mpikit/cmp.sh .mpikit $O
KIT=.mpikit NPROCS="2 4 8" COLLS="${COLLS:-allreduce allgather reducescatter}" MIN=1M MAX=64M STEP=4 ITERS=10 WARMUP=3 REPEAT=${REPEAT:-3} OUT=$O/mpi timeout ${LIMIT:-470} bash mpi/bench.sh > $O/mpi.txt 2>&1
uptime >> $O/uptime.txt
cp $O/mpi.txt $OUT/mpi.txt
cd $OUT && tar czf r.tgz r && rm -rf r
