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
    uint dst_off[8];
    uint src_off[8];
    char _m3_pad[4];
    uint scale;
    char _m4_pad[4];
    uint div;
};

struct Src0
{
    uint d[1];
};

constant uint K_tmp [[function_constant(2)]];
constant uint K = is_function_constant_defined(K_tmp) ? K_tmp : 2u;
constant bool _150 = (K > 1u);

struct Src1
{
    uint d[1];
};

constant bool _168 = (K > 2u);

struct Src2
{
    uint d[1];
};

constant bool _185 = (K > 3u);

struct Src3
{
    uint d[1];
};

constant bool _203 = (K > 4u);

struct Src4
{
    uint d[1];
};

constant bool _221 = (K > 5u);

struct Src5
{
    uint d[1];
};

constant bool _239 = (K > 6u);

struct Src6
{
    uint d[1];
};

constant bool _257 = (K > 7u);

struct Src7
{
    uint d[1];
};

struct Dst0
{
    uint d[1];
};

constant uint M_tmp [[function_constant(5)]];
constant uint M = is_function_constant_defined(M_tmp) ? M_tmp : 1u;
constant bool _286 = (M > 1u);

struct Dst1
{
    uint d[1];
};

constant bool _299 = (M > 2u);

struct Dst2
{
    uint d[1];
};

constant bool _312 = (M > 3u);

struct Dst3
{
    uint d[1];
};

constant bool _325 = (M > 4u);

struct Dst4
{
    uint d[1];
};

constant bool _338 = (M > 5u);

struct Dst5
{
    uint d[1];
};

constant bool _351 = (M > 6u);

struct Dst6
{
    uint d[1];
};

constant bool _364 = (M > 7u);

struct Dst7
{
    uint d[1];
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

kernel void main0(constant Params& pc [[buffer(0)]], device Dst0& d0 [[buffer(0)]], device Dst1& d1 [[buffer(1)]], device Dst2& d2 [[buffer(2)]], device Dst3& d3 [[buffer(3)]], device Dst4& d4 [[buffer(4)]], device Dst5& d5 [[buffer(5)]], device Dst6& d6 [[buffer(6)]], device Dst7& d7 [[buffer(7)]], const device Src0& s0 [[buffer(8)]], const device Src1& s1 [[buffer(9)]], const device Src2& s2 [[buffer(10)]], const device Src3& s3 [[buffer(11)]], const device Src4& s4 [[buffer(12)]], const device Src5& s5 [[buffer(13)]], const device Src6& s6 [[buffer(14)]], const device Src7& s7 [[buffer(15)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint _114 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint stride = _114, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        uint acc = s0.d[pc.src_off[0] + i];
        if (_150)
        {
            uint param = acc;
            uint param_1 = s1.d[pc.src_off[1] + i];
            acc = combine(param, param_1);
        }
        if (_168)
        {
            uint param_2 = acc;
            uint param_3 = s2.d[pc.src_off[2] + i];
            acc = combine(param_2, param_3);
        }
        if (_185)
        {
            uint param_4 = acc;
            uint param_5 = s3.d[pc.src_off[3] + i];
            acc = combine(param_4, param_5);
        }
        if (_203)
        {
            uint param_6 = acc;
            uint param_7 = s4.d[pc.src_off[4] + i];
            acc = combine(param_6, param_7);
        }
        if (_221)
        {
            uint param_8 = acc;
            uint param_9 = s5.d[pc.src_off[5] + i];
            acc = combine(param_8, param_9);
        }
        if (_239)
        {
            uint param_10 = acc;
            uint param_11 = s6.d[pc.src_off[6] + i];
            acc = combine(param_10, param_11);
        }
        if (_257)
        {
            uint param_12 = acc;
            uint param_13 = s7.d[pc.src_off[7] + i];
            acc = combine(param_12, param_13);
        }
        d0.d[pc.dst_off[0] + i] = acc;
        if (_286)
        {
            d1.d[pc.dst_off[1] + i] = acc;
        }
        if (_299)
        {
            d2.d[pc.dst_off[2] + i] = acc;
        }
        if (_312)
        {
            d3.d[pc.dst_off[3] + i] = acc;
        }
        if (_325)
        {
            d4.d[pc.dst_off[4] + i] = acc;
        }
        if (_338)
        {
            d5.d[pc.dst_off[5] + i] = acc;
        }
        if (_351)
        {
            d6.d[pc.dst_off[6] + i] = acc;
        }
        if (_364)
        {
            d7.d[pc.dst_off[7] + i] = acc;
        }
    }
}

