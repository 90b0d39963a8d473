#include "textflag.h"

// The packed loops of Combine (combine_amd64.go): acc[i] = acc[i] op x[i]
// for the first n elements, n a multiple of 16 float32s or 8 float64s, 64
// bytes an iteration. SSE2 (every amd64). The accumulator is each packed
// operation's first operand, as in Go's scalar loop, so a NaN's payload
// comes out the same.

// PACKED is one loop's body: MOV loads and stores, OP combines, SHIFT
// turns n into iterations.
#define PACKED(MOV, OP, SHIFT) \
	MOVQ acc+0(FP), DI \
	MOVQ x+8(FP), SI \
	MOVQ n+16(FP), CX \
	SHRQ $SHIFT, CX \
	JZ   done \
loop: \
	MOV 0(DI), X0 \
	MOV 16(DI), X1 \
	MOV 32(DI), X2 \
	MOV 48(DI), X3 \
	MOV 0(SI), X4 \
	MOV 16(SI), X5 \
	MOV 32(SI), X6 \
	MOV 48(SI), X7 \
	OP  X4, X0 \
	OP  X5, X1 \
	OP  X6, X2 \
	OP  X7, X3 \
	MOV X0, 0(DI) \
	MOV X1, 16(DI) \
	MOV X2, 32(DI) \
	MOV X3, 48(DI) \
	ADDQ $64, DI \
	ADDQ $64, SI \
	DECQ CX \
	JNZ  loop \
done: \
	RET

// func addF32(acc, x *float32, n int)
TEXT ·addF32(SB), NOSPLIT, $0-24
	PACKED(MOVUPS, ADDPS, 4)

// func mulF32(acc, x *float32, n int)
TEXT ·mulF32(SB), NOSPLIT, $0-24
	PACKED(MOVUPS, MULPS, 4)

// func addF64(acc, x *float64, n int)
TEXT ·addF64(SB), NOSPLIT, $0-24
	PACKED(MOVUPD, ADDPD, 3)

// func mulF64(acc, x *float64, n int)
TEXT ·mulF64(SB), NOSPLIT, $0-24
	PACKED(MOVUPD, MULPD, 3)
