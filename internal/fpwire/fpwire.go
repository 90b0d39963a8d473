// Package fpwire is the wire form of a call's fingerprint between
// processes: the fixed-size record each process contributes to a
// rendezvous across processes (one Allgather of them), encoded and decoded
// without allocating.
package fpwire

import "encoding/binary"

// Size is the bytes of one record.
const Size = 24

// Record is one process's fingerprint of its call (the collective, op,
// element type, strategy and data path as small codes, the host-f64
// path, root and count), its flag, and whether its own ranks' calls
// already mismatched.
type Record struct {
	Kind, Op, DT, Strategy, Path uint8
	NoF64, Flag, LocalMismatch   bool
	Root                         int32
	Count                        int64
}

// Put writes r into b[:Size].
func (r *Record) Put(b []byte) {
	b[0], b[1], b[2], b[3] = r.Kind, r.Op, r.DT, r.Strategy
	b[4], b[5], b[6], b[7] = bit(r.Flag), bit(r.LocalMismatch), r.Path, bit(r.NoF64)
	binary.LittleEndian.PutUint32(b[8:], uint32(r.Root))
	clear(b[12:16])
	binary.LittleEndian.PutUint64(b[16:], uint64(r.Count))
}

// Get reads the record Put wrote into b.
func Get(b []byte) Record {
	return Record{Kind: b[0], Op: b[1], DT: b[2], Strategy: b[3], Path: b[6], NoF64: b[7] == 1, Flag: b[4] == 1, LocalMismatch: b[5] == 1,
		Root: int32(binary.LittleEndian.Uint32(b[8:])), Count: int64(binary.LittleEndian.Uint64(b[16:]))}
}

func bit(v bool) byte {
	if v {
		return 1
	}
	return 0
}
