// reduce: dst[i] = op(src0[i], src1[i], ..., src{K-1}[i]) (* scale, or / N)
//
// Compiled with T = float (reduce_f32) and with T = double (reduce_f64,
// -DGOCOLL_F64, needs shaderFloat64). With -DGOCOLL_VEC each element is 16
// bytes, T = vec4 (reduce4_f32) or dvec2 (reduce4_f64): n and the offsets
// then count vectors, the scale stays a scalar, and every operator works per
// component exactly as on scalars. The inputs are reduced in binding order,
// so the result does not depend on how work is split.
// Inputs of more than 8 sources are reduced in passes by the backend, the
// previous partial result being src0 of the next pass.
//
// Subnormals: every kernel that computes in floating point declares the
// SPIR-V execution mode DenormPreserve for its width (denorm.glsl: 32, or 64
// in the f64 kernels), so a device that reports shaderDenormPreserveFloat32
// (Float64) keeps subnormal inputs and results as IEEE 754 does; the backend
// removes the declaration for a device that does not take it
// (kernels.AdaptFloatControls). Such a device may flush float32 subnormals
// to zero (Vulkan allows it; NVIDIA's driver does), so its first open runs
// a self-test of these kernels on subnormal data (internal/shimdev,
// selftest.go) and keeps them only where every result is the host's bit for
// bit (lavapipe's are); elsewhere it runs the _ftz
// variants instead (-DGOCOLL_FTZ: reduce_f32_ftz, reduce4_f32_ftz,
// reducem_f32_ftz, reducem4_f32_ftz), which hold float32 elements as their
// bits (uint, uvec4) and reduce them with float32.glsl's arithmetic, exact
// on every device, as the 16-bit kernels do; a sum whose inputs and result
// are all in the range where no partial sum can be subnormal adds the whole
// element on the hardware at once (sum_fast), which keeps the plain sum
// memory-bound. A mean divides with
// divide_exact (divide.glsl), correctly rounded for subnormal quotients too.
// The f64 kernels keep the device's float64 arithmetic: a device that does
// not report shaderDenormPreserveFloat64 keeps float64 subnormals only if
// its hardware does (lavapipe's does).
//
// With -DGOCOLL_I32 (S = int, reduce_i32; T = ivec4, reduce4_i32) or
// -DGOCOLL_U32 (S = uint, reduce_u32; T = uvec4, reduce4_u32) the elements
// are 32-bit integers: sum and prod wrap (two's complement; computed on uint
// so that no target language sees a signed overflow), max and min compare
// signed (int) or unsigned (uint); the integer kernels alone take the
// bitwise operators 4 band, 5 bor and 6 bxor (on the bits, two's complement)
// and the logical ones 7 land, 8 lor and 9 lxor (1 where (a != 0) op
// (b != 0) holds, else 0; K = 1 copies the source, as every operator does).
// SCALE on an integer kernel is a mean (NCCL's ncclAvg on integers): the
// result, wrapped in the element type, divided once by div (N), truncated
// toward zero for the signed types (scale_acc); the scale push constant (an
// S, unused) keeps the float kernels' layout, so the backend fills every
// variant alike.
// The other integer types work alike, the scale push constant an unused
// 32-bit int or uint: -DGOCOLL_I64 / -DGOCOLL_U64 (int64_t, uint64_t;
// i64vec2, u64vec2 in reduce4_i64/_u64; need shaderInt64), -DGOCOLL_I8 /
// -DGOCOLL_U8 (int8_t, uint8_t storage, needs storageBuffer8BitAccess;
// computed in 32 bits and truncated, which wraps exactly; no 16-byte form),
// -DGOCOLL_I16 / -DGOCOLL_U16 (int16_t, uint16_t storage, needs
// storageBuffer16BitAccess; as the 8-bit ones).
//
// With -DGOCOLL_F16 (binary16, reduce_f16) or -DGOCOLL_BF16 (bfloat16,
// reduce_bf16) the elements are the uint16_t bits of the 16-bit values
// (needs storageBuffer16BitAccess). Each is widened to float32 exactly, the
// sources are reduced in float32 and scaled as the f32 kernels do (the scale
// a float), and the result is rounded once to the 16-bit type, to nearest
// even: the host backend's bits (host/exec.go reduce16), NaN payloads of
// sums and products aside. The float32 arithmetic is float32.glsl's, exact
// also on devices that flush subnormals. K = 0 (Scale by 1) copies src0's
// bits. For more than 8 sources the partial results stay float32 bits (a
// uint per element): -DGOCOLL_IN32 makes src0 such a partial result
// (_in32), -DGOCOLL_OUT32 makes dst one, never scaled nor rounded (_out32).
//
// With -DGOCOLL_E4M3 (OCP E4M3, FN variant, reduce_e4m3) or -DGOCOLL_E5M2
// (OCP E5M2, reduce_e5m2) the elements are the uint8_t bits of 8-bit floats
// (needs storageBuffer8BitAccess), reduced as the 16-bit floats are (and
// with their _in32 and _out32 forms): widened exactly, reduced and scaled in
// float32, rounded once to nearest even, a finite overflow saturating to
// the largest finite value (float32.glsl's f32_to_f8, the host's
// F32ToE4M3 and F32ToE5M2).
//
// With -DGOCOLL_MULTI (reducem_f32, reducem_f64, reducem4_f32, reducem4_f64,
// and reducem_ of every integer and 16-bit type, reducem4_ of the 32- and
// 64-bit integers) the kernel writes the result to M destinations (spec
// constant 5, 1..8) at bindings 0..7, the sources moving to bindings 8..15:
// each invocation reads every source element before it writes any
// destination element, so a destination may be a source (in place). Push
// constants: n, dst_off[8], src_off[8], the scale at byte 72 and div at byte
// 80.
#version 450
#if defined(GOCOLL_F16) || defined(GOCOLL_BF16) || defined(GOCOLL_E4M3) || defined(GOCOLL_E5M2)
#define GOCOLL_NARROW
#define GOCOLL_BITS
#if defined(GOCOLL_E4M3) || defined(GOCOLL_E5M2)
#extension GL_EXT_shader_8bit_storage : require
#define E uint8_t
#else
#extension GL_EXT_shader_16bit_storage : require
#define E uint16_t
#endif
// Accumulated as float32 bits; S and T are float for divide.glsl.
#define S float
#define T float
#define A uint
#elif defined(GOCOLL_FTZ)
#extension GL_EXT_control_flow_attributes : require
// float32 elements as their bits, reduced with float32.glsl's arithmetic;
// S and T are float for divide.glsl (scalar: the 16-byte form divides per
// component).
#define GOCOLL_BITS
#define S float
#define T float
#ifdef GOCOLL_VEC
#define E uvec4
#define A uvec4
#define W 4
#else
#define E uint
#define A uint
#endif
#elif defined(GOCOLL_I64) || defined(GOCOLL_U64)
#define GOCOLL_INT
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#ifdef GOCOLL_I64
#define S int
#ifdef GOCOLL_VEC
#define T i64vec2
#else
#define T int64_t
#endif
#else
#define S uint
#ifdef GOCOLL_VEC
#define T u64vec2
#else
#define T uint64_t
#endif
#endif
#ifdef GOCOLL_VEC
#define U u64vec2
#else
#define U uint64_t
#endif
#elif defined(GOCOLL_I8) || defined(GOCOLL_U8)
#define GOCOLL_INT
#define GOCOLL_NARROW_INT
#extension GL_EXT_shader_8bit_storage : require
#ifdef GOCOLL_I8
#define S int
#define E int8_t
#else
#define S uint
#define E uint8_t
#endif
#define T S
#define U uint
#elif defined(GOCOLL_I16) || defined(GOCOLL_U16)
#define GOCOLL_INT
#define GOCOLL_NARROW_INT
#extension GL_EXT_shader_16bit_storage : require
#ifdef GOCOLL_I16
#define S int
#define E int16_t
#else
#define S uint
#define E uint16_t
#endif
#define T S
#define U uint
#elif defined(GOCOLL_I32) || defined(GOCOLL_U32)
#define GOCOLL_INT
#ifdef GOCOLL_I32
#define S int
#ifdef GOCOLL_VEC
#define T ivec4
#endif
#else
#define S uint
#ifdef GOCOLL_VEC
#define T uvec4
#endif
#endif
// U is T's unsigned type, in which sums and products wrap.
#ifdef GOCOLL_VEC
#define U uvec4
#else
#define U uint
#endif
#elif defined(GOCOLL_F64)
#extension GL_ARB_gpu_shader_fp64 : require
#define S double
#ifdef GOCOLL_VEC
#define T dvec2
#define W 2
#define DIV_VEC 2
#endif
#else
#define S float
#ifdef GOCOLL_VEC
#define T vec4
#define W 4
#define DIV_VEC 4
#endif
#endif
#ifndef GOCOLL_VEC
#ifndef T
#define T S
#endif
#endif
#ifndef GOCOLL_INT
#ifdef GOCOLL_F64
#define DENORM_WIDTH 64
#else
#define DENORM_WIDTH 32
#endif
#include "denorm.glsl"
#endif
// E is the type of an element in memory (T unless narrower); A the type of
// the accumulator (T, or float32 bits for the 16-bit types).
#ifndef E
#define E T
#endif
#ifndef A
#define A T
#endif
// The element types of dst and src0: float32 bits (uint) where they hold a
// partial result of a 16-bit reduction.
#ifdef GOCOLL_OUT32
#define DST_E uint
#else
#define DST_E E
#endif
#ifdef GOCOLL_IN32
#define SRC0_E uint
#else
#define SRC0_E E
#endif

layout(local_size_x_id = 0) in;                 // work-group size
layout(constant_id = 1) const uint OP = 0;      // 0 sum, 1 prod, 2 max, 3 min; integers also 4 band .. 9 lxor
layout(constant_id = 2) const uint K = 2;       // number of inputs, 1..8 (0: copy, GOCOLL_COPY)
layout(constant_id = 3) const bool SCALE = false;

#ifdef GOCOLL_MULTI
layout(constant_id = 5) const uint M = 1;       // number of outputs, 1..8
layout(set = 0, binding = 0) buffer Dst0 { DST_E d[]; } d0;
layout(set = 0, binding = 1) buffer Dst1 { DST_E d[]; } d1;
layout(set = 0, binding = 2) buffer Dst2 { DST_E d[]; } d2;
layout(set = 0, binding = 3) buffer Dst3 { DST_E d[]; } d3;
layout(set = 0, binding = 4) buffer Dst4 { DST_E d[]; } d4;
layout(set = 0, binding = 5) buffer Dst5 { DST_E d[]; } d5;
layout(set = 0, binding = 6) buffer Dst6 { DST_E d[]; } d6;
layout(set = 0, binding = 7) buffer Dst7 { DST_E d[]; } d7;
#define SRC 8
#else
layout(set = 0, binding = 0) buffer Dst { DST_E d[]; } dst;
#define SRC 1
#endif
layout(set = 0, binding = SRC + 0) readonly buffer Src0 { SRC0_E d[]; } s0;
layout(set = 0, binding = SRC + 1) readonly buffer Src1 { E d[]; } s1;
layout(set = 0, binding = SRC + 2) readonly buffer Src2 { E d[]; } s2;
layout(set = 0, binding = SRC + 3) readonly buffer Src3 { E d[]; } s3;
layout(set = 0, binding = SRC + 4) readonly buffer Src4 { E d[]; } s4;
layout(set = 0, binding = SRC + 5) readonly buffer Src5 { E d[]; } s5;
layout(set = 0, binding = SRC + 6) readonly buffer Src6 { E d[]; } s6;
layout(set = 0, binding = SRC + 7) readonly buffer Src7 { E d[]; } s7;

// Element offsets into each binding: bindings start at the device's offset
// alignment, the data may start a few elements later. div is N when scale is
// 1/N (a mean): the result is then divided by N, correctly rounded; 0 means
// multiply by scale. It sits at byte 48 in both element types.
#ifdef GOCOLL_MULTI
layout(push_constant) uniform Params {
    uint n;          // elements to reduce
    uint dst_off[8];
    uint src_off[8];
    layout(offset = 72) S scale;
    layout(offset = 80) uint div;
} pc;
#else
layout(push_constant) uniform Params {
    uint n;          // elements to reduce
    uint dst_off;
    uint src_off[8];
    S scale;
    layout(offset = 48) uint div;
} pc;
#endif

#ifdef GOCOLL_BITS
#include "divide.glsl"
#include "float32.glsl"

// The f32 kernels' operators, on float32 bits (float32.glsl), and the scale
// step: divide by N, or multiply by the scale.
uint combine1(uint a, uint b) {
    if (OP == 0u) return f32_add(a, b);
    if (OP == 1u) return f32_mul(a, b);
    if (OP == 2u) return f32_max(a, b);
    return f32_min(a, b);
}

uint scale1(uint x) {
    return pc.div != 0u ? f32_div(x, pc.div, pc.scale) : f32_mul(x, floatBitsToUint(pc.scale));
}

#ifdef GOCOLL_VEC
A combine(A a, A b) {
    A r;
    for (int c = 0; c < W; c++) r[c] = combine1(a[c], b[c]);
    return r;
}

A scale_acc(A x) {
    A r;
    for (int c = 0; c < W; c++) r[c] = scale1(x[c]);
    return r;
}
#else
A combine(A a, A b) { return combine1(a, b); }
A scale_acc(A x) { return scale1(x); }
#endif

#ifdef GOCOLL_NARROW
#ifdef GOCOLL_BF16
#define WIDEN(h) bf16_to_f32(uint(h))
#define NARROW(x) f32_to_bf16(x)
#elif defined(GOCOLL_E4M3)
#define WIDEN(h) e4m3_to_f32(uint(h))
#define NARROW(x) f32_to_e4m3(x)
#elif defined(GOCOLL_E5M2)
#define WIDEN(h) e5m2_to_f32(uint(h))
#define NARROW(x) f32_to_e5m2(x)
#else
#define WIDEN(h) f16_to_f32(uint(h))
#define NARROW(x) f32_to_f16(x)
#endif

// LOAD reads a source element as an A, LOAD0 src0's; STORE makes the
// result's bits (a RES_T), TO_DST a DST_E of them.
#define LOAD(x) WIDEN(x)
#ifdef GOCOLL_IN32
#define LOAD0(x) (x)
#else
#define LOAD0(x) WIDEN(x)
#endif
#ifdef GOCOLL_OUT32
#define STORE(x) (x)
#else
#define STORE(x) NARROW(x)
#endif
#define RES_T uint
#define TO_DST(x) DST_E(x)
#if !defined(GOCOLL_IN32) && !defined(GOCOLL_OUT32) && !defined(GOCOLL_MULTI)
#define GOCOLL_COPY // K = 0 copies the bits
#endif
#endif
#elif defined(GOCOLL_INT)
// Sum and product of the bits as uint (wrapping), max and min of the values,
// the bitwise operators on the bits, the logical ones on the truth values
// (U(notEqual) or U(!=): 1 or 0 per component): exact, so the 16-byte
// variant needs no per-component path.
#ifdef GOCOLL_VEC
#define TRUTH(x) U(notEqual(x, T(0)))
#else
#define TRUTH(x) U(x != T(0))
#endif
T combine(T a, T b) {
    if (OP == 0u) return T(U(a) + U(b));
    if (OP == 1u) return T(U(a) * U(b));
    if (OP == 2u) return max(a, b);
    if (OP == 3u) return min(a, b);
    if (OP == 4u) return a & b;
    if (OP == 5u) return a | b;
    if (OP == 6u) return a ^ b;
    if (OP == 7u) return T(TRUTH(a) & TRUTH(b));
    if (OP == 8u) return T(TRUTH(a) | TRUTH(b));
    return T(TRUTH(a) ^ TRUTH(b));
}
#if defined(GOCOLL_I8) || defined(GOCOLL_I16) || defined(GOCOLL_I32) || defined(GOCOLL_I64)
#define GOCOLL_SIGNED
#endif
#ifdef GOCOLL_I64
#define SIGN_SHIFT 63
#else
#define SIGN_SHIFT 31
#endif
// A mean (SCALE, div = N): the sum wrapped in the element type (the 8- and
// 16-bit ones are accumulated in 32 bits: their low bits, sign-extended for
// the signed types), divided by N once, truncated toward zero for the signed
// types as NCCL does it (the magnitude divided, the sign put back), on the
// bits as U, so that no target language divides a negative value.
T scale_acc(T x) {
#if defined(GOCOLL_I8)
    x = T(U(x) << 24u) >> 24;
#elif defined(GOCOLL_I16)
    x = T(U(x) << 16u) >> 16;
#elif defined(GOCOLL_U8)
    x &= 0xffu;
#elif defined(GOCOLL_U16)
    x &= 0xffffu;
#endif
#ifdef GOCOLL_SIGNED
    U m = U(x >> SIGN_SHIFT); // all ones where x is negative, else 0
    U q = ((U(x) ^ m) - m) / U(pc.div);
    return T((q ^ m) - m);
#else
    return T(U(x) / U(pc.div));
#endif
}
#ifdef GOCOLL_NARROW_INT
#define LOAD(x) T(x)
#define STORE(x) (x)
#define RES_T T
#define TO_DST(x) E(x) // truncated: the sum's or product's low bits
#endif
#else
bool negative(S x) {
#ifdef GOCOLL_F64
    return (unpackDouble2x32(x).y >> 31) != 0u;
#else
    return (floatBitsToUint(x) >> 31) != 0u;
#endif
}

// The 16-byte variants apply the scalar combine1 per component for max and
// min; the scalar variants call it combine.
#ifdef GOCOLL_VEC
#define CT S
#define COMBINE combine1
#else
#define CT T
#define COMBINE combine
#endif

// IEEE 754-2019 maximum/minimum: NaN if either input is NaN, and -0 < +0.
// GLSL's max/min leave both cases undefined.
CT COMBINE(CT a, CT b) {
    if (OP == 0u) return a + b;
    if (OP == 1u) return a * b;
    if (isnan(a)) return a;
    if (isnan(b)) return b;
    if (a == b) {
        bool pick_a = (OP == 2u) ? !negative(a) : negative(a);
        return pick_a ? a : b;
    }
    if (OP == 2u) return a > b ? a : b;
    return a < b ? a : b;
}

#ifdef GOCOLL_VEC
T combine(T a, T b) {
    if (OP == 0u) return a + b;
    if (OP == 1u) return a * b;
    T r;
    for (int c = 0; c < W; c++) r[c] = combine1(a[c], b[c]);
    return r;
}
#endif

#include "divide.glsl"

T scale_acc(T x) { return pc.div != 0u ? divide_exact(x, pc.div, pc.scale) : x * pc.scale; }
#endif

#ifdef GOCOLL_FTZ
// sum_fast is the sum of the K sources' element i on the hardware, the whole
// element at once, where that is exact whatever the device does with
// subnormals: when every input component is a zero or finite with a biased
// exponent of at least 25 (so a multiple of 2^-125: every partial sum,
// rounded to nearest, is one too, so 0 or normal, never subnormal) and the
// result is finite (an overflow on the way leaves it Inf). It returns false,
// leaving acc undefined, where that does not hold: the caller then reduces
// the element with float32.glsl's arithmetic (sum_slow).
// The checks take three integer operations per component and source on
// t = x + x (wrapping: twice the magnitude, the sign dropped): a running
// minimum of t - 2, where a zero of either sign wraps to the top of the
// range, is below 2 * 2^(25+23) - 2 exactly where some input is not a zero
// and has a biased exponent under 25 (a subnormal among them); a running
// maximum of t is at least 2 * Inf's bits exactly where some input is
// infinite or NaN. A zero result gets its sign by IEEE 754's rule (-0 only
// where every input is -0), not from the device, which Vulkan lets drop the
// signs of zeros: where the AND of the inputs' bits has the sign bit, every
// input is negative, and a sum of negative values this large is zero only
// if every one is -0.
#ifdef GOCOLL_VEC
#define FAST_LE(a, b) all(lessThanEqual(a, b))
#define FAST_LT(a, b) all(lessThan(a, b))
#define FAST_ZERO(a, all) mix(a, (all) & F32_SIGN, equal((a) & F32_ABS, A(0u)))
#define FT vec4
#else
#define FAST_LE(a, b) ((a) <= (b))
#define FAST_LT(a, b) ((a) < (b))
#define FAST_ZERO(a, all) (((a) & F32_ABS) == 0u ? (all) & F32_SIGN : (a))
#define FT float
#endif
const uint FAST_LO2 = (25u << 24) - 2u; // 2 * (biased exponent 25, no fraction) - 2
const uint FAST_INF2 = 0xFF000000u;     // 2 * F32_INF
bool sum_fast(uint i, out A acc) {
    A x = s0.d[pc.src_off[0] + i];
    // lo: the least t - 2, hi: the largest t (t = x + x); all_bits: the AND
    // of the bits.
    A t = x + x;
    A lo = t - 2u, hi = t, all_bits = x;
    precise FT f = uintBitsToFloat(x);
#define FAST_ADD(s, k) \
    if (K > k) { \
        x = s.d[pc.src_off[k] + i]; \
        t = x + x; \
        lo = min(lo, t - 2u); \
        hi = max(hi, t); \
        all_bits &= x; \
        f = f + uintBitsToFloat(x); \
    }
    FAST_ADD(s1, 1u)
    FAST_ADD(s2, 2u)
    FAST_ADD(s3, 3u)
    FAST_ADD(s4, 4u)
    FAST_ADD(s5, 5u)
    FAST_ADD(s6, 6u)
    FAST_ADD(s7, 7u)
    acc = FAST_ZERO(floatBitsToUint(f), all_bits);
    return FAST_LE(A(FAST_LO2), lo) && FAST_LT(hi, A(FAST_INF2)) && FAST_LT(acc & F32_ABS, A(F32_INF));
}

// src_k is source k's element i (k from 1 to 7).
A src_k(uint k, uint i) {
    switch (k) {
    case 1u: return s1.d[pc.src_off[1] + i];
    case 2u: return s2.d[pc.src_off[2] + i];
    case 3u: return s3.d[pc.src_off[3] + i];
    case 4u: return s4.d[pc.src_off[4] + i];
    case 5u: return s5.d[pc.src_off[5] + i];
    case 6u: return s6.d[pc.src_off[6] + i];
    }
    return s7.d[pc.src_off[7] + i];
}

// sum_slow is the sum of element i where sum_fast does not hold, component
// by component with float32.glsl's arithmetic, in a loop over the sources
// that is not unrolled: one copy of the exact addition per component
// instead of one per source keeps the kernel small (on an H100 the mean of
// 8 sources of 4 MiB, all on the fast path, took 5.7% less time than with
// the loop unrolled; docs/PERFORMANCE.md).
A sum_slow(uint i) {
    A acc = s0.d[pc.src_off[0] + i];
    [[dont_unroll]] for (uint k = 1u; k < K; k++) acc = combine(acc, src_k(k, i));
    return acc;
}
#endif

#ifndef LOAD
#define LOAD(x) (x)
#endif
#ifndef LOAD0
#define LOAD0(x) LOAD(x)
#endif
#ifndef TO_DST
#define TO_DST(x) (x)
#endif

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += stride) {
#ifdef GOCOLL_COPY
        if (K == 0u) { // Scale by 1: the bits as they are, NaN payloads included
            dst.d[pc.dst_off + i] = s0.d[pc.src_off[0] + i];
            continue;
        }
#endif
        A acc;
#ifdef GOCOLL_FTZ
        if (OP == 0u) {
            if (!sum_fast(i, acc)) acc = sum_slow(i);
        } else {
#endif
        acc = LOAD0(s0.d[pc.src_off[0] + i]);
        if (K > 1u) acc = combine(acc, LOAD(s1.d[pc.src_off[1] + i]));
        if (K > 2u) acc = combine(acc, LOAD(s2.d[pc.src_off[2] + i]));
        if (K > 3u) acc = combine(acc, LOAD(s3.d[pc.src_off[3] + i]));
        if (K > 4u) acc = combine(acc, LOAD(s4.d[pc.src_off[4] + i]));
        if (K > 5u) acc = combine(acc, LOAD(s5.d[pc.src_off[5] + i]));
        if (K > 6u) acc = combine(acc, LOAD(s6.d[pc.src_off[6] + i]));
        if (K > 7u) acc = combine(acc, LOAD(s7.d[pc.src_off[7] + i]));
#ifdef GOCOLL_FTZ
        }
#endif
#ifndef GOCOLL_OUT32
        if (SCALE) acc = scale_acc(acc);
#endif
#ifdef STORE
        RES_T res = STORE(acc); // rounded once, stored to every destination
#define RES res
#else
#define RES acc
#endif
#ifdef GOCOLL_MULTI
        d0.d[pc.dst_off[0] + i] = TO_DST(RES);
        if (M > 1u) d1.d[pc.dst_off[1] + i] = TO_DST(RES);
        if (M > 2u) d2.d[pc.dst_off[2] + i] = TO_DST(RES);
        if (M > 3u) d3.d[pc.dst_off[3] + i] = TO_DST(RES);
        if (M > 4u) d4.d[pc.dst_off[4] + i] = TO_DST(RES);
        if (M > 5u) d5.d[pc.dst_off[5] + i] = TO_DST(RES);
        if (M > 6u) d6.d[pc.dst_off[6] + i] = TO_DST(RES);
        if (M > 7u) d7.d[pc.dst_off[7] + i] = TO_DST(RES);
#else
        dst.d[pc.dst_off + i] = TO_DST(RES);
#endif
    }
}
