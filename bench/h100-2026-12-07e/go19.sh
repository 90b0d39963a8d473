#!/bin/bash
# The direct all-reduce's pieces claimed by every process's workers from one counter (new) against one
# piece per process (old: binaries of b7f5ccd), alternating: G (P processes on 16/P cores each) and C.
O=$OUT/r; mkdir -p $O
D=${D:-200}
uptime > $O/uptime-start.txt
export PMIX_MCA_preg=native
command -v mpirun >/dev/null || { for d in .mpikit/debs/*.deb; do dpkg -x "$d" /; done; ldconfig; }
M="mpirun --oversubscribe --allow-run-as-root -x GOCOLL_MPI_STATS=1"
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
			sw $O/ar-G$P$v-r$rep.txt $M -np $P --map-by slot:PE=$((16 / P)) --bind-to core $A -g 1 --coll allreduce
		done
	done
	A=".mpikit/arp -a auto --backend host -d float -o sum -f 4 -w 3"
	for P in 4 8; do
		sw $O/ar-C$P-r$rep.txt $A -g $P --coll allreduce
	done
done
echo "done at $SECONDS s" >> $O/seconds.txt
uptime > $O/uptime-end.txt
rm -f .mpikit/arp .mpikit/arp-old
cd $OUT && tar czf r.tgz r && rm -rf r
