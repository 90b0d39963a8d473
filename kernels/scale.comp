// scale: dst[i] = src[i] * scale (or / N when div is N: scale is 1/N), or a
// plain copy when SCALE is false.
//
// Compiled with T = float (scale_f32) and T = double (scale_f64); with
// -DGOCOLL_VEC as T = vec4 (scale4_f32) and T = dvec2 (scale4_f64), n and the
// offsets counting 16-byte vectors and the scale staying a scalar. Device
// copies use this kernel rather than vkCmdCopyBuffer, which is several times
// slower for device-to-device copies on some discrete GPUs.
#version 450
#ifdef GOCOLL_F64
#extension GL_ARB_gpu_shader_fp64 : require
#define S double
#ifdef GOCOLL_VEC
#define T dvec2
#endif
#else
#define S float
#ifdef GOCOLL_VEC
#define T vec4
#endif
#endif
#ifndef GOCOLL_VEC
#define T S
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 3) const bool SCALE = false;

layout(set = 0, binding = 0) buffer Dst { T d[]; } dst;
layout(set = 0, binding = 1) readonly buffer Src { T d[]; } src;

layout(push_constant) uniform Params {
    uint n;
    uint dst_off;
    uint src_off;
    uint div;        // N when scale is 1/N: divide, correctly rounded; else 0
    S scale;
} pc;

#include "divide.glsl"

void main() {
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += stride) {
        T v = src.d[pc.src_off + i];
        if (SCALE) v = pc.div != 0u ? divide(v, pc.div, pc.scale) : v * pc.scale;
        dst.d[pc.dst_off + i] = v;
    }
}
