#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

constant uint OP_tmp [[function_constant(1)]];
constant uint OP = is_function_constant_defined(OP_tmp) ? OP_tmp : 0u;
constant bool _17 = (OP == 0u);
constant bool _29 = (OP == 1u);
constant bool _40 = (OP == 2u);
constant bool _48 = (OP == 3u);
constant bool _56 = (OP == 4u);
constant bool _64 = (OP == 5u);
constant bool _72 = (OP == 6u);
constant bool _80 = (OP == 7u);
constant bool _96 = (OP == 8u);
constant uint _126_tmp [[function_constant(0)]];
constant uint _126 = is_function_constant_defined(_126_tmp) ? _126_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_126, 1u, 1u);

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
    long d[1];
};

constant uint K_tmp [[function_constant(2)]];
constant uint K = is_function_constant_defined(K_tmp) ? K_tmp : 2u;
constant bool _164 = (K > 1u);

struct Src1
{
    long d[1];
};

constant bool _182 = (K > 2u);

struct Src2
{
    long d[1];
};

constant bool _199 = (K > 3u);

struct Src3
{
    long d[1];
};

constant bool _217 = (K > 4u);

struct Src4
{
    long d[1];
};

constant bool _235 = (K > 5u);

struct Src5
{
    long d[1];
};

constant bool _253 = (K > 6u);

struct Src6
{
    long d[1];
};

constant bool _271 = (K > 7u);

struct Src7
{
    long d[1];
};

struct Dst
{
    long d[1];
};

constant bool SCALE_tmp [[function_constant(3)]];
constant bool SCALE = is_function_constant_defined(SCALE_tmp) ? SCALE_tmp : false;

static inline __attribute__((always_inline))
long combine(thread const long& a, thread const long& b)
{
    if (_17)
    {
        return long(ulong(a) + ulong(b));
    }
    if (_29)
    {
        return long(ulong(a) * ulong(b));
    }
    if (_40)
    {
        return max(a, b);
    }
    if (_48)
    {
        return min(a, b);
    }
    if (_56)
    {
        return a & b;
    }
    if (_64)
    {
        return a | b;
    }
    if (_72)
    {
        return a ^ b;
    }
    if (_80)
    {
        return long(ulong(a != 0l) & ulong(b != 0l));
    }
    if (_96)
    {
        return long(ulong(a != 0l) | ulong(b != 0l));
    }
    return long(ulong(a != 0l) ^ ulong(b != 0l));
}

kernel void main0(constant Params& pc [[buffer(0)]], device Dst& dst [[buffer(0)]], const device Src0& s0 [[buffer(1)]], const device Src1& s1 [[buffer(2)]], const device Src2& s2 [[buffer(3)]], const device Src3& s3 [[buffer(4)]], const device Src4& s4 [[buffer(5)]], const device Src5& s5 [[buffer(6)]], const device Src6& s6 [[buffer(7)]], const device Src7& s7 [[buffer(8)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint _129 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint stride = _129, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        long acc = s0.d[pc.src_off[0] + i];
        if (_164)
        {
            long param = acc;
            long param_1 = s1.d[pc.src_off[1] + i];
            acc = combine(param, param_1);
        }
        if (_182)
        {
            long param_2 = acc;
            long param_3 = s2.d[pc.src_off[2] + i];
            acc = combine(param_2, param_3);
        }
        if (_199)
        {
            long param_4 = acc;
            long param_5 = s3.d[pc.src_off[3] + i];
            acc = combine(param_4, param_5);
        }
        if (_217)
        {
            long param_6 = acc;
            long param_7 = s4.d[pc.src_off[4] + i];
            acc = combine(param_6, param_7);
        }
        if (_235)
        {
            long param_8 = acc;
            long param_9 = s5.d[pc.src_off[5] + i];
            acc = combine(param_8, param_9);
        }
        if (_253)
        {
            long param_10 = acc;
            long param_11 = s6.d[pc.src_off[6] + i];
            acc = combine(param_10, param_11);
        }
        if (_271)
        {
            long param_12 = acc;
            long param_13 = s7.d[pc.src_off[7] + i];
            acc = combine(param_12, param_13);
        }
        dst.d[pc.dst_off + i] = acc;
    }
}

