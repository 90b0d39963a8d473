package direct

// AllGather is the one-process all-gather of host slices, rank me's part:
// every rank's send (sends[p], m bytes, published by the caller) copied by
// the CPU into block p of recv, starting after me so that the ranks read
// different sends at once; the rank's own block only where its send is not
// already there (in place). A rank reads the others' sends and writes only
// its own recv, so every rank runs it at the same time; no data needs a
// device.
func AllGather(me int, sends [][]byte, recv []byte, m int) {
	if m == 0 {
		return
	}
	for i := range sends {
		p := (me + 1 + i) % len(sends)
		if dst := recv[p*m : (p+1)*m]; &dst[0] != &sends[p][0] {
			copy(dst, sends[p][:m])
		}
	}
}
