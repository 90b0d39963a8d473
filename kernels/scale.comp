// scale: dst[i] = src[i] * scale (or / N when div is N: scale is 1/N), or a
// plain copy when SCALE is false.
//
// Compiled with T = float (scale_f32) and T = double (scale_f64); with
// -DGOCOLL_VEC as T = vec4 (scale4_f32) and T = dvec2 (scale4_f64), n and the
// offsets counting 16-byte vectors and the scale staying a scalar. Device
// copies use this kernel rather than vkCmdCopyBuffer, which is several times
// slower for device-to-device copies on some discrete GPUs.
//
// Subnormals as in reduce.comp: DenormPreserve declared (denorm.glsl), a
// mean divided by divide_exact, and -DGOCOLL_FTZ (scale_f32_ftz,
// scale4_f32_ftz) for devices that do not take DenormPreserve for float32
// and whose self-test at open found them flushing: elements as their bits (uint, uvec4), scaled with float32.glsl's exact
// arithmetic, copied as bits.
#version 450
#ifdef GOCOLL_F64
#extension GL_ARB_gpu_shader_fp64 : require
#define S double
#ifdef GOCOLL_VEC
#define T dvec2
#define DIV_VEC 2
#endif
#define DENORM_WIDTH 64
#else
#define S float
#ifdef GOCOLL_FTZ
#define T float // divide.glsl's type: the 16-byte form divides per component
#ifdef GOCOLL_VEC
#define E uvec4
#define W 4
#else
#define E uint
#endif
#elif defined(GOCOLL_VEC)
#define T vec4
#define DIV_VEC 4
#endif
#define DENORM_WIDTH 32
#endif
#ifndef T
#define T S
#endif
#ifndef E
#define E T
#endif
#include "denorm.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 3) const bool SCALE = false;

layout(set = 0, binding = 0) buffer Dst { E d[]; } dst;
layout(set = 0, binding = 1) readonly buffer Src { E d[]; } src;

layout(push_constant) uniform Params {
    uint n;
    uint dst_off;
    uint src_off;
    uint div;        // N when scale is 1/N: divide, correctly rounded; else 0
    S scale;
} pc;

#include "divide.glsl"

#ifdef GOCOLL_FTZ
#include "float32.glsl"

uint scale1(uint x) {
    return pc.div != 0u ? f32_div(x, pc.div, pc.scale) : f32_mul(x, floatBitsToUint(pc.scale));
}

#ifdef GOCOLL_VEC
E scale_elem(E x) {
    E r;
    for (int c = 0; c < W; c++) r[c] = scale1(x[c]);
    return r;
}
#else
E scale_elem(E x) { return scale1(x); }
#endif
#else
E scale_elem(E x) { return pc.div != 0u ? divide_exact(x, pc.div, pc.scale) : x * pc.scale; }
#endif

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += stride) {
        E v = src.d[pc.src_off + i];
        if (SCALE) v = scale_elem(v);
        dst.d[pc.dst_off + i] = v;
    }
}
