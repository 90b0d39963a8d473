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
// With -DGOCOLL_I32 (S = int, reduce_i32; T = ivec4, reduce4_i32) or
// -DGOCOLL_U32 (S = uint, reduce_u32; T = uvec4, reduce4_u32) the elements
// are 32-bit integers: sum and prod wrap (two's complement; computed on uint
// so that no target language sees a signed overflow), max and min compare
// signed (int) or unsigned (uint). Integers are never scaled: SCALE is
// declared but ignored, and the scale push constant (an S, unused) keeps the
// float kernels' layout, so the backend fills every variant alike.
//
// With -DGOCOLL_MULTI (reducem_f32, reducem_f64, reducem4_f32, reducem4_f64,
// and reducem_i32, reducem_u32, reducem4_i32, reducem4_u32) the kernel
// writes the result to M destinations (spec constant 5, 1..8) at
// bindings 0..7, the sources moving to bindings 8..15: each invocation reads
// every source element before it writes any destination element, so a
// destination may be a source (in place). Push constants: n, dst_off[8],
// src_off[8], the scale at byte 72 and div at byte 80.
#version 450
#if defined(GOCOLL_I32) || defined(GOCOLL_U32)
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
#endif
#else
#define S float
#ifdef GOCOLL_VEC
#define T vec4
#define W 4
#endif
#endif
#ifndef GOCOLL_VEC
#define T S
#endif

layout(local_size_x_id = 0) in;                 // work-group size
layout(constant_id = 1) const uint OP = 0;      // 0 sum, 1 prod, 2 max, 3 min
layout(constant_id = 2) const uint K = 2;       // number of inputs, 1..8
layout(constant_id = 3) const bool SCALE = false;

#ifdef GOCOLL_MULTI
layout(constant_id = 5) const uint M = 1;       // number of outputs, 1..8
layout(set = 0, binding = 0) buffer Dst0 { T d[]; } d0;
layout(set = 0, binding = 1) buffer Dst1 { T d[]; } d1;
layout(set = 0, binding = 2) buffer Dst2 { T d[]; } d2;
layout(set = 0, binding = 3) buffer Dst3 { T d[]; } d3;
layout(set = 0, binding = 4) buffer Dst4 { T d[]; } d4;
layout(set = 0, binding = 5) buffer Dst5 { T d[]; } d5;
layout(set = 0, binding = 6) buffer Dst6 { T d[]; } d6;
layout(set = 0, binding = 7) buffer Dst7 { T d[]; } d7;
#define SRC 8
#else
layout(set = 0, binding = 0) buffer Dst { T d[]; } dst;
#define SRC 1
#endif
layout(set = 0, binding = SRC + 0) readonly buffer Src0 { T d[]; } s0;
layout(set = 0, binding = SRC + 1) readonly buffer Src1 { T d[]; } s1;
layout(set = 0, binding = SRC + 2) readonly buffer Src2 { T d[]; } s2;
layout(set = 0, binding = SRC + 3) readonly buffer Src3 { T d[]; } s3;
layout(set = 0, binding = SRC + 4) readonly buffer Src4 { T d[]; } s4;
layout(set = 0, binding = SRC + 5) readonly buffer Src5 { T d[]; } s5;
layout(set = 0, binding = SRC + 6) readonly buffer Src6 { T d[]; } s6;
layout(set = 0, binding = SRC + 7) readonly buffer Src7 { T d[]; } s7;

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

#ifdef GOCOLL_INT
// Sum and product of the bits as uint (wrapping), max and min of the values:
// exact, so the 16-byte variant needs no per-component path.
T combine(T a, T b) {
    if (OP == 0u) return T(U(a) + U(b));
    if (OP == 1u) return T(U(a) * U(b));
    if (OP == 2u) return max(a, b);
    return min(a, b);
}
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
#endif

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += stride) {
        T acc = s0.d[pc.src_off[0] + i];
        if (K > 1u) acc = combine(acc, s1.d[pc.src_off[1] + i]);
        if (K > 2u) acc = combine(acc, s2.d[pc.src_off[2] + i]);
        if (K > 3u) acc = combine(acc, s3.d[pc.src_off[3] + i]);
        if (K > 4u) acc = combine(acc, s4.d[pc.src_off[4] + i]);
        if (K > 5u) acc = combine(acc, s5.d[pc.src_off[5] + i]);
        if (K > 6u) acc = combine(acc, s6.d[pc.src_off[6] + i]);
        if (K > 7u) acc = combine(acc, s7.d[pc.src_off[7] + i]);
#ifndef GOCOLL_INT
        if (SCALE) acc = pc.div != 0u ? divide(acc, pc.div, pc.scale) : acc * pc.scale;
#endif
#ifdef GOCOLL_MULTI
        d0.d[pc.dst_off[0] + i] = acc;
        if (M > 1u) d1.d[pc.dst_off[1] + i] = acc;
        if (M > 2u) d2.d[pc.dst_off[2] + i] = acc;
        if (M > 3u) d3.d[pc.dst_off[3] + i] = acc;
        if (M > 4u) d4.d[pc.dst_off[4] + i] = acc;
        if (M > 5u) d5.d[pc.dst_off[5] + i] = acc;
        if (M > 6u) d6.d[pc.dst_off[6] + i] = acc;
        if (M > 7u) d7.d[pc.dst_off[7] + i] = acc;
#else
        dst.d[pc.dst_off + i] = acc;
#endif
    }
}
