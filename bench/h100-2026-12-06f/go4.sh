#!/bin/bash
# Third call: all-reduce after the 2-process window takes one fence a chunk (A at P = 2, F = 2 processes).
O=$OUT/r; mkdir -p $O
uptime > $O/uptime.txt
env KIT=.mpikit MIN=1M MAX=64M STEP=4 ITERS=10 WARMUP=3 NPROCS="2 4 8" COLLS="allreduce" REPEAT=2 OUT=$O/ar timeout 150 bash mpi/bench.sh > $O/ar.txt 2>&1
uptime >> $O/uptime.txt
cp $O/ar.txt $OUT/ar.txt
cd $OUT && tar czf r.tgz r && rm -rf r
