#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

constant uint OP_tmp [[function_constant(1)]];
constant uint OP = is_function_constant_defined(OP_tmp) ? OP_tmp : 0u;
constant bool _36 = (OP == 0u);
constant bool _44 = (OP == 1u);
constant bool _71 = (OP == 2u);
constant bool _89 = (OP == 2u);
constant bool _107 = (OP == 0u);
constant bool _114 = (OP == 1u);
constant uint _158_tmp [[function_constant(0)]];
constant uint _158 = is_function_constant_defined(_158_tmp) ? _158_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_158, 1u, 1u);

struct Params
{
    uint n;
    uint dst_off;
    uint src_off[8];
    float scale;
};

struct Src0
{
    float4 d[1];
};

constant uint K_tmp [[function_constant(2)]];
constant uint K = is_function_constant_defined(K_tmp) ? K_tmp : 2u;
constant bool _195 = (K > 1u);

struct Src1
{
    float4 d[1];
};

constant bool _212 = (K > 2u);

struct Src2
{
    float4 d[1];
};

constant bool _230 = (K > 3u);

struct Src3
{
    float4 d[1];
};

constant bool _249 = (K > 4u);

struct Src4
{
    float4 d[1];
};

constant bool _267 = (K > 5u);

struct Src5
{
    float4 d[1];
};

constant bool _286 = (K > 6u);

struct Src6
{
    float4 d[1];
};

constant bool _305 = (K > 7u);

struct Src7
{
    float4 d[1];
};

constant bool SCALE_tmp [[function_constant(3)]];
constant bool SCALE = is_function_constant_defined(SCALE_tmp) ? SCALE_tmp : false;

struct Dst
{
    float4 d[1];
};

static inline __attribute__((always_inline))
bool negative(thread const float& x)
{
    return (as_type<uint>(x) >> uint(31)) != 0u;
}

static inline __attribute__((always_inline))
float combine1(thread const float& a, thread const float& b)
{
    if (_36)
    {
        return a + b;
    }
    if (_44)
    {
        return a * b;
    }
    if (isnan(a))
    {
        return a;
    }
    if (isnan(b))
    {
        return b;
    }
    if (a == b)
    {
        bool _72;
        if (_71)
        {
            float param = a;
            _72 = !negative(param);
        }
        else
        {
            float param_1 = a;
            _72 = negative(param_1);
        }
        bool pick_a = _72;
        return pick_a ? a : b;
    }
    if (_89)
    {
        return (a > b) ? a : b;
    }
    return (a < b) ? a : b;
}

static inline __attribute__((always_inline))
float4 combine(thread const float4& a, thread const float4& b)
{
    if (_107)
    {
        return a + b;
    }
    if (_114)
    {
        return a * b;
    }
    float4 r;
    for (int c = 0; c < 4; c++)
    {
        float param = a[c];
        float param_1 = b[c];
        r[c] = combine1(param, param_1);
    }
    return r;
}

kernel void main0(constant Params& pc [[buffer(0)]], device Dst& dst [[buffer(0)]], const device Src0& s0 [[buffer(1)]], const device Src1& s1 [[buffer(2)]], const device Src2& s2 [[buffer(3)]], const device Src3& s3 [[buffer(4)]], const device Src4& s4 [[buffer(5)]], const device Src5& s5 [[buffer(6)]], const device Src6& s6 [[buffer(7)]], const device Src7& s7 [[buffer(8)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint _161 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint stride = _161, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        float4 acc = s0.d[pc.src_off[0] + i];
        if (_195)
        {
            float4 param = acc;
            float4 param_1 = s1.d[pc.src_off[1] + i];
            acc = combine(param, param_1);
        }
        if (_212)
        {
            float4 param_2 = acc;
            float4 param_3 = s2.d[pc.src_off[2] + i];
            acc = combine(param_2, param_3);
        }
        if (_230)
        {
            float4 param_4 = acc;
            float4 param_5 = s3.d[pc.src_off[3] + i];
            acc = combine(param_4, param_5);
        }
        if (_249)
        {
            float4 param_6 = acc;
            float4 param_7 = s4.d[pc.src_off[4] + i];
            acc = combine(param_6, param_7);
        }
        if (_267)
        {
            float4 param_8 = acc;
            float4 param_9 = s5.d[pc.src_off[5] + i];
            acc = combine(param_8, param_9);
        }
        if (_286)
        {
            float4 param_10 = acc;
            float4 param_11 = s6.d[pc.src_off[6] + i];
            acc = combine(param_10, param_11);
        }
        if (_305)
        {
            float4 param_12 = acc;
            float4 param_13 = s7.d[pc.src_off[7] + i];
            acc = combine(param_12, param_13);
        }
        if (SCALE)
        {
            acc *= pc.scale;
        }
        dst.d[pc.dst_off + i] = acc;
    }
}

