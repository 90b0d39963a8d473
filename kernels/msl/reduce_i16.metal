#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

constant uint OP_tmp [[function_constant(1)]];
constant uint OP = is_function_constant_defined(OP_tmp) ? OP_tmp : 0u;
constant bool _17 = (OP == 0u);
constant bool _28 = (OP == 1u);
constant bool _39 = (OP == 2u);
constant bool _47 = (OP == 3u);
constant bool _55 = (OP == 4u);
constant bool _63 = (OP == 5u);
constant bool _71 = (OP == 6u);
constant bool _79 = (OP == 7u);
constant bool _93 = (OP == 8u);
constant uint _123_tmp [[function_constant(0)]];
constant uint _123 = is_function_constant_defined(_123_tmp) ? _123_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_123, 1u, 1u);

struct Params
{
    uint n;
    uint dst_off;
    uint src_off[8];
    int scale;
    char _m4_pad[4];
    uint div;
};

struct Src0
{
    short d[1];
};

constant uint K_tmp [[function_constant(2)]];
constant uint K = is_function_constant_defined(K_tmp) ? K_tmp : 2u;
constant bool _161 = (K > 1u);

struct Src1
{
    short d[1];
};

constant bool _180 = (K > 2u);

struct Src2
{
    short d[1];
};

constant bool _198 = (K > 3u);

struct Src3
{
    short d[1];
};

constant bool _217 = (K > 4u);

struct Src4
{
    short d[1];
};

constant bool _236 = (K > 5u);

struct Src5
{
    short d[1];
};

constant bool _255 = (K > 6u);

struct Src6
{
    short d[1];
};

constant bool _274 = (K > 7u);

struct Src7
{
    short d[1];
};

struct Dst
{
    short d[1];
};

constant bool SCALE_tmp [[function_constant(3)]];
constant bool SCALE = is_function_constant_defined(SCALE_tmp) ? SCALE_tmp : false;

static inline __attribute__((always_inline))
int combine(thread const int& a, thread const int& b)
{
    if (_17)
    {
        return int(uint(a) + uint(b));
    }
    if (_28)
    {
        return int(uint(a) * uint(b));
    }
    if (_39)
    {
        return max(a, b);
    }
    if (_47)
    {
        return min(a, b);
    }
    if (_55)
    {
        return a & b;
    }
    if (_63)
    {
        return a | b;
    }
    if (_71)
    {
        return a ^ b;
    }
    if (_79)
    {
        return int(uint(a != 0) & uint(b != 0));
    }
    if (_93)
    {
        return int(uint(a != 0) | uint(b != 0));
    }
    return int(uint(a != 0) ^ uint(b != 0));
}

kernel void main0(constant Params& pc [[buffer(0)]], device Dst& dst [[buffer(0)]], const device Src0& s0 [[buffer(1)]], const device Src1& s1 [[buffer(2)]], const device Src2& s2 [[buffer(3)]], const device Src3& s3 [[buffer(4)]], const device Src4& s4 [[buffer(5)]], const device Src5& s5 [[buffer(6)]], const device Src6& s6 [[buffer(7)]], const device Src7& s7 [[buffer(8)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint _126 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint stride = _126, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        int acc = int(s0.d[pc.src_off[0] + i]);
        if (_161)
        {
            int param = acc;
            int param_1 = int(s1.d[pc.src_off[1] + i]);
            acc = combine(param, param_1);
        }
        if (_180)
        {
            int param_2 = acc;
            int param_3 = int(s2.d[pc.src_off[2] + i]);
            acc = combine(param_2, param_3);
        }
        if (_198)
        {
            int param_4 = acc;
            int param_5 = int(s3.d[pc.src_off[3] + i]);
            acc = combine(param_4, param_5);
        }
        if (_217)
        {
            int param_6 = acc;
            int param_7 = int(s4.d[pc.src_off[4] + i]);
            acc = combine(param_6, param_7);
        }
        if (_236)
        {
            int param_8 = acc;
            int param_9 = int(s5.d[pc.src_off[5] + i]);
            acc = combine(param_8, param_9);
        }
        if (_255)
        {
            int param_10 = acc;
            int param_11 = int(s6.d[pc.src_off[6] + i]);
            acc = combine(param_10, param_11);
        }
        if (_274)
        {
            int param_12 = acc;
            int param_13 = int(s7.d[pc.src_off[7] + i]);
            acc = combine(param_12, param_13);
        }
        int res = acc;
        dst.d[pc.dst_off + i] = short(res);
    }
}

