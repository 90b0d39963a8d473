#!/bin/bash
# Within LIMIT seconds, most needed first: (1) the reduce-scatter of processes sharing memory (G: P on 16/P
# cores each), claimed pieces (new) against the tip's binary (old), alternating, P = 4, 8, 1-64 MiB, with C;
# (2) one process's all-gather in one CopyGather pass (ag) against old; (3) B, H (E's loop in B's processes)
# and E (mpi_coll) under three placements; (4) F's all-gather with the window's stats.
L=${LIMIT:-300}
O=$OUT/r; mkdir -p $O
uptime > $O/uptime-start.txt; nproc >> $O/uptime-start.txt
export PMIX_MCA_preg=native
command -v mpirun >/dev/null || { for d in .mpikit/debs/*.deb; do dpkg -x "$d" /; done; ldconfig; }
M="mpirun --oversubscribe --allow-run-as-root"
for v in old new ag; do n=-$v; [ $v = old ] && n=; gunzip -c .mpikit/allreduce-perf$n.gz > .mpikit/arp-$v && chmod +x .mpikit/arp-$v; done
A="--backend host -d float -o sum -f 4 -w 3 -a auto --coll reducescatter"
G="--backend host -d float -o sum -f 4 -w 3 -a auto --coll allgather"
B="--backend host -d float -o sum -f 4 -w 3 -g 1 --mpi-baseline -a auto --coll allreduce"
for rep in 1 2 3; do
	[ $SECONDS -lt $((L * 2 / 5)) ] || break
	for P in 8 4; do
		X="--map-by slot:PE=$((16 / P)) --bind-to core"
		for v in new old; do
			{ timeout 30 $M $X -np $P .mpikit/arp-$v -g 1 $A -b 1M -e 4M -n 80; timeout 40 $M $X -np $P .mpikit/arp-$v -g 1 $A -b 16M -e 64M -n 10; } > $O/rs-g$P-$v-r$rep.txt 2>&1
		done
		{ timeout 30 .mpikit/arp-old -g $P $A -b 1M -e 4M -n 80; timeout 40 .mpikit/arp-old -g $P $A -b 16M -e 64M -n 10; } > $O/rs-c$P-r$rep.txt 2>&1
		for v in ag old; do
			{ timeout 30 .mpikit/arp-$v -g $P $G -b 1M -e 4M -n 160; timeout 30 .mpikit/arp-$v -g $P $G -b 16M -e 16M -n 20; } > $O/agc-g$P-$v-r$rep.txt 2>&1
		done
	done
	echo "rs+agc rep $rep done at $SECONDS s" >> $O/seconds.txt
done
for rep in 1 2 3; do
	for P in 2 4 8; do
		for pl in def none pe; do
			[ $SECONDS -lt $((L - 30)) ] || break 3
			case $pl in def) X="" ;; none) X="--bind-to none" ;; pe) X="--map-by slot:PE=$((16 / P)) --bind-to core" ;; esac
			{ timeout 30 $M $X -np $P .mpikit/arp-new $B -b 1M -e 4M -n 80; timeout 30 $M $X -np $P .mpikit/arp-new $B -b 16M -e 16M -n 10; } > $O/ab-P$P-$pl-r$rep.txt 2>&1
			{ timeout 30 $M $X -np $P .mpikit/mpi_coll allreduce 1048576 4194304 4 80 3; timeout 30 $M $X -np $P .mpikit/mpi_coll allreduce 16777216 16777216 4 10 3; } > $O/e-P$P-$pl-r$rep.txt 2>&1
		done
	done
	echo "be rep $rep done at $SECONDS s" >> $O/seconds.txt
done
if [ $SECONDS -lt $((L - 20)) ]; then
	GOCOLL_MPI_STATS=1 timeout 15 $M -x GOCOLL_MPI_STATS --map-by slot:PE=4 --bind-to core -np 2 .mpikit/arp-new -g 4 $G -b 1M -e 4M -n 80 >> $O/f-ag.txt 2>&1
	timeout 10 $M -np 8 .mpikit/mpi_coll allgather 1048576 4194304 4 80 3 >> $O/f-ag.txt 2>&1
fi
echo "all done at $SECONDS s" >> $O/seconds.txt
uptime > $O/uptime-end.txt
rm -f .mpikit/arp-*
cd $OUT && tar czf r.tgz r && rm -rf r
