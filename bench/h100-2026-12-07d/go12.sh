#!/bin/bash
# 2 processes x P/2 ranks (F), all-gather: the leader writing every local rank's result in its pass (new)
# against the ranks copying from the leader (old, binaries of e1074ef); D with P processes alongside.
O=$OUT/r; mkdir -p $O
D=${D:-120}
uptime > $O/uptime-start.txt
export PMIX_MCA_preg=native
command -v mpirun >/dev/null || { for d in .mpikit/debs/*.deb; do dpkg -x "$d" /; done; ldconfig; }
M="mpirun --oversubscribe --allow-run-as-root"
for v in "" -old; do gunzip -c .mpikit/allreduce-perf$v.gz > .mpikit/arp$v && chmod +x .mpikit/arp$v; done
mkdir -p $O/f
for rep in 1 2 3; do
	for g in 2 4; do
		[ $SECONDS -lt $((D - 15)) ] || break 2
		P=$((2 * g))
		for v in "" -old; do
			timeout 25 $M -np 2 --map-by slot:PE=$g --bind-to core .mpikit/arp$v -g $g -a auto --backend host --coll allgather -d float -o sum -b 1M -e 64M -f 4 -n 10 -w 3 > $O/f/f$v-np2g$g-r$rep.txt 2>&1
		done
		timeout 25 $M -np $P .mpikit/mpi_coll allgather 1048576 67108864 4 10 3 > $O/f/d-np$P-r$rep.txt 2>&1
	done
done
echo "f done at $SECONDS s" >> $O/seconds.txt
rm -f .mpikit/arp .mpikit/arp-old
cd $OUT && tar czf r.tgz r && rm -rf r
