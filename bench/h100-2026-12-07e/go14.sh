#!/bin/bash
# The progress thread standing back once the requests posted lately completed (new) against spinning for
# 10 ms after every post (old: the binaries before it), alternating: G (P processes on 16/P cores each),
# A of 2 processes (Open MPI's default binding: one core each), F all-gather (2 x 4 ranks), B at 8 processes.
O=$OUT/r; mkdir -p $O
D=${D:-240}
uptime > $O/uptime-start.txt
export PMIX_MCA_preg=native
command -v mpirun >/dev/null || { for d in .mpikit/debs/*.deb; do dpkg -x "$d" /; done; ldconfig; }
M="mpirun --oversubscribe --allow-run-as-root -x GOCOLL_MPI_STATS=1"
for v in "" -old; do gunzip -c .mpikit/allreduce-perf$v.gz > .mpikit/arp$v && chmod +x .mpikit/arp$v; done
for rep in 1 2; do
	for v in "" -old; do
		[ $SECONDS -lt $((D - 20)) ] || break 2
		A=".mpikit/arp$v -a auto --backend host -d float -o sum -f 4 -w 3"
		for coll in reducescatter allreduce allgather; do
			for P in 4 8; do
				E=$((16 / P))
				timeout 30 $M -np $P --map-by slot:PE=$E --bind-to core $A -g 1 --coll $coll -b 16M -e 64M -n 10 > $O/$coll-G$P$v-r$rep.txt 2>&1
			done
		done
		timeout 40 $M -np 2 $A -g 1 --coll allreduce -b 1M -e 64M -n 10 > $O/allreduce-A2$v-r$rep.txt 2>&1
		timeout 30 $M -np 2 --map-by slot:PE=4 --bind-to core $A -g 4 --coll allgather -b 1M -e 4M -n 80 > $O/allgather-F8$v-r$rep.txt 2>&1
		timeout 30 $M -np 8 $A -g 1 --mpi-baseline --coll allreduce -b 1M -e 4M -n 80 > $O/allreduce-B8$v-r$rep.txt 2>&1
	done
	timeout 30 $M -np 8 .mpikit/mpi_coll allreduce 1048576 4194304 4 80 3 > $O/allreduce-E8-r$rep.txt 2>&1
	timeout 30 $M -np 8 .mpikit/mpi_coll allgather 1048576 4194304 4 80 3 > $O/allgather-D8-r$rep.txt 2>&1
done
echo "done at $SECONDS s" >> $O/seconds.txt
uptime > $O/uptime-end.txt
rm -f .mpikit/arp .mpikit/arp-old
cd $OUT && tar czf r.tgz r && rm -rf r
