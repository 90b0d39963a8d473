#!/bin/bash
# B (now on Go heap copies of the shared inputs) against E alternating: P = 2, 4, 8, 1-64 MiB.
O=$OUT/r; mkdir -p $O
D=${D:-150}
uptime > $O/uptime-start.txt
export PMIX_MCA_preg=native
command -v mpirun >/dev/null || { for d in .mpikit/debs/*.deb; do dpkg -x "$d" /; done; ldconfig; }
mpirun --version > $O/mpirun-version.txt 2>&1
M="mpirun --oversubscribe --allow-run-as-root"
gunzip -c .mpikit/allreduce-perf.gz > .mpikit/allreduce-perf && chmod +x .mpikit/allreduce-perf
mkdir -p $O/be
for rep in 1 2 3; do
	for P in 2 4 8; do
		[ $SECONDS -lt $((D - 25)) ] || break 2
		timeout 40 $M -np $P .mpikit/allreduce-perf -g 1 --mpi-baseline -a auto --backend host -d float -o sum -b 1M -e 64M -f 4 -n 10 -w 3 --coll allreduce > $O/be/b-np$P-r$rep.txt 2>&1
		timeout 30 $M -np $P .mpikit/mpi_coll allreduce 1048576 67108864 4 10 3 > $O/be/e-np$P-r$rep.txt 2>&1
	done
done
echo "be done at $SECONDS s" >> $O/seconds.txt
uptime > $O/uptime-end.txt
rm -f .mpikit/allreduce-perf
cd $OUT && tar czf r.tgz r && rm -rf r
