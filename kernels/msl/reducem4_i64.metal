#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

constant uint OP_tmp [[function_constant(1)]];
constant uint OP = is_function_constant_defined(OP_tmp) ? OP_tmp : 0u;
constant bool _22 = (OP == 0u);
constant bool _35 = (OP == 1u);
constant bool _46 = (OP == 2u);
constant bool _54 = (OP == 3u);
constant bool _62 = (OP == 4u);
constant bool _70 = (OP == 5u);
constant bool _78 = (OP == 6u);
constant bool _86 = (OP == 7u);
constant bool _106 = (OP == 8u);

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

constant uint _172_tmp [[function_constant(0)]];
constant uint _172 = is_function_constant_defined(_172_tmp) ? _172_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_172, 1u, 1u);

struct Src0
{
    long2 d[1];
};

constant uint K_tmp [[function_constant(2)]];
constant uint K = is_function_constant_defined(K_tmp) ? K_tmp : 2u;
constant bool _204 = (K > 1u);

struct Src1
{
    long2 d[1];
};

constant bool _222 = (K > 2u);

struct Src2
{
    long2 d[1];
};

constant bool _239 = (K > 3u);

struct Src3
{
    long2 d[1];
};

constant bool _257 = (K > 4u);

struct Src4
{
    long2 d[1];
};

constant bool _274 = (K > 5u);

struct Src5
{
    long2 d[1];
};

constant bool _292 = (K > 6u);

struct Src6
{
    long2 d[1];
};

constant bool _310 = (K > 7u);

struct Src7
{
    long2 d[1];
};

constant bool SCALE_tmp [[function_constant(3)]];
constant bool SCALE = is_function_constant_defined(SCALE_tmp) ? SCALE_tmp : false;

struct Dst0
{
    long2 d[1];
};

constant uint M_tmp [[function_constant(5)]];
constant uint M = is_function_constant_defined(M_tmp) ? M_tmp : 1u;
constant bool _345 = (M > 1u);

struct Dst1
{
    long2 d[1];
};

constant bool _358 = (M > 2u);

struct Dst2
{
    long2 d[1];
};

constant bool _371 = (M > 3u);

struct Dst3
{
    long2 d[1];
};

constant bool _384 = (M > 4u);

struct Dst4
{
    long2 d[1];
};

constant bool _397 = (M > 5u);

struct Dst5
{
    long2 d[1];
};

constant bool _410 = (M > 6u);

struct Dst6
{
    long2 d[1];
};

constant bool _423 = (M > 7u);

struct Dst7
{
    long2 d[1];
};

static inline __attribute__((always_inline))
long2 combine(thread const long2& a, thread const long2& b)
{
    if (_22)
    {
        return long2(ulong2(a) + ulong2(b));
    }
    if (_35)
    {
        return long2(ulong2(a) * ulong2(b));
    }
    if (_46)
    {
        return max(a, b);
    }
    if (_54)
    {
        return min(a, b);
    }
    if (_62)
    {
        return a & b;
    }
    if (_70)
    {
        return a | b;
    }
    if (_78)
    {
        return a ^ b;
    }
    if (_86)
    {
        return long2(ulong2(a != long2(0l)) & ulong2(b != long2(0l)));
    }
    if (_106)
    {
        return long2(ulong2(a != long2(0l)) | ulong2(b != long2(0l)));
    }
    return long2(ulong2(a != long2(0l)) ^ ulong2(b != long2(0l)));
}

static inline __attribute__((always_inline))
long2 scale_acc(thread const long2& x, constant Params& pc)
{
    ulong2 m = ulong2(x >> long2(int2(63)));
    ulong2 q = ((ulong2(x) ^ m) - m) / ulong2(ulong(pc.div));
    return long2((q ^ m) - m);
}

kernel void main0(constant Params& pc [[buffer(0)]], device Dst0& d0 [[buffer(0)]], device Dst1& d1 [[buffer(1)]], device Dst2& d2 [[buffer(2)]], device Dst3& d3 [[buffer(3)]], device Dst4& d4 [[buffer(4)]], device Dst5& d5 [[buffer(5)]], device Dst6& d6 [[buffer(6)]], device Dst7& d7 [[buffer(7)]], const device Src0& s0 [[buffer(8)]], const device Src1& s1 [[buffer(9)]], const device Src2& s2 [[buffer(10)]], const device Src3& s3 [[buffer(11)]], const device Src4& s4 [[buffer(12)]], const device Src5& s5 [[buffer(13)]], const device Src6& s6 [[buffer(14)]], const device Src7& s7 [[buffer(15)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint _175 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint stride = _175, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        long2 acc = s0.d[pc.src_off[0] + i];
        if (_204)
        {
            long2 param = acc;
            long2 param_1 = s1.d[pc.src_off[1] + i];
            acc = combine(param, param_1);
        }
        if (_222)
        {
            long2 param_2 = acc;
            long2 param_3 = s2.d[pc.src_off[2] + i];
            acc = combine(param_2, param_3);
        }
        if (_239)
        {
            long2 param_4 = acc;
            long2 param_5 = s3.d[pc.src_off[3] + i];
            acc = combine(param_4, param_5);
        }
        if (_257)
        {
            long2 param_6 = acc;
            long2 param_7 = s4.d[pc.src_off[4] + i];
            acc = combine(param_6, param_7);
        }
        if (_274)
        {
            long2 param_8 = acc;
            long2 param_9 = s5.d[pc.src_off[5] + i];
            acc = combine(param_8, param_9);
        }
        if (_292)
        {
            long2 param_10 = acc;
            long2 param_11 = s6.d[pc.src_off[6] + i];
            acc = combine(param_10, param_11);
        }
        if (_310)
        {
            long2 param_12 = acc;
            long2 param_13 = s7.d[pc.src_off[7] + i];
            acc = combine(param_12, param_13);
        }
        if (SCALE)
        {
            long2 param_14 = acc;
            acc = scale_acc(param_14, pc);
        }
        d0.d[pc.dst_off[0] + i] = acc;
        if (_345)
        {
            d1.d[pc.dst_off[1] + i] = acc;
        }
        if (_358)
        {
            d2.d[pc.dst_off[2] + i] = acc;
        }
        if (_371)
        {
            d3.d[pc.dst_off[3] + i] = acc;
        }
        if (_384)
        {
            d4.d[pc.dst_off[4] + i] = acc;
        }
        if (_397)
        {
            d5.d[pc.dst_off[5] + i] = acc;
        }
        if (_410)
        {
            d6.d[pc.dst_off[6] + i] = acc;
        }
        if (_423)
        {
            d7.d[pc.dst_off[7] + i] = acc;
        }
    }
}

