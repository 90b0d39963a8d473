#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

constant uint OP_tmp [[function_constant(1)]];
constant uint OP = is_function_constant_defined(OP_tmp) ? OP_tmp : 0u;
constant bool _17 = (OP == 0u);
constant bool _40 = (OP == 1u);
constant bool _63 = (OP == 2u);
constant bool _71 = (OP == 3u);
constant bool _79 = (OP == 4u);
constant bool _87 = (OP == 5u);
constant bool _95 = (OP == 6u);
constant bool _103 = (OP == 7u);
constant bool _123 = (OP == 8u);
constant uint _161_tmp [[function_constant(0)]];
constant uint _161 = is_function_constant_defined(_161_tmp) ? _161_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_161, 1u, 1u);

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
    uint4 d[1];
};

constant uint K_tmp [[function_constant(2)]];
constant uint K = is_function_constant_defined(K_tmp) ? K_tmp : 2u;
constant bool _199 = (K > 1u);

struct Src1
{
    uint4 d[1];
};

constant bool _217 = (K > 2u);

struct Src2
{
    uint4 d[1];
};

constant bool _234 = (K > 3u);

struct Src3
{
    uint4 d[1];
};

constant bool _252 = (K > 4u);

struct Src4
{
    uint4 d[1];
};

constant bool _270 = (K > 5u);

struct Src5
{
    uint4 d[1];
};

constant bool _288 = (K > 6u);

struct Src6
{
    uint4 d[1];
};

constant bool _306 = (K > 7u);

struct Src7
{
    uint4 d[1];
};

struct Dst
{
    uint4 d[1];
};

constant bool SCALE_tmp [[function_constant(3)]];
constant bool SCALE = is_function_constant_defined(SCALE_tmp) ? SCALE_tmp : false;

static inline __attribute__((always_inline))
uint4 combine(thread const uint4& a, thread const uint4& b)
{
    if (_17)
    {
        return uint4(uint4(a) + uint4(b));
    }
    if (_40)
    {
        return uint4(uint4(a) * uint4(b));
    }
    if (_63)
    {
        return max(a, b);
    }
    if (_71)
    {
        return min(a, b);
    }
    if (_79)
    {
        return a & b;
    }
    if (_87)
    {
        return a | b;
    }
    if (_95)
    {
        return a ^ b;
    }
    if (_103)
    {
        return uint4(uint4(a != uint4(0u)) & uint4(b != uint4(0u)));
    }
    if (_123)
    {
        return uint4(uint4(a != uint4(0u)) | uint4(b != uint4(0u)));
    }
    return uint4(uint4(a != uint4(0u)) ^ uint4(b != uint4(0u)));
}

kernel void main0(constant Params& pc [[buffer(0)]], device Dst& dst [[buffer(0)]], const device Src0& s0 [[buffer(1)]], const device Src1& s1 [[buffer(2)]], const device Src2& s2 [[buffer(3)]], const device Src3& s3 [[buffer(4)]], const device Src4& s4 [[buffer(5)]], const device Src5& s5 [[buffer(6)]], const device Src6& s6 [[buffer(7)]], const device Src7& s7 [[buffer(8)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint _164 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint stride = _164, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        uint4 acc = s0.d[pc.src_off[0] + i];
        if (_199)
        {
            uint4 param = acc;
            uint4 param_1 = s1.d[pc.src_off[1] + i];
            acc = combine(param, param_1);
        }
        if (_217)
        {
            uint4 param_2 = acc;
            uint4 param_3 = s2.d[pc.src_off[2] + i];
            acc = combine(param_2, param_3);
        }
        if (_234)
        {
            uint4 param_4 = acc;
            uint4 param_5 = s3.d[pc.src_off[3] + i];
            acc = combine(param_4, param_5);
        }
        if (_252)
        {
            uint4 param_6 = acc;
            uint4 param_7 = s4.d[pc.src_off[4] + i];
            acc = combine(param_6, param_7);
        }
        if (_270)
        {
            uint4 param_8 = acc;
            uint4 param_9 = s5.d[pc.src_off[5] + i];
            acc = combine(param_8, param_9);
        }
        if (_288)
        {
            uint4 param_10 = acc;
            uint4 param_11 = s6.d[pc.src_off[6] + i];
            acc = combine(param_10, param_11);
        }
        if (_306)
        {
            uint4 param_12 = acc;
            uint4 param_13 = s7.d[pc.src_off[7] + i];
            acc = combine(param_12, param_13);
        }
        dst.d[pc.dst_off + i] = acc;
    }
}

