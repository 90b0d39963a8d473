#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

constant uint _16_tmp [[function_constant(0)]];
constant uint _16 = is_function_constant_defined(_16_tmp) ? _16_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_16, 1u, 1u);

struct Params
{
    uint n;
    uint dst_off;
    uint src_off;
    uint pad;
    float scale;
};

struct Src
{
    float4 d[1];
};

constant bool SCALE_tmp [[function_constant(3)]];
constant bool SCALE = is_function_constant_defined(SCALE_tmp) ? SCALE_tmp : false;

struct Dst
{
    float4 d[1];
};

kernel void main0(constant Params& pc [[buffer(0)]], device Dst& dst [[buffer(0)]], const device Src& src [[buffer(1)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint _20 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint stride = _20, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        float4 v = src.d[pc.src_off + i];
        if (SCALE)
        {
            v *= pc.scale;
        }
        dst.d[pc.dst_off + i] = v;
    }
}

