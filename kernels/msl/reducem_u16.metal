#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

constant uint OP_tmp [[function_constant(1)]];
constant uint OP = is_function_constant_defined(OP_tmp) ? OP_tmp : 0u;
constant bool _20 = (OP == 0u);
constant bool _28 = (OP == 1u);
constant bool _36 = (OP == 2u);
constant bool _44 = (OP == 3u);
constant bool _52 = (OP == 4u);
constant bool _60 = (OP == 5u);
constant bool _68 = (OP == 6u);
constant bool _76 = (OP == 7u);
constant bool _88 = (OP == 8u);

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

constant uint _132_tmp [[function_constant(0)]];
constant uint _132 = is_function_constant_defined(_132_tmp) ? _132_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_132, 1u, 1u);

struct Src0
{
    ushort d[1];
};

constant uint K_tmp [[function_constant(2)]];
constant uint K = is_function_constant_defined(K_tmp) ? K_tmp : 2u;
constant bool _166 = (K > 1u);

struct Src1
{
    ushort d[1];
};

constant bool _185 = (K > 2u);

struct Src2
{
    ushort d[1];
};

constant bool _203 = (K > 3u);

struct Src3
{
    ushort d[1];
};

constant bool _222 = (K > 4u);

struct Src4
{
    ushort d[1];
};

constant bool _240 = (K > 5u);

struct Src5
{
    ushort d[1];
};

constant bool _259 = (K > 6u);

struct Src6
{
    ushort d[1];
};

constant bool _278 = (K > 7u);

struct Src7
{
    ushort d[1];
};

constant bool SCALE_tmp [[function_constant(3)]];
constant bool SCALE = is_function_constant_defined(SCALE_tmp) ? SCALE_tmp : false;

struct Dst0
{
    ushort d[1];
};

constant uint M_tmp [[function_constant(5)]];
constant uint M = is_function_constant_defined(M_tmp) ? M_tmp : 1u;
constant bool _317 = (M > 1u);

struct Dst1
{
    ushort d[1];
};

constant bool _331 = (M > 2u);

struct Dst2
{
    ushort d[1];
};

constant bool _345 = (M > 3u);

struct Dst3
{
    ushort d[1];
};

constant bool _359 = (M > 4u);

struct Dst4
{
    ushort d[1];
};

constant bool _373 = (M > 5u);

struct Dst5
{
    ushort d[1];
};

constant bool _387 = (M > 6u);

struct Dst6
{
    ushort d[1];
};

constant bool _401 = (M > 7u);

struct Dst7
{
    ushort d[1];
};

static inline __attribute__((always_inline))
uint combine(thread const uint& a, thread const uint& b)
{
    if (_20)
    {
        return a + b;
    }
    if (_28)
    {
        return a * b;
    }
    if (_36)
    {
        return max(a, b);
    }
    if (_44)
    {
        return min(a, b);
    }
    if (_52)
    {
        return a & b;
    }
    if (_60)
    {
        return a | b;
    }
    if (_68)
    {
        return a ^ b;
    }
    if (_76)
    {
        return uint(a != 0u) & uint(b != 0u);
    }
    if (_88)
    {
        return uint(a != 0u) | uint(b != 0u);
    }
    return uint(a != 0u) ^ uint(b != 0u);
}

static inline __attribute__((always_inline))
uint scale_acc(thread uint& x, constant Params& pc)
{
    x &= 65535u;
    return x / pc.div;
}

kernel void main0(constant Params& pc [[buffer(0)]], device Dst0& d0 [[buffer(0)]], device Dst1& d1 [[buffer(1)]], device Dst2& d2 [[buffer(2)]], device Dst3& d3 [[buffer(3)]], device Dst4& d4 [[buffer(4)]], device Dst5& d5 [[buffer(5)]], device Dst6& d6 [[buffer(6)]], device Dst7& d7 [[buffer(7)]], const device Src0& s0 [[buffer(8)]], const device Src1& s1 [[buffer(9)]], const device Src2& s2 [[buffer(10)]], const device Src3& s3 [[buffer(11)]], const device Src4& s4 [[buffer(12)]], const device Src5& s5 [[buffer(13)]], const device Src6& s6 [[buffer(14)]], const device Src7& s7 [[buffer(15)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint _135 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint stride = _135, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        uint acc = uint(s0.d[pc.src_off[0] + i]);
        if (_166)
        {
            uint param = acc;
            uint param_1 = uint(s1.d[pc.src_off[1] + i]);
            acc = combine(param, param_1);
        }
        if (_185)
        {
            uint param_2 = acc;
            uint param_3 = uint(s2.d[pc.src_off[2] + i]);
            acc = combine(param_2, param_3);
        }
        if (_203)
        {
            uint param_4 = acc;
            uint param_5 = uint(s3.d[pc.src_off[3] + i]);
            acc = combine(param_4, param_5);
        }
        if (_222)
        {
            uint param_6 = acc;
            uint param_7 = uint(s4.d[pc.src_off[4] + i]);
            acc = combine(param_6, param_7);
        }
        if (_240)
        {
            uint param_8 = acc;
            uint param_9 = uint(s5.d[pc.src_off[5] + i]);
            acc = combine(param_8, param_9);
        }
        if (_259)
        {
            uint param_10 = acc;
            uint param_11 = uint(s6.d[pc.src_off[6] + i]);
            acc = combine(param_10, param_11);
        }
        if (_278)
        {
            uint param_12 = acc;
            uint param_13 = uint(s7.d[pc.src_off[7] + i]);
            acc = combine(param_12, param_13);
        }
        if (SCALE)
        {
            uint param_14 = acc;
            uint _302 = scale_acc(param_14, pc);
            acc = _302;
        }
        uint res = acc;
        d0.d[pc.dst_off[0] + i] = ushort(res);
        if (_317)
        {
            d1.d[pc.dst_off[1] + i] = ushort(res);
        }
        if (_331)
        {
            d2.d[pc.dst_off[2] + i] = ushort(res);
        }
        if (_345)
        {
            d3.d[pc.dst_off[3] + i] = ushort(res);
        }
        if (_359)
        {
            d4.d[pc.dst_off[4] + i] = ushort(res);
        }
        if (_373)
        {
            d5.d[pc.dst_off[5] + i] = ushort(res);
        }
        if (_387)
        {
            d6.d[pc.dst_off[6] + i] = ushort(res);
        }
        if (_401)
        {
            d7.d[pc.dst_off[7] + i] = ushort(res);
        }
    }
}

