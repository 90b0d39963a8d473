#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

constant uint OP_tmp [[function_constant(1)]];
constant uint OP = is_function_constant_defined(OP_tmp) ? OP_tmp : 0u;
constant bool _16 = (OP == 0u);
constant bool _24 = (OP == 1u);
constant bool _32 = (OP == 2u);
constant bool _40 = (OP == 3u);
constant bool _48 = (OP == 4u);
constant bool _56 = (OP == 5u);
constant bool _64 = (OP == 6u);
constant bool _72 = (OP == 7u);
constant bool _84 = (OP == 8u);
constant uint _111_tmp [[function_constant(0)]];
constant uint _111 = is_function_constant_defined(_111_tmp) ? _111_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_111, 1u, 1u);

struct Params
{
    uint n;
    uint dst_off;
    uint src_off[8];
    uint scale;
    char _m4_pad[4];
    uint div;
};

struct Src0
{
    ushort d[1];
};

constant uint K_tmp [[function_constant(2)]];
constant uint K = is_function_constant_defined(K_tmp) ? K_tmp : 2u;
constant bool _151 = (K > 1u);

struct Src1
{
    ushort d[1];
};

constant bool _170 = (K > 2u);

struct Src2
{
    ushort d[1];
};

constant bool _188 = (K > 3u);

struct Src3
{
    ushort d[1];
};

constant bool _207 = (K > 4u);

struct Src4
{
    ushort d[1];
};

constant bool _226 = (K > 5u);

struct Src5
{
    ushort d[1];
};

constant bool _245 = (K > 6u);

struct Src6
{
    ushort d[1];
};

constant bool _264 = (K > 7u);

struct Src7
{
    ushort d[1];
};

struct Dst
{
    ushort d[1];
};

constant bool SCALE_tmp [[function_constant(3)]];
constant bool SCALE = is_function_constant_defined(SCALE_tmp) ? SCALE_tmp : false;

static inline __attribute__((always_inline))
uint combine(thread const uint& a, thread const uint& b)
{
    if (_16)
    {
        return a + b;
    }
    if (_24)
    {
        return a * b;
    }
    if (_32)
    {
        return max(a, b);
    }
    if (_40)
    {
        return min(a, b);
    }
    if (_48)
    {
        return a & b;
    }
    if (_56)
    {
        return a | b;
    }
    if (_64)
    {
        return a ^ b;
    }
    if (_72)
    {
        return uint(a != 0u) & uint(b != 0u);
    }
    if (_84)
    {
        return uint(a != 0u) | uint(b != 0u);
    }
    return uint(a != 0u) ^ uint(b != 0u);
}

kernel void main0(constant Params& pc [[buffer(0)]], device Dst& dst [[buffer(0)]], const device Src0& s0 [[buffer(1)]], const device Src1& s1 [[buffer(2)]], const device Src2& s2 [[buffer(3)]], const device Src3& s3 [[buffer(4)]], const device Src4& s4 [[buffer(5)]], const device Src5& s5 [[buffer(6)]], const device Src6& s6 [[buffer(7)]], const device Src7& s7 [[buffer(8)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint _114 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint stride = _114, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        uint acc = uint(s0.d[pc.src_off[0] + i]);
        if (_151)
        {
            uint param = acc;
            uint param_1 = uint(s1.d[pc.src_off[1] + i]);
            acc = combine(param, param_1);
        }
        if (_170)
        {
            uint param_2 = acc;
            uint param_3 = uint(s2.d[pc.src_off[2] + i]);
            acc = combine(param_2, param_3);
        }
        if (_188)
        {
            uint param_4 = acc;
            uint param_5 = uint(s3.d[pc.src_off[3] + i]);
            acc = combine(param_4, param_5);
        }
        if (_207)
        {
            uint param_6 = acc;
            uint param_7 = uint(s4.d[pc.src_off[4] + i]);
            acc = combine(param_6, param_7);
        }
        if (_226)
        {
            uint param_8 = acc;
            uint param_9 = uint(s5.d[pc.src_off[5] + i]);
            acc = combine(param_8, param_9);
        }
        if (_245)
        {
            uint param_10 = acc;
            uint param_11 = uint(s6.d[pc.src_off[6] + i]);
            acc = combine(param_10, param_11);
        }
        if (_264)
        {
            uint param_12 = acc;
            uint param_13 = uint(s7.d[pc.src_off[7] + i]);
            acc = combine(param_12, param_13);
        }
        uint res = acc;
        dst.d[pc.dst_off + i] = ushort(res);
    }
}

