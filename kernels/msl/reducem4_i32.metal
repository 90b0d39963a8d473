#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

constant uint OP_tmp [[function_constant(1)]];
constant uint OP = is_function_constant_defined(OP_tmp) ? OP_tmp : 0u;
constant bool _22 = (OP == 0u);
constant bool _34 = (OP == 1u);
constant bool _45 = (OP == 2u);
constant bool _53 = (OP == 3u);
constant bool _61 = (OP == 4u);
constant bool _69 = (OP == 5u);
constant bool _77 = (OP == 6u);
constant bool _85 = (OP == 7u);
constant bool _103 = (OP == 8u);

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

constant uint _166_tmp [[function_constant(0)]];
constant uint _166 = is_function_constant_defined(_166_tmp) ? _166_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_166, 1u, 1u);

struct Src0
{
    int4 d[1];
};

constant uint K_tmp [[function_constant(2)]];
constant uint K = is_function_constant_defined(K_tmp) ? K_tmp : 2u;
constant bool _197 = (K > 1u);

struct Src1
{
    int4 d[1];
};

constant bool _215 = (K > 2u);

struct Src2
{
    int4 d[1];
};

constant bool _232 = (K > 3u);

struct Src3
{
    int4 d[1];
};

constant bool _250 = (K > 4u);

struct Src4
{
    int4 d[1];
};

constant bool _267 = (K > 5u);

struct Src5
{
    int4 d[1];
};

constant bool _285 = (K > 6u);

struct Src6
{
    int4 d[1];
};

constant bool _303 = (K > 7u);

struct Src7
{
    int4 d[1];
};

constant bool SCALE_tmp [[function_constant(3)]];
constant bool SCALE = is_function_constant_defined(SCALE_tmp) ? SCALE_tmp : false;

struct Dst0
{
    int4 d[1];
};

constant uint M_tmp [[function_constant(5)]];
constant uint M = is_function_constant_defined(M_tmp) ? M_tmp : 1u;
constant bool _338 = (M > 1u);

struct Dst1
{
    int4 d[1];
};

constant bool _351 = (M > 2u);

struct Dst2
{
    int4 d[1];
};

constant bool _364 = (M > 3u);

struct Dst3
{
    int4 d[1];
};

constant bool _377 = (M > 4u);

struct Dst4
{
    int4 d[1];
};

constant bool _390 = (M > 5u);

struct Dst5
{
    int4 d[1];
};

constant bool _403 = (M > 6u);

struct Dst6
{
    int4 d[1];
};

constant bool _416 = (M > 7u);

struct Dst7
{
    int4 d[1];
};

static inline __attribute__((always_inline))
int4 combine(thread const int4& a, thread const int4& b)
{
    if (_22)
    {
        return int4(uint4(a) + uint4(b));
    }
    if (_34)
    {
        return int4(uint4(a) * uint4(b));
    }
    if (_45)
    {
        return max(a, b);
    }
    if (_53)
    {
        return min(a, b);
    }
    if (_61)
    {
        return a & b;
    }
    if (_69)
    {
        return a | b;
    }
    if (_77)
    {
        return a ^ b;
    }
    if (_85)
    {
        return int4(uint4(a != int4(0)) & uint4(b != int4(0)));
    }
    if (_103)
    {
        return int4(uint4(a != int4(0)) | uint4(b != int4(0)));
    }
    return int4(uint4(a != int4(0)) ^ uint4(b != int4(0)));
}

static inline __attribute__((always_inline))
int4 scale_acc(thread const int4& x, constant Params& pc)
{
    uint4 m = uint4(x >> int4(31));
    uint4 q = ((uint4(x) ^ m) - m) / uint4(pc.div);
    return int4((q ^ m) - m);
}

kernel void main0(constant Params& pc [[buffer(0)]], device Dst0& d0 [[buffer(0)]], device Dst1& d1 [[buffer(1)]], device Dst2& d2 [[buffer(2)]], device Dst3& d3 [[buffer(3)]], device Dst4& d4 [[buffer(4)]], device Dst5& d5 [[buffer(5)]], device Dst6& d6 [[buffer(6)]], device Dst7& d7 [[buffer(7)]], const device Src0& s0 [[buffer(8)]], const device Src1& s1 [[buffer(9)]], const device Src2& s2 [[buffer(10)]], const device Src3& s3 [[buffer(11)]], const device Src4& s4 [[buffer(12)]], const device Src5& s5 [[buffer(13)]], const device Src6& s6 [[buffer(14)]], const device Src7& s7 [[buffer(15)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint _169 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint stride = _169, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        int4 acc = s0.d[pc.src_off[0] + i];
        if (_197)
        {
            int4 param = acc;
            int4 param_1 = s1.d[pc.src_off[1] + i];
            acc = combine(param, param_1);
        }
        if (_215)
        {
            int4 param_2 = acc;
            int4 param_3 = s2.d[pc.src_off[2] + i];
            acc = combine(param_2, param_3);
        }
        if (_232)
        {
            int4 param_4 = acc;
            int4 param_5 = s3.d[pc.src_off[3] + i];
            acc = combine(param_4, param_5);
        }
        if (_250)
        {
            int4 param_6 = acc;
            int4 param_7 = s4.d[pc.src_off[4] + i];
            acc = combine(param_6, param_7);
        }
        if (_267)
        {
            int4 param_8 = acc;
            int4 param_9 = s5.d[pc.src_off[5] + i];
            acc = combine(param_8, param_9);
        }
        if (_285)
        {
            int4 param_10 = acc;
            int4 param_11 = s6.d[pc.src_off[6] + i];
            acc = combine(param_10, param_11);
        }
        if (_303)
        {
            int4 param_12 = acc;
            int4 param_13 = s7.d[pc.src_off[7] + i];
            acc = combine(param_12, param_13);
        }
        if (SCALE)
        {
            int4 param_14 = acc;
            acc = scale_acc(param_14, pc);
        }
        d0.d[pc.dst_off[0] + i] = acc;
        if (_338)
        {
            d1.d[pc.dst_off[1] + i] = acc;
        }
        if (_351)
        {
            d2.d[pc.dst_off[2] + i] = acc;
        }
        if (_364)
        {
            d3.d[pc.dst_off[3] + i] = acc;
        }
        if (_377)
        {
            d4.d[pc.dst_off[4] + i] = acc;
        }
        if (_390)
        {
            d5.d[pc.dst_off[5] + i] = acc;
        }
        if (_403)
        {
            d6.d[pc.dst_off[6] + i] = acc;
        }
        if (_416)
        {
            d7.d[pc.dst_off[7] + i] = acc;
        }
    }
}

