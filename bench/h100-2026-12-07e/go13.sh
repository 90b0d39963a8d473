#!/bin/bash
# Where the reduce-scatter (and the all-reduce) of P processes sharing memory spends its time: the window's
# stats (GOCOLL_MPI_STATS: per call, fences, reducing where the inputs lie) against one process of P ranks.
O=$OUT/r; mkdir -p $O
D=${D:-240}
uptime > $O/uptime-start.txt
nproc > $O/machine.txt; lscpu >> $O/machine.txt 2>&1
export PMIX_MCA_preg=native
command -v mpirun >/dev/null || { for d in .mpikit/debs/*.deb; do dpkg -x "$d" /; done; ldconfig; }
M="mpirun --oversubscribe --allow-run-as-root -x GOCOLL_MPI_STATS=1"
gunzip -c .mpikit/allreduce-perf.gz > .mpikit/arp && chmod +x .mpikit/arp
A=".mpikit/arp -a auto --backend host -d float -o sum -f 4 -w 3"
for rep in 1 2; do
	for coll in reducescatter allreduce; do
		for P in 4 8; do
			[ $SECONDS -lt $((D - 20)) ] || break 3
			E=$((16 / P))
			timeout 30 $M -np $P --map-by slot:PE=$E --bind-to core $A -g 1 --coll $coll -b 16M -e 64M -n 10 > $O/$coll-G$P-r$rep.txt 2>&1
			timeout 30 $M -x GOCOLL_HOST_WORKERS=1 -np $P --map-by slot:PE=$E --bind-to core $A -g 1 --coll $coll -b 16M -e 64M -n 10 > $O/$coll-G$P-w1-r$rep.txt 2>&1
			timeout 30 $A -g $P --coll $coll -b 16M -e 64M -n 10 > $O/$coll-C$P-r$rep.txt 2>&1
			GOCOLL_HOST_WORKERS=$E timeout 30 $A -g $P --coll $coll -b 16M -e 64M -n 10 > $O/$coll-C$P-w$E-r$rep.txt 2>&1
		done
	done
	[ $SECONDS -lt $((D - 20)) ] || break
	timeout 30 $M -np 2 --map-by slot:PE=4 --bind-to core $A -g 4 --coll allgather -b 1M -e 4M -n 80 > $O/allgather-F8-r$rep.txt 2>&1
	timeout 30 $M -np 8 $A -g 1 --coll allgather -b 1M -e 4M -n 80 > $O/allgather-A8-r$rep.txt 2>&1
done
echo "done at $SECONDS s" >> $O/seconds.txt
uptime > $O/uptime-end.txt
rm -f .mpikit/arp
cd $OUT && tar czf r.tgz r && rm -rf r
