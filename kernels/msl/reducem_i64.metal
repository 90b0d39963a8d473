#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

constant uint OP_tmp [[function_constant(1)]];
constant uint OP = is_function_constant_defined(OP_tmp) ? OP_tmp : 0u;
constant bool _21 = (OP == 0u);
constant bool _33 = (OP == 1u);
constant bool _44 = (OP == 2u);
constant bool _52 = (OP == 3u);
constant bool _60 = (OP == 4u);
constant bool _68 = (OP == 5u);
constant bool _76 = (OP == 6u);
constant bool _84 = (OP == 7u);
constant bool _100 = (OP == 8u);

struct Params
{
    uint n;
    uint dst_off[8];
    uint src_off[8];
    char _m3_pad[4];
    int scale;
    char _m4_pad[4];
    uint div;
};

constant uint _163_tmp [[function_constant(0)]];
constant uint _163 = is_function_constant_defined(_163_tmp) ? _163_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_163, 1u, 1u);

struct Src0
{
    long d[1];
};

constant uint K_tmp [[function_constant(2)]];
constant uint K = is_function_constant_defined(K_tmp) ? K_tmp : 2u;
constant bool _195 = (K > 1u);

struct Src1
{
    long d[1];
};

constant bool _213 = (K > 2u);

struct Src2
{
    long d[1];
};

constant bool _230 = (K > 3u);

struct Src3
{
    long d[1];
};

constant bool _248 = (K > 4u);

struct Src4
{
    long d[1];
};

constant bool _265 = (K > 5u);

struct Src5
{
    long d[1];
};

constant bool _283 = (K > 6u);

struct Src6
{
    long d[1];
};

constant bool _301 = (K > 7u);

struct Src7
{
    long d[1];
};

constant bool SCALE_tmp [[function_constant(3)]];
constant bool SCALE = is_function_constant_defined(SCALE_tmp) ? SCALE_tmp : false;

struct Dst0
{
    long d[1];
};

constant uint M_tmp [[function_constant(5)]];
constant uint M = is_function_constant_defined(M_tmp) ? M_tmp : 1u;
constant bool _336 = (M > 1u);

struct Dst1
{
    long d[1];
};

constant bool _349 = (M > 2u);

struct Dst2
{
    long d[1];
};

constant bool _362 = (M > 3u);

struct Dst3
{
    long d[1];
};

constant bool _375 = (M > 4u);

struct Dst4
{
    long d[1];
};

constant bool _388 = (M > 5u);

struct Dst5
{
    long d[1];
};

constant bool _401 = (M > 6u);

struct Dst6
{
    long d[1];
};

constant bool _414 = (M > 7u);

struct Dst7
{
    long d[1];
};

static inline __attribute__((always_inline))
long combine(thread const long& a, thread const long& b)
{
    if (_21)
    {
        return long(ulong(a) + ulong(b));
    }
    if (_33)
    {
        return long(ulong(a) * ulong(b));
    }
    if (_44)
    {
        return max(a, b);
    }
    if (_52)
    {
        return min(a, b);
    }
    if (_60)
    {
        return a & b;
    }
    if (_68)
    {
        return a | b;
    }
    if (_76)
    {
        return a ^ b;
    }
    if (_84)
    {
        return long(ulong(a != 0l) & ulong(b != 0l));
    }
    if (_100)
    {
        return long(ulong(a != 0l) | ulong(b != 0l));
    }
    return long(ulong(a != 0l) ^ ulong(b != 0l));
}

static inline __attribute__((always_inline))
long scale_acc(thread const long& x, constant Params& pc)
{
    ulong m = ulong(x >> long(63));
    ulong q = ((ulong(x) ^ m) - m) / ulong(pc.div);
    return long((q ^ m) - m);
}

kernel void main0(constant Params& pc [[buffer(0)]], device Dst0& d0 [[buffer(0)]], device Dst1& d1 [[buffer(1)]], device Dst2& d2 [[buffer(2)]], device Dst3& d3 [[buffer(3)]], device Dst4& d4 [[buffer(4)]], device Dst5& d5 [[buffer(5)]], device Dst6& d6 [[buffer(6)]], device Dst7& d7 [[buffer(7)]], const device Src0& s0 [[buffer(8)]], const device Src1& s1 [[buffer(9)]], const device Src2& s2 [[buffer(10)]], const device Src3& s3 [[buffer(11)]], const device Src4& s4 [[buffer(12)]], const device Src5& s5 [[buffer(13)]], const device Src6& s6 [[buffer(14)]], const device Src7& s7 [[buffer(15)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint _166 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint stride = _166, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        long acc = s0.d[pc.src_off[0] + i];
        if (_195)
        {
            long param = acc;
            long param_1 = s1.d[pc.src_off[1] + i];
            acc = combine(param, param_1);
        }
        if (_213)
        {
            long param_2 = acc;
            long param_3 = s2.d[pc.src_off[2] + i];
            acc = combine(param_2, param_3);
        }
        if (_230)
        {
            long param_4 = acc;
            long param_5 = s3.d[pc.src_off[3] + i];
            acc = combine(param_4, param_5);
        }
        if (_248)
        {
            long param_6 = acc;
            long param_7 = s4.d[pc.src_off[4] + i];
            acc = combine(param_6, param_7);
        }
        if (_265)
        {
            long param_8 = acc;
            long param_9 = s5.d[pc.src_off[5] + i];
            acc = combine(param_8, param_9);
        }
        if (_283)
        {
            long param_10 = acc;
            long param_11 = s6.d[pc.src_off[6] + i];
            acc = combine(param_10, param_11);
        }
        if (_301)
        {
            long param_12 = acc;
            long param_13 = s7.d[pc.src_off[7] + i];
            acc = combine(param_12, param_13);
        }
        if (SCALE)
        {
            long param_14 = acc;
            acc = scale_acc(param_14, pc);
        }
        d0.d[pc.dst_off[0] + i] = acc;
        if (_336)
        {
            d1.d[pc.dst_off[1] + i] = acc;
        }
        if (_349)
        {
            d2.d[pc.dst_off[2] + i] = acc;
        }
        if (_362)
        {
            d3.d[pc.dst_off[3] + i] = acc;
        }
        if (_375)
        {
            d4.d[pc.dst_off[4] + i] = acc;
        }
        if (_388)
        {
            d5.d[pc.dst_off[5] + i] = acc;
        }
        if (_401)
        {
            d6.d[pc.dst_off[6] + i] = acc;
        }
        if (_414)
        {
            d7.d[pc.dst_off[7] + i] = acc;
        }
    }
}

