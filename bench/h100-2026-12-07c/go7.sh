#!/bin/bash
# Why do processes sharing memory move it slower than one process? Page sizes, binding, the progress thread.
O=$OUT/r; mkdir -p $O
uptime > $O/uptime-start.txt
{ lscpu; numactl -H 2>&1; for f in enabled defrag shmem_enabled; do echo "$f: $(cat /sys/kernel/mm/transparent_hugepage/$f 2>&1)"; done; mount | grep -E "shm|/tmp"; df -h /dev/shm; grep -i huge /proc/meminfo; nproc; } > $O/machine.txt 2>&1
gunzip -c .mpikit/ub.test.gz > .mpikit/ub.test && chmod +x .mpikit/ub.test
UB=1 UB_MB=64 UB_P=4 timeout 60 .mpikit/ub.test -test.run TestUB -test.v > $O/ub1-64.txt 2>&1
UB=1 UB_MB=16 UB_P=4 timeout 60 .mpikit/ub.test -test.run TestUB -test.v > $O/ub1-16.txt 2>&1
echo "ub1 done at $SECONDS" >> $O/seconds.txt
# 4 processes at once, 4 cores each
for i in 0 1 2 3; do
	GOMAXPROCS=4 UB=1 UB_MB=64 UB_P=4 timeout 90 taskset -c $((4*i))-$((4*i+3)) .mpikit/ub.test -test.run TestUB -test.v > $O/ub4-$i.txt 2>&1 &
done
wait
echo "ub4 done at $SECONDS" >> $O/seconds.txt
export PMIX_MCA_preg=native
command -v mpirun >/dev/null || { for d in .mpikit/debs/*.deb; do dpkg -x "$d" /; done; ldconfig; }
M="mpirun --oversubscribe --allow-run-as-root"
gunzip -c .mpikit/allreduce-perf.gz > .mpikit/allreduce-perf && chmod +x .mpikit/allreduce-perf
A=".mpikit/allreduce-perf --backend host -d float -o sum -b 16M -e 64M -f 4 -n 10 -w 3 -g 1 -a auto"
mkdir -p $O/v
for rep in 1 2; do
 for coll in reducescatter allreduce; do
  timeout 40 .mpikit/allreduce-perf --backend host -d float -o sum -b 16M -e 64M -f 4 -n 10 -w 3 -g 4 --coll $coll > $O/v/$coll-C-r$rep.txt 2>&1
  timeout 40 $M -np 4 --map-by slot:PE=4 --bind-to core -x GOCOLL_MPI_STATS=1 $A --coll $coll > $O/v/$coll-G-r$rep.txt 2>&1
  timeout 40 $M -np 4 --map-by slot:PE=4 --bind-to core -x GOCOLL_MPI_PROGRESS=yield $A --coll $coll > $O/v/$coll-Gyield-r$rep.txt 2>&1
  timeout 40 $M -np 4 --bind-to none $A --coll $coll > $O/v/$coll-Gnone-r$rep.txt 2>&1
  timeout 40 $M -np 4 --map-by slot:PE=4 --bind-to core $A --go-heap --coll $coll > $O/v/$coll-Gheap-r$rep.txt 2>&1
  [ $coll = allreduce ] && timeout 40 $M -np 4 --map-by slot:PE=4 --bind-to core -x GOCOLL_MPI_ZC_DIRECT_MIN=1G $A --coll $coll > $O/v/$coll-Gnodirect-r$rep.txt 2>&1
 done
 timeout 40 $M -np 8 --map-by slot:PE=2 --bind-to core -x GOCOLL_MPI_STATS=1 $A --coll allreduce > $O/v/allreduce-G8-r$rep.txt 2>&1
 timeout 40 $M -np 8 --map-by slot:PE=2 --bind-to core -x GOCOLL_MPI_ZC_DIRECT_MIN=1G $A --coll allreduce > $O/v/allreduce-G8nodirect-r$rep.txt 2>&1
 timeout 40 $M -np 2 -x GOCOLL_MPI_STATS=1 .mpikit/allreduce-perf --backend host -d float -o sum -b 1M -e 64M -f 4 -n 10 -w 3 -g 1 -a auto --coll allreduce > $O/v/allreduce-A2-r$rep.txt 2>&1
 timeout 40 $M -np 2 -x GOCOLL_MPI_ZC_DIRECT_MIN=1G .mpikit/allreduce-perf --backend host -d float -o sum -b 1M -e 64M -f 4 -n 10 -w 3 -g 1 -a auto --coll allreduce > $O/v/allreduce-A2nodirect-r$rep.txt 2>&1
done
echo "v done at $SECONDS" >> $O/seconds.txt
mkdir -p $O/p2
for coll in allgather; do
	timeout 30 $M -x GOCOLL_MPI_STATS=1 -np 2 .mpikit/allreduce-perf --backend host -d float -o sum -b 1M -e 64M -f 4 -n 20 -w 3 -g 1 -a auto \
		--coll $coll > $O/p2/$coll-np2-def.txt 2>&1
done
echo "p2 done at $SECONDS" >> $O/seconds.txt
uptime > $O/uptime-end.txt
rm -f .mpikit/allreduce-perf .mpikit/ub.test
cd $OUT && tar czf r.tgz r && rm -rf r
