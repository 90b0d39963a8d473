#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

constant uint OP_tmp [[function_constant(1)]];
constant uint OP = is_function_constant_defined(OP_tmp) ? OP_tmp : 0u;
constant bool _18 = (OP == 0u);
constant bool _30 = (OP == 1u);
constant bool _41 = (OP == 2u);
constant bool _49 = (OP == 3u);
constant bool _57 = (OP == 4u);
constant bool _65 = (OP == 5u);
constant bool _73 = (OP == 6u);
constant bool _81 = (OP == 7u);
constant bool _99 = (OP == 8u);
constant uint _129_tmp [[function_constant(0)]];
constant uint _129 = is_function_constant_defined(_129_tmp) ? _129_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_129, 1u, 1u);

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
    int4 d[1];
};

constant uint K_tmp [[function_constant(2)]];
constant uint K = is_function_constant_defined(K_tmp) ? K_tmp : 2u;
constant bool _165 = (K > 1u);

struct Src1
{
    int4 d[1];
};

constant bool _183 = (K > 2u);

struct Src2
{
    int4 d[1];
};

constant bool _200 = (K > 3u);

struct Src3
{
    int4 d[1];
};

constant bool _218 = (K > 4u);

struct Src4
{
    int4 d[1];
};

constant bool _236 = (K > 5u);

struct Src5
{
    int4 d[1];
};

constant bool _254 = (K > 6u);

struct Src6
{
    int4 d[1];
};

constant bool _272 = (K > 7u);

struct Src7
{
    int4 d[1];
};

struct Dst
{
    int4 d[1];
};

constant bool SCALE_tmp [[function_constant(3)]];
constant bool SCALE = is_function_constant_defined(SCALE_tmp) ? SCALE_tmp : false;

static inline __attribute__((always_inline))
int4 combine(thread const int4& a, thread const int4& b)
{
    if (_18)
    {
        return int4(uint4(a) + uint4(b));
    }
    if (_30)
    {
        return int4(uint4(a) * uint4(b));
    }
    if (_41)
    {
        return max(a, b);
    }
    if (_49)
    {
        return min(a, b);
    }
    if (_57)
    {
        return a & b;
    }
    if (_65)
    {
        return a | b;
    }
    if (_73)
    {
        return a ^ b;
    }
    if (_81)
    {
        return int4(uint4(a != int4(0)) & uint4(b != int4(0)));
    }
    if (_99)
    {
        return int4(uint4(a != int4(0)) | uint4(b != int4(0)));
    }
    return int4(uint4(a != int4(0)) ^ uint4(b != int4(0)));
}

kernel void main0(constant Params& pc [[buffer(0)]], device Dst& dst [[buffer(0)]], const device Src0& s0 [[buffer(1)]], const device Src1& s1 [[buffer(2)]], const device Src2& s2 [[buffer(3)]], const device Src3& s3 [[buffer(4)]], const device Src4& s4 [[buffer(5)]], const device Src5& s5 [[buffer(6)]], const device Src6& s6 [[buffer(7)]], const device Src7& s7 [[buffer(8)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint _132 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint stride = _132, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        int4 acc = s0.d[pc.src_off[0] + i];
        if (_165)
        {
            int4 param = acc;
            int4 param_1 = s1.d[pc.src_off[1] + i];
            acc = combine(param, param_1);
        }
        if (_183)
        {
            int4 param_2 = acc;
            int4 param_3 = s2.d[pc.src_off[2] + i];
            acc = combine(param_2, param_3);
        }
        if (_200)
        {
            int4 param_4 = acc;
            int4 param_5 = s3.d[pc.src_off[3] + i];
            acc = combine(param_4, param_5);
        }
        if (_218)
        {
            int4 param_6 = acc;
            int4 param_7 = s4.d[pc.src_off[4] + i];
            acc = combine(param_6, param_7);
        }
        if (_236)
        {
            int4 param_8 = acc;
            int4 param_9 = s5.d[pc.src_off[5] + i];
            acc = combine(param_8, param_9);
        }
        if (_254)
        {
            int4 param_10 = acc;
            int4 param_11 = s6.d[pc.src_off[6] + i];
            acc = combine(param_10, param_11);
        }
        if (_272)
        {
            int4 param_12 = acc;
            int4 param_13 = s7.d[pc.src_off[7] + i];
            acc = combine(param_12, param_13);
        }
        dst.d[pc.dst_off + i] = acc;
    }
}

