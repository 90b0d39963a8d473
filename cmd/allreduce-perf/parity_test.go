package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gocoll/gocoll/collective"
)

// ncclBusFactor is busbw/algbw as nccl-tests' *GetBw computes it for n
// ranks (all_reduce: 2(n-1)/n; reduce_scatter, all_gather, alltoall,
// gather, scatter: (n-1)/n; broadcast, reduce, sendrecv: 1), and for scan
// and exscan, which nccl-tests lacks, the chain's (n-1)/n that the help
// states.
var ncclBusFactor = map[string]func(n float64) float64{
	"allreduce":     func(n float64) float64 { return 2 * (n - 1) / n },
	"reducescatter": func(n float64) float64 { return (n - 1) / n },
	"allgather":     func(n float64) float64 { return (n - 1) / n },
	"alltoall":      func(n float64) float64 { return (n - 1) / n },
	"gather":        func(n float64) float64 { return (n - 1) / n },
	"scatter":       func(n float64) float64 { return (n - 1) / n },
	"broadcast":     func(float64) float64 { return 1 },
	"reduce":        func(float64) float64 { return 1 },
	"sendrecv":      func(float64) float64 { return 1 },
	"scan":          func(n float64) float64 { return (n - 1) / n },
	"exscan":        func(n float64) float64 { return (n - 1) / n },
}

// Every collective the tool offers has a busbw factor, nccl-tests' where
// nccl-tests has the collective, and the help prints its formula.
func TestBusFactorEveryCollective(t *testing.T) {
	if len(allColls) != len(collNames) || len(busFormulas) != len(collNames) {
		t.Fatalf("%d collectives, %d in --coll all, %d formulas", len(collNames), len(allColls), len(busFormulas))
	}
	_, help, _ := runCLI(t, "-h")
	for _, c := range allColls {
		want, ok := ncclBusFactor[c.String()]
		if !ok {
			t.Errorf("%s: no reference factor", c)
			continue
		}
		for n := 1; n <= 9; n++ {
			if got := c.busFactor(n); got != want(float64(n)) {
				t.Errorf("%s on %d ranks: busbw factor %v, want %v", c, n, got, want(float64(n)))
			}
		}
		line := fmt.Sprintf("  %-24s %s\n", c, busFormulas[c])
		if busFormulas[c] == "" || !strings.Contains(help, line) {
			t.Errorf("%s: the help does not print its busbw formula (%q)", c, line)
		}
	}
}

// -o premulsum runs NCCL's PreMulSum with nccl-tests' scalars (1 on the
// even ranks, 2 on the odd ones) through every collective that reduces,
// alone or in a list, every value checked against the reference (which
// differs from the sum's), the redop column "premulsum" (across processes
// it is refused: TestMPIPremulsumRefused).
func TestPremulsum(t *testing.T) {
	for _, op := range []string{"premulsum", "sum,PreMulSum"} {
		args := append([]string{"--backend", "host", "--coll", "allreduce,reducescatter,reduce,scan,exscan", "-g", "3", "-r", "1",
			"-d", "float,int8,uint64,half,bfloat16,fp8e4m3,fp8e5m2", "-o", op, "-b", "8", "-e", "1K"}, fast...)
		out, doc, _ := readJSON(t, 0, args...)
		if !strings.Contains(out, "# Out of bounds values : 0 OK\n") {
			t.Fatalf("-o %s: wrong values:\n%s", op, out)
		}
		n := 0
		for _, rec := range doc.Results {
			if rec.Redop == "premulsum" {
				n++
			}
			if rec.Wrong == nil || *rec.Wrong != 0 {
				t.Errorf("-o %s: record %+v: wrong values", op, rec)
			}
		}
		if n == 0 {
			t.Errorf("-o %s: no premulsum record", op)
		}
	}
	differs := false
	for i := range int64(16) {
		if reference(opPreMulSum, 3, i, 0) != reference(collective.Sum, 3, i, 0) {
			differs = true
		}
	}
	if !differs {
		t.Error("the premulsum reference is the sum's")
	}
}

// The types nccl-tests' newer releases have (fp8e4m3, fp8e5m2) and the
// 16-bit integers, through every collective, with the bitwise ops on the
// integers: every value right, counts and sizes as nccl-tests computes
// them (3 ranks, 1 KiB: count 168 for the 16-bit types, 336 for fp8 where
// the buffer is split, 16-byte groups), and busbw = algbw * factor in
// every record.
func TestNewerTypesEveryCollective(t *testing.T) {
	for _, tc := range []struct {
		d, ops string
		split  ncclShape // the split collectives' count and size
		whole  ncclShape // the others'
	}{
		{"int16,uint16", "band,bor,bxor", ncclShape{168, 1008}, ncclShape{512, 1024}},
		{"fp8e4m3,fp8e5m2", "sum,max", ncclShape{336, 1008}, ncclShape{1024, 1024}},
	} {
		t.Run(tc.d, func(t *testing.T) {
			args := append([]string{"--backend", "host", "--coll", "all", "-g", "3", "-r", "1", "-d", tc.d, "-o", tc.ops,
				"-b", "1K", "-e", "1K"}, fast...)
			out, doc, _ := readJSON(t, 0, args...)
			if !strings.Contains(out, "# Out of bounds values : 0 OK\n") {
				t.Fatalf("wrong values:\n%s", out)
			}
			seen := map[string]bool{}
			for _, rec := range doc.Results {
				seen[rec.Collective] = true
				c, ok := parseColl(rec.Collective)
				if !ok {
					t.Fatalf("record %+v: unknown collective", rec)
				}
				want := tc.whole
				switch c {
				case collReduceScatter, collAllGather, collAllToAll, collGather, collScatter:
					want = tc.split
				}
				if rec.Count != want.count || rec.Size != want.size {
					t.Errorf("record %+v: count %d, size %d; nccl-tests: %d, %d", rec, rec.Count, rec.Size, want.count, want.size)
				}
				if f := ncclBusFactor[rec.Collective](3); rec.BusBw != rec.AlgBw*f {
					t.Errorf("record %+v: busbw %v, want algbw*%v", rec, rec.BusBw, f)
				}
				if rec.Wrong == nil || *rec.Wrong != 0 {
					t.Errorf("record %+v: wrong values", rec)
				}
				if c.hasOp() && !strings.Contains(tc.ops, rec.Redop) {
					t.Errorf("record %+v: redop %s not asked for (-o %s)", rec, rec.Redop, tc.ops)
				}
			}
			if len(seen) != len(allColls) {
				t.Errorf("records of %d collectives, want %d: %v", len(seen), len(allColls), seen)
			}
		})
	}
}
