#!/bin/bash
# go24.sh, slimmer: TestZZBE at P = 4 and 8; then B (old binary of 80e34f8 / allreduce-perf-help.gz, alternating)
# and E (mpi_coll), as mpi/bench.sh runs them, P = 4, 8 (then 2 if time is left), 1-64 MiB.
O=$OUT/r; mkdir -p $O
uptime > $O/uptime-start.txt
nproc > $O/nproc.txt
export PMIX_MCA_preg=native
command -v mpirun >/dev/null || { for d in .mpikit/debs/*.deb; do dpkg -x "$d" /; done; ldconfig; }
M="mpirun --oversubscribe --allow-run-as-root"
gunzip -c .mpikit/zz.test.gz > .mpikit/zz.test && chmod +x .mpikit/zz.test
for P in 4 8; do
	(cd mpi && ZZ_DS=1 ZZ=1 ZZ_MB=1,4,16 ZZ_ONLY=E-heap,G-one,B-heap,G-tsome5 timeout 60 $M -x ZZ_DS -x ZZ -x ZZ_ONLY -x ZZ_MB -np $P --map-by slot:PE=$((16 / P)) --bind-to core ../.mpikit/zz.test -test.run TestZZBE -test.v) > $O/zzbe-P$P.txt 2>&1
done
echo "zz done at $SECONDS s" >> $O/seconds.txt
for v in "" -help; do gunzip -c .mpikit/allreduce-perf$v.gz > .mpikit/arp$v && chmod +x .mpikit/arp$v; done
A="--backend host -d float -o sum -f 4 -w 3 -g 1 --mpi-baseline -a auto --coll allreduce"
for rep in 1 2 3; do
	for P in 4 8 2; do
		[ $SECONDS -lt ${D:-300} ] || break 2
		for v in "" -help; do
			{ timeout 40 $M -np $P .mpikit/arp$v $A -b 1M -e 4M -n 80; timeout 60 $M -np $P .mpikit/arp$v $A -b 16M -e 64M -n 10; } > $O/ab-P$P$v-r$rep.txt 2>&1
		done
		{ timeout 40 $M -np $P .mpikit/mpi_coll allreduce 1048576 4194304 4 80 3; timeout 60 $M -np $P .mpikit/mpi_coll allreduce 16777216 67108864 4 10 3; } > $O/e-P$P-r$rep.txt 2>&1
	done
done
echo "be done at $SECONDS s" >> $O/seconds.txt
rm -f .mpikit/arp .mpikit/arp-help .mpikit/zz.test
cd $OUT && tar czf r.tgz r && rm -rf r
