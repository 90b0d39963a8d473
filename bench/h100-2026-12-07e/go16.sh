#!/bin/bash
# The same machine: the window's reduce-scatter called alone in P processes (TestZZProf, window and window
# with the result on the heap, against the reduction alone), allreduce-perf's G (with a CPU profile per
# process and the window's stats), and C.
O=$OUT/r; mkdir -p $O
D=${D:-200}
uptime > $O/uptime-start.txt
export PMIX_MCA_preg=native
command -v mpirun >/dev/null || { for d in .mpikit/debs/*.deb; do dpkg -x "$d" /; done; ldconfig; }
M="mpirun --oversubscribe --allow-run-as-root"
for b in mpi.test arpp; do gunzip -c .mpikit/$b.gz > .mpikit/$b && chmod +x .mpikit/$b; done
gunzip -c .mpikit/allreduce-perf.gz > .mpikit/arp && chmod +x .mpikit/arp
A="-a auto --backend host -d float -o sum -f 4 -w 3 --coll reducescatter -b 16M -e 16M -n 40"
for rep in 1 2; do
	for P in 4 8; do
		[ $SECONDS -lt $((D - 20)) ] || break 2
		E=$((16 / P))
		(cd mpi && ZZ_WINDOW_ONLY=1 ZZ=1 ZZ_MB=16 timeout 60 $M -x ZZ -x ZZ_MB -x ZZ_WINDOW_ONLY -np $P --map-by slot:PE=$E --bind-to core ../.mpikit/mpi.test -test.run TestZZProf) > $O/zz-P$P-r$rep.txt 2>&1
		mkdir -p $O/prof-G$P-r$rep
		ZZPROF=$O/prof-G$P-r$rep/p GOCOLL_MPI_STATS=1 timeout 30 $M -x ZZPROF -x GOCOLL_MPI_STATS -np $P --map-by slot:PE=$E --bind-to core .mpikit/arpp -g 1 $A > $O/rs-G$P-r$rep.txt 2>&1
		timeout 30 .mpikit/arp -g $P $A > $O/rs-C$P-r$rep.txt 2>&1
	done
done
echo "done at $SECONDS s" >> $O/seconds.txt
rm -f .mpikit/arp .mpikit/arpp .mpikit/mpi.test
cd $OUT && tar czf r.tgz r && rm -rf r
