#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

constant uint OP_tmp [[function_constant(1)]];
constant uint OP = is_function_constant_defined(OP_tmp) ? OP_tmp : 0u;
constant bool _17 = (OP == 0u);
constant bool _25 = (OP == 1u);
constant bool _33 = (OP == 2u);
constant bool _41 = (OP == 3u);
constant bool _49 = (OP == 4u);
constant bool _57 = (OP == 5u);
constant bool _65 = (OP == 6u);
constant bool _73 = (OP == 7u);
constant bool _87 = (OP == 8u);
constant uint _115_tmp [[function_constant(0)]];
constant uint _115 = is_function_constant_defined(_115_tmp) ? _115_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_115, 1u, 1u);

struct Params
{
    uint n;
    uint dst_off;
    uint src_off[8];
    uint scale;
    char _m4_pad[4];
    uint div;
};

struct Src0
{
    ulong d[1];
};

constant uint K_tmp [[function_constant(2)]];
constant uint K = is_function_constant_defined(K_tmp) ? K_tmp : 2u;
constant bool _153 = (K > 1u);

struct Src1
{
    ulong d[1];
};

constant bool _171 = (K > 2u);

struct Src2
{
    ulong d[1];
};

constant bool _188 = (K > 3u);

struct Src3
{
    ulong d[1];
};

constant bool _206 = (K > 4u);

struct Src4
{
    ulong d[1];
};

constant bool _224 = (K > 5u);

struct Src5
{
    ulong d[1];
};

constant bool _242 = (K > 6u);

struct Src6
{
    ulong d[1];
};

constant bool _260 = (K > 7u);

struct Src7
{
    ulong d[1];
};

struct Dst
{
    ulong d[1];
};

constant bool SCALE_tmp [[function_constant(3)]];
constant bool SCALE = is_function_constant_defined(SCALE_tmp) ? SCALE_tmp : false;

static inline __attribute__((always_inline))
ulong combine(thread const ulong& a, thread const ulong& b)
{
    if (_17)
    {
        return a + b;
    }
    if (_25)
    {
        return a * b;
    }
    if (_33)
    {
        return max(a, b);
    }
    if (_41)
    {
        return min(a, b);
    }
    if (_49)
    {
        return a & b;
    }
    if (_57)
    {
        return a | b;
    }
    if (_65)
    {
        return a ^ b;
    }
    if (_73)
    {
        return ulong(a != 0ul) & ulong(b != 0ul);
    }
    if (_87)
    {
        return ulong(a != 0ul) | ulong(b != 0ul);
    }
    return ulong(a != 0ul) ^ ulong(b != 0ul);
}

kernel void main0(constant Params& pc [[buffer(0)]], device Dst& dst [[buffer(0)]], const device Src0& s0 [[buffer(1)]], const device Src1& s1 [[buffer(2)]], const device Src2& s2 [[buffer(3)]], const device Src3& s3 [[buffer(4)]], const device Src4& s4 [[buffer(5)]], const device Src5& s5 [[buffer(6)]], const device Src6& s6 [[buffer(7)]], const device Src7& s7 [[buffer(8)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint _118 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint stride = _118, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        ulong acc = s0.d[pc.src_off[0] + i];
        if (_153)
        {
            ulong param = acc;
            ulong param_1 = s1.d[pc.src_off[1] + i];
            acc = combine(param, param_1);
        }
        if (_171)
        {
            ulong param_2 = acc;
            ulong param_3 = s2.d[pc.src_off[2] + i];
            acc = combine(param_2, param_3);
        }
        if (_188)
        {
            ulong param_4 = acc;
            ulong param_5 = s3.d[pc.src_off[3] + i];
            acc = combine(param_4, param_5);
        }
        if (_206)
        {
            ulong param_6 = acc;
            ulong param_7 = s4.d[pc.src_off[4] + i];
            acc = combine(param_6, param_7);
        }
        if (_224)
        {
            ulong param_8 = acc;
            ulong param_9 = s5.d[pc.src_off[5] + i];
            acc = combine(param_8, param_9);
        }
        if (_242)
        {
            ulong param_10 = acc;
            ulong param_11 = s6.d[pc.src_off[6] + i];
            acc = combine(param_10, param_11);
        }
        if (_260)
        {
            ulong param_12 = acc;
            ulong param_13 = s7.d[pc.src_off[7] + i];
            acc = combine(param_12, param_13);
        }
        dst.d[pc.dst_off + i] = acc;
    }
}

