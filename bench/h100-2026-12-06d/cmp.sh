#!/bin/bash
# C column, old (HEAD before the CPU pass) against new, interleaved, in one process with P ranks.
K=$1; O=$2
gunzip -c $K/arp-old.gz > /tmp/arp-old && chmod +x /tmp/arp-old
[ -x $K/allreduce-perf ] || { gunzip -c $K/allreduce-perf.gz > $K/allreduce-perf; chmod +x $K/allreduce-perf; }
for rep in ${REPS:-1 2 3}; do
for P in 2 4 8; do
 for c in allreduce allgather reducescatter; do
  for b in old new; do
   bin=/tmp/arp-old; [ $b = new ] && bin=$K/allreduce-perf
   echo "== rep $rep P=$P $c $b" >> $O/cmp.txt
   $bin --backend host -g $P -b 1M -e 64M -f 4 -n 10 -w 3 --coll $c 2>&1 | grep -v "^#" >> $O/cmp.txt
  done
 done
done
done
