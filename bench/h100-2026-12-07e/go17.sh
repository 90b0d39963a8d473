#!/bin/bash
# A reduce-scatter of one rank per process writing its result straight (new) against through the leader's
# pooled blocks and a copy (old), and the all-gather of 2 processes x P/2 ranks in pieces over every core
# of the process (new) against 2 pieces per MiB (old); alternating, with C and D on the same machine.
O=$OUT/r; mkdir -p $O
D=${D:-240}
uptime > $O/uptime-start.txt
export PMIX_MCA_preg=native
command -v mpirun >/dev/null || { for d in .mpikit/debs/*.deb; do dpkg -x "$d" /; done; ldconfig; }
M="mpirun --oversubscribe --allow-run-as-root"
for v in "" -old; do gunzip -c .mpikit/allreduce-perf$v.gz > .mpikit/arp$v && chmod +x .mpikit/arp$v; done
sw() { # file cmd...: the 1-4 MiB pass (80 calls) and the 16-64 MiB pass (10 calls)
	local f=$1; shift
	{ timeout 40 "$@" -b 1M -e 4M -n 80; timeout 40 "$@" -b 16M -e 64M -n 10; } > $f 2>&1
}
for rep in 1 2 3; do
	for v in "" -old; do
		[ $SECONDS -lt $((D - 30)) ] || break 2
		A=".mpikit/arp$v -a auto --backend host -d float -o sum -f 4 -w 3"
		for P in 4 8; do
			E=$((16 / P))
			sw $O/rs-G$P$v-r$rep.txt $M -np $P --map-by slot:PE=$E --bind-to core $A -g 1 --coll reducescatter
			timeout 30 $M -np 2 --map-by slot:PE=$((P / 2)) --bind-to core $A -g $((P / 2)) --coll allgather -b 1M -e 4M -n 80 > $O/ag-F$P$v-r$rep.txt 2>&1
		done
	done
	A=".mpikit/arp -a auto --backend host -d float -o sum -f 4 -w 3"
	for P in 4 8; do
		sw $O/rs-C$P-r$rep.txt $A -g $P --coll reducescatter
		timeout 30 $M -np $P .mpikit/mpi_coll allgather 1048576 4194304 4 80 3 > $O/ag-D$P-r$rep.txt 2>&1
	done
done
echo "done at $SECONDS s" >> $O/seconds.txt
uptime > $O/uptime-end.txt
rm -f .mpikit/arp .mpikit/arp-old
cd $OUT && tar czf r.tgz r && rm -rf r
