#include "textflag.h"

// Combine's Sum and Prod of float32 and float64 (combine_amd64.go):
// acc[i] = acc[i] op x[i] for i < n, 64 bytes an iteration with SSE2
// (every amd64), then one element at a time. The accumulator is every
// operation's first operand, so of two NaNs acc's comes out (quieted): a
// fixed choice, where Go's compiler picks either operand order for + and *
// (it has changed with unrelated code around the loop).

// PACKED is one function's body: MOV and OP the packed load/store and
// operation, SMOV and SOP the scalar ones, SHIFT turns n into iterations,
// MASK leaves the elements after them, SIZE is an element's bytes.
#define PACKED(MOV, OP, SMOV, SOP, SHIFT, MASK, SIZE) \
	MOVQ acc+0(FP), DI \
	MOVQ x+8(FP), SI \
	MOVQ n+16(FP), CX \
	MOVQ CX, DX \
	ANDQ $MASK, DX \
	SHRQ $SHIFT, CX \
	JZ   tail \
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
tail: \
	TESTQ DX, DX \
	JZ   done \
one: \
	SMOV 0(DI), X0 \
	SMOV 0(SI), X4 \
	SOP  X4, X0 \
	SMOV X0, 0(DI) \
	ADDQ $SIZE, DI \
	ADDQ $SIZE, SI \
	DECQ DX \
	JNZ  one \
done: \
	RET

// func addF32(acc, x *float32, n int)
TEXT ·addF32(SB), NOSPLIT, $0-24
	PACKED(MOVUPS, ADDPS, MOVSS, ADDSS, 4, 15, 4)

// func mulF32(acc, x *float32, n int)
TEXT ·mulF32(SB), NOSPLIT, $0-24
	PACKED(MOVUPS, MULPS, MOVSS, MULSS, 4, 15, 4)

// func addF64(acc, x *float64, n int)
TEXT ·addF64(SB), NOSPLIT, $0-24
	PACKED(MOVUPD, ADDPD, MOVSD, ADDSD, 3, 7, 8)

// func mulF64(acc, x *float64, n int)
TEXT ·mulF64(SB), NOSPLIT, $0-24
	PACKED(MOVUPD, MULPD, MOVSD, MULSD, 3, 7, 8)
