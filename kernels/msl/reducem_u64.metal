#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

constant uint OP_tmp [[function_constant(1)]];
constant uint OP = is_function_constant_defined(OP_tmp) ? OP_tmp : 0u;
constant bool _21 = (OP == 0u);
constant bool _29 = (OP == 1u);
constant bool _37 = (OP == 2u);
constant bool _45 = (OP == 3u);
constant bool _53 = (OP == 4u);
constant bool _61 = (OP == 5u);
constant bool _69 = (OP == 6u);
constant bool _77 = (OP == 7u);
constant bool _91 = (OP == 8u);

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

constant uint _134_tmp [[function_constant(0)]];
constant uint _134 = is_function_constant_defined(_134_tmp) ? _134_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_134, 1u, 1u);

struct Src0
{
    ulong d[1];
};

constant uint K_tmp [[function_constant(2)]];
constant uint K = is_function_constant_defined(K_tmp) ? K_tmp : 2u;
constant bool _166 = (K > 1u);

struct Src1
{
    ulong d[1];
};

constant bool _184 = (K > 2u);

struct Src2
{
    ulong d[1];
};

constant bool _201 = (K > 3u);

struct Src3
{
    ulong d[1];
};

constant bool _219 = (K > 4u);

struct Src4
{
    ulong d[1];
};

constant bool _236 = (K > 5u);

struct Src5
{
    ulong d[1];
};

constant bool _254 = (K > 6u);

struct Src6
{
    ulong d[1];
};

constant bool _272 = (K > 7u);

struct Src7
{
    ulong d[1];
};

constant bool SCALE_tmp [[function_constant(3)]];
constant bool SCALE = is_function_constant_defined(SCALE_tmp) ? SCALE_tmp : false;

struct Dst0
{
    ulong d[1];
};

constant uint M_tmp [[function_constant(5)]];
constant uint M = is_function_constant_defined(M_tmp) ? M_tmp : 1u;
constant bool _307 = (M > 1u);

struct Dst1
{
    ulong d[1];
};

constant bool _320 = (M > 2u);

struct Dst2
{
    ulong d[1];
};

constant bool _333 = (M > 3u);

struct Dst3
{
    ulong d[1];
};

constant bool _346 = (M > 4u);

struct Dst4
{
    ulong d[1];
};

constant bool _359 = (M > 5u);

struct Dst5
{
    ulong d[1];
};

constant bool _372 = (M > 6u);

struct Dst6
{
    ulong d[1];
};

constant bool _385 = (M > 7u);

struct Dst7
{
    ulong d[1];
};

static inline __attribute__((always_inline))
ulong combine(thread const ulong& a, thread const ulong& b)
{
    if (_21)
    {
        return a + b;
    }
    if (_29)
    {
        return a * b;
    }
    if (_37)
    {
        return max(a, b);
    }
    if (_45)
    {
        return min(a, b);
    }
    if (_53)
    {
        return a & b;
    }
    if (_61)
    {
        return a | b;
    }
    if (_69)
    {
        return a ^ b;
    }
    if (_77)
    {
        return ulong(a != 0ul) & ulong(b != 0ul);
    }
    if (_91)
    {
        return ulong(a != 0ul) | ulong(b != 0ul);
    }
    return ulong(a != 0ul) ^ ulong(b != 0ul);
}

static inline __attribute__((always_inline))
ulong scale_acc(thread const ulong& x, constant Params& pc)
{
    return x / ulong(pc.div);
}

kernel void main0(constant Params& pc [[buffer(0)]], device Dst0& d0 [[buffer(0)]], device Dst1& d1 [[buffer(1)]], device Dst2& d2 [[buffer(2)]], device Dst3& d3 [[buffer(3)]], device Dst4& d4 [[buffer(4)]], device Dst5& d5 [[buffer(5)]], device Dst6& d6 [[buffer(6)]], device Dst7& d7 [[buffer(7)]], const device Src0& s0 [[buffer(8)]], const device Src1& s1 [[buffer(9)]], const device Src2& s2 [[buffer(10)]], const device Src3& s3 [[buffer(11)]], const device Src4& s4 [[buffer(12)]], const device Src5& s5 [[buffer(13)]], const device Src6& s6 [[buffer(14)]], const device Src7& s7 [[buffer(15)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint _137 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint stride = _137, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        ulong acc = s0.d[pc.src_off[0] + i];
        if (_166)
        {
            ulong param = acc;
            ulong param_1 = s1.d[pc.src_off[1] + i];
            acc = combine(param, param_1);
        }
        if (_184)
        {
            ulong param_2 = acc;
            ulong param_3 = s2.d[pc.src_off[2] + i];
            acc = combine(param_2, param_3);
        }
        if (_201)
        {
            ulong param_4 = acc;
            ulong param_5 = s3.d[pc.src_off[3] + i];
            acc = combine(param_4, param_5);
        }
        if (_219)
        {
            ulong param_6 = acc;
            ulong param_7 = s4.d[pc.src_off[4] + i];
            acc = combine(param_6, param_7);
        }
        if (_236)
        {
            ulong param_8 = acc;
            ulong param_9 = s5.d[pc.src_off[5] + i];
            acc = combine(param_8, param_9);
        }
        if (_254)
        {
            ulong param_10 = acc;
            ulong param_11 = s6.d[pc.src_off[6] + i];
            acc = combine(param_10, param_11);
        }
        if (_272)
        {
            ulong param_12 = acc;
            ulong param_13 = s7.d[pc.src_off[7] + i];
            acc = combine(param_12, param_13);
        }
        if (SCALE)
        {
            ulong param_14 = acc;
            acc = scale_acc(param_14, pc);
        }
        d0.d[pc.dst_off[0] + i] = acc;
        if (_307)
        {
            d1.d[pc.dst_off[1] + i] = acc;
        }
        if (_320)
        {
            d2.d[pc.dst_off[2] + i] = acc;
        }
        if (_333)
        {
            d3.d[pc.dst_off[3] + i] = acc;
        }
        if (_346)
        {
            d4.d[pc.dst_off[4] + i] = acc;
        }
        if (_359)
        {
            d5.d[pc.dst_off[5] + i] = acc;
        }
        if (_372)
        {
            d6.d[pc.dst_off[6] + i] = acc;
        }
        if (_385)
        {
            d7.d[pc.dst_off[7] + i] = acc;
        }
    }
}

