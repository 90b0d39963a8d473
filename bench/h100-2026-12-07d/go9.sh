#!/bin/bash
# B against E at P = 4 and 8, 1 and 4 MiB: variants of B's buffers and waits, and the binding.
O=$OUT/r; mkdir -p $O
D=${D:-150}
uptime > $O/uptime-start.txt
export PMIX_MCA_preg=native
command -v mpirun >/dev/null || { for d in .mpikit/debs/*.deb; do dpkg -x "$d" /; done; ldconfig; }
M="mpirun --oversubscribe --allow-run-as-root"
gunzip -c .mpikit/allreduce-perf.gz > .mpikit/allreduce-perf && chmod +x .mpikit/allreduce-perf
B=".mpikit/allreduce-perf -g 1 --mpi-baseline -a auto --backend host -d float -o sum -b 1M -e 4M -f 4 -n 20 -w 3 --coll allreduce"
mkdir -p $O/be
for rep in 1 2 3; do
	for P in 4 8; do
		[ $SECONDS -lt $((D - 20)) ] || break 2
		timeout 20 $M -np $P $B > $O/be/b-def-np$P-r$rep.txt 2>&1
		timeout 20 $M -np $P .mpikit/mpi_coll allreduce 1048576 4194304 4 20 3 > $O/be/e-def-np$P-r$rep.txt 2>&1
		timeout 20 $M -np $P $B --go-heap > $O/be/b-heap-np$P-r$rep.txt 2>&1
		timeout 20 $M -np $P -x GOCOLL_MPI_HELP=0 $B > $O/be/b-help0-np$P-r$rep.txt 2>&1
		timeout 20 $M -np $P -x GOCOLL_MPI_PROGRESS=yield $B > $O/be/b-yield-np$P-r$rep.txt 2>&1
		timeout 20 $M -np $P --bind-to core $B > $O/be/b-core-np$P-r$rep.txt 2>&1
		timeout 20 $M -np $P --bind-to core .mpikit/mpi_coll allreduce 1048576 4194304 4 20 3 > $O/be/e-core-np$P-r$rep.txt 2>&1
		timeout 20 $M -np $P -x GOMAXPROCS=2 $B > $O/be/b-gmp2-np$P-r$rep.txt 2>&1
	done
done
echo "be done at $SECONDS s" >> $O/seconds.txt
uptime > $O/uptime-end.txt
rm -f .mpikit/allreduce-perf
cd $OUT && tar czf r.tgz r && rm -rf r
