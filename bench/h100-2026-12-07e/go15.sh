#!/bin/bash
# The reduce-scatter's reduction over shared inputs measured alone in P processes (TestZZProf: no fences,
# variants of where the inputs and the result lie), against one process of P ranks (allreduce-perf -g P).
O=$OUT/r; mkdir -p $O
D=${D:-200}
uptime > $O/uptime-start.txt
export PMIX_MCA_preg=native
command -v mpirun >/dev/null || { for d in .mpikit/debs/*.deb; do dpkg -x "$d" /; done; ldconfig; }
M="mpirun --oversubscribe --allow-run-as-root"
gunzip -c .mpikit/mpi.test.gz > .mpikit/mpi.test && chmod +x .mpikit/mpi.test
gunzip -c .mpikit/allreduce-perf.gz > .mpikit/arp && chmod +x .mpikit/arp
for P in 4 8; do
	E=$((16 / P))
	for mb in 16 64; do
		[ $SECONDS -lt $((D - 20)) ] || break 2
		(cd mpi && ZZ=1 ZZ_MB=$mb timeout 60 $M -x ZZ -x ZZ_MB -np $P --map-by slot:PE=$E --bind-to core ../.mpikit/mpi.test -test.run TestZZProf) > $O/zz-P$P-mb$mb.txt 2>&1
	done
	timeout 30 .mpikit/arp -a auto --backend host -d float -o sum -f 4 -w 3 -g $P --coll reducescatter -b 16M -e 64M -n 10 > $O/rs-C$P.txt 2>&1
done
echo "done at $SECONDS s" >> $O/seconds.txt
rm -f .mpikit/arp .mpikit/mpi.test
cd $OUT && tar czf r.tgz r && rm -rf r
