#!/bin/bash
# Device call 1: the full sweep after the window writes each result once, plus the B/E diagnosis.
O=$OUT/r; mkdir -p $O
uptime > $O/uptime.txt; nproc >> $O/uptime.txt; lscpu | head -20 >> $O/uptime.txt
B="env KIT=.mpikit"
$B MIN=1M MAX=64M STEP=4 ITERS=10 WARMUP=3 NPROCS="2 4 8" COLLS="allreduce allgather reducescatter" REPEAT=2 OUT=$O/main timeout 250 bash mpi/bench.sh > $O/main.txt 2>&1
uptime >> $O/uptime.txt; cp $O/main/table.md $OUT/main-table.md 2>/dev/null
$B MIN=1M MAX=64M STEP=4 ITERS=10 WARMUP=3 NPROCS="2" COLLS="allgather" REPEAT=1 MPIRUN_ARGS="--bind-to none" OUT=$O/agnone timeout 40 bash mpi/bench.sh > $O/agnone.txt 2>&1
$B MIN=4K MAX=256K STEP=4 ITERS=100 WARMUP=10 NPROCS="2 4 8" COLLS="allgather allreduce" REPEAT=1 OUT=$O/small timeout 40 bash mpi/bench.sh > $O/small.txt 2>&1
for v in default funneled emt core gmp2; do
  X="-x GOCOLL_MPI_STATS"; E=""
  case $v in
  funneled) E="GOCOLL_MPI_THREAD=funneled"; X="$X -x GOCOLL_MPI_THREAD";;
  emt) E="MPI_COLL_THREAD=multiple"; X="$X -x MPI_COLL_THREAD";;
  core) X="$X --bind-to core";;
  gmp2) E="GOMAXPROCS=2"; X="$X -x GOMAXPROCS";;
  esac
  env GOCOLL_MPI_STATS=1 $E KIT=.mpikit MIN=1M MAX=4M STEP=4 ITERS=10 WARMUP=3 NPROCS="4 8" COLLS="allreduce" REPEAT=1 MPIRUN_ARGS="$X" OUT=$O/be-$v timeout 45 bash mpi/bench.sh > $O/be-$v.txt 2>&1
done
uptime >> $O/uptime.txt; cp $O/main/table.md $OUT/main-table.md 2>/dev/null
cp $O/main/table.md $OUT/main-table.md 2>/dev/null
cd $OUT && tar czf r.tgz r && rm -rf r
