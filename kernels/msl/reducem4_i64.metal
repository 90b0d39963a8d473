#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

constant uint OP_tmp [[function_constant(1)]];
constant uint OP = is_function_constant_defined(OP_tmp) ? OP_tmp : 0u;
constant bool _18 = (OP == 0u);
constant bool _31 = (OP == 1u);
constant bool _42 = (OP == 2u);
constant bool _50 = (OP == 3u);
constant bool _58 = (OP == 4u);
constant bool _66 = (OP == 5u);
constant bool _74 = (OP == 6u);
constant bool _82 = (OP == 7u);
constant bool _102 = (OP == 8u);
constant uint _132_tmp [[function_constant(0)]];
constant uint _132 = is_function_constant_defined(_132_tmp) ? _132_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_132, 1u, 1u);

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

struct Src0
{
    long2 d[1];
};

constant uint K_tmp [[function_constant(2)]];
constant uint K = is_function_constant_defined(K_tmp) ? K_tmp : 2u;
constant bool _171 = (K > 1u);

struct Src1
{
    long2 d[1];
};

constant bool _189 = (K > 2u);

struct Src2
{
    long2 d[1];
};

constant bool _206 = (K > 3u);

struct Src3
{
    long2 d[1];
};

constant bool _224 = (K > 4u);

struct Src4
{
    long2 d[1];
};

constant bool _242 = (K > 5u);

struct Src5
{
    long2 d[1];
};

constant bool _260 = (K > 6u);

struct Src6
{
    long2 d[1];
};

constant bool _278 = (K > 7u);

struct Src7
{
    long2 d[1];
};

struct Dst0
{
    long2 d[1];
};

constant uint M_tmp [[function_constant(5)]];
constant uint M = is_function_constant_defined(M_tmp) ? M_tmp : 1u;
constant bool _307 = (M > 1u);

struct Dst1
{
    long2 d[1];
};

constant bool _320 = (M > 2u);

struct Dst2
{
    long2 d[1];
};

constant bool _333 = (M > 3u);

struct Dst3
{
    long2 d[1];
};

constant bool _346 = (M > 4u);

struct Dst4
{
    long2 d[1];
};

constant bool _359 = (M > 5u);

struct Dst5
{
    long2 d[1];
};

constant bool _372 = (M > 6u);

struct Dst6
{
    long2 d[1];
};

constant bool _385 = (M > 7u);

struct Dst7
{
    long2 d[1];
};

constant bool SCALE_tmp [[function_constant(3)]];
constant bool SCALE = is_function_constant_defined(SCALE_tmp) ? SCALE_tmp : false;

static inline __attribute__((always_inline))
long2 combine(thread const long2& a, thread const long2& b)
{
    if (_18)
    {
        return long2(ulong2(a) + ulong2(b));
    }
    if (_31)
    {
        return long2(ulong2(a) * ulong2(b));
    }
    if (_42)
    {
        return max(a, b);
    }
    if (_50)
    {
        return min(a, b);
    }
    if (_58)
    {
        return a & b;
    }
    if (_66)
    {
        return a | b;
    }
    if (_74)
    {
        return a ^ b;
    }
    if (_82)
    {
        return long2(ulong2(a != long2(0l)) & ulong2(b != long2(0l)));
    }
    if (_102)
    {
        return long2(ulong2(a != long2(0l)) | ulong2(b != long2(0l)));
    }
    return long2(ulong2(a != long2(0l)) ^ ulong2(b != long2(0l)));
}

kernel void main0(constant Params& pc [[buffer(0)]], device Dst0& d0 [[buffer(0)]], device Dst1& d1 [[buffer(1)]], device Dst2& d2 [[buffer(2)]], device Dst3& d3 [[buffer(3)]], device Dst4& d4 [[buffer(4)]], device Dst5& d5 [[buffer(5)]], device Dst6& d6 [[buffer(6)]], device Dst7& d7 [[buffer(7)]], const device Src0& s0 [[buffer(8)]], const device Src1& s1 [[buffer(9)]], const device Src2& s2 [[buffer(10)]], const device Src3& s3 [[buffer(11)]], const device Src4& s4 [[buffer(12)]], const device Src5& s5 [[buffer(13)]], const device Src6& s6 [[buffer(14)]], const device Src7& s7 [[buffer(15)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint _135 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint stride = _135, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        long2 acc = s0.d[pc.src_off[0] + i];
        if (_171)
        {
            long2 param = acc;
            long2 param_1 = s1.d[pc.src_off[1] + i];
            acc = combine(param, param_1);
        }
        if (_189)
        {
            long2 param_2 = acc;
            long2 param_3 = s2.d[pc.src_off[2] + i];
            acc = combine(param_2, param_3);
        }
        if (_206)
        {
            long2 param_4 = acc;
            long2 param_5 = s3.d[pc.src_off[3] + i];
            acc = combine(param_4, param_5);
        }
        if (_224)
        {
            long2 param_6 = acc;
            long2 param_7 = s4.d[pc.src_off[4] + i];
            acc = combine(param_6, param_7);
        }
        if (_242)
        {
            long2 param_8 = acc;
            long2 param_9 = s5.d[pc.src_off[5] + i];
            acc = combine(param_8, param_9);
        }
        if (_260)
        {
            long2 param_10 = acc;
            long2 param_11 = s6.d[pc.src_off[6] + i];
            acc = combine(param_10, param_11);
        }
        if (_278)
        {
            long2 param_12 = acc;
            long2 param_13 = s7.d[pc.src_off[7] + i];
            acc = combine(param_12, param_13);
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

