#!/bin/bash
# 8 processes on 16 cores: the progress thread spinning (auto's choice there) against yielding, for A and B.
O=$OUT/r; mkdir -p $O
D=${D:-120}
export PMIX_MCA_preg=native
command -v mpirun >/dev/null || { for d in .mpikit/debs/*.deb; do dpkg -x "$d" /; done; ldconfig; }
M="mpirun --oversubscribe --allow-run-as-root"
gunzip -c .mpikit/allreduce-perf.gz > .mpikit/allreduce-perf && chmod +x .mpikit/allreduce-perf
mkdir -p $O/py
for rep in 1 2 3; do
	for coll in allreduce allgather reducescatter; do
		for v in auto yield; do
			[ $SECONDS -lt $((D - 8)) ] || break 3
			b=""; [ $coll = allreduce ] && b=--mpi-baseline
			timeout 25 $M -np 8 -x GOCOLL_MPI_PROGRESS=$v .mpikit/allreduce-perf -g 1 $b -a auto --backend host -d float -o sum -b 1M -e 16M -f 4 -n 10 -w 3 --coll $coll > $O/py/$coll-$v-r$rep.txt 2>&1
		done
	done
	timeout 20 $M -np 8 .mpikit/mpi_coll allreduce 1048576 16777216 4 10 3 > $O/py/e-r$rep.txt 2>&1
done
echo "py done at $SECONDS s" >> $O/seconds.txt
rm -f .mpikit/allreduce-perf
cd $OUT && tar czf r.tgz r && rm -rf r
