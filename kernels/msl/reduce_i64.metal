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
    uint dst_off;
    uint src_off[8];
    int scale;
    char _m4_pad[4];
    uint div;
};

constant uint _162_tmp [[function_constant(0)]];
constant uint _162 = is_function_constant_defined(_162_tmp) ? _162_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_162, 1u, 1u);

struct Src0
{
    long d[1];
};

constant uint K_tmp [[function_constant(2)]];
constant uint K = is_function_constant_defined(K_tmp) ? K_tmp : 2u;
constant bool _194 = (K > 1u);

struct Src1
{
    long d[1];
};

constant bool _212 = (K > 2u);

struct Src2
{
    long d[1];
};

constant bool _229 = (K > 3u);

struct Src3
{
    long d[1];
};

constant bool _247 = (K > 4u);

struct Src4
{
    long d[1];
};

constant bool _264 = (K > 5u);

struct Src5
{
    long d[1];
};

constant bool _282 = (K > 6u);

struct Src6
{
    long d[1];
};

constant bool _300 = (K > 7u);

struct Src7
{
    long d[1];
};

constant bool SCALE_tmp [[function_constant(3)]];
constant bool SCALE = is_function_constant_defined(SCALE_tmp) ? SCALE_tmp : false;

struct Dst
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

kernel void main0(constant Params& pc [[buffer(0)]], device Dst& dst [[buffer(0)]], const device Src0& s0 [[buffer(1)]], const device Src1& s1 [[buffer(2)]], const device Src2& s2 [[buffer(3)]], const device Src3& s3 [[buffer(4)]], const device Src4& s4 [[buffer(5)]], const device Src5& s5 [[buffer(6)]], const device Src6& s6 [[buffer(7)]], const device Src7& s7 [[buffer(8)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint _165 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint stride = _165, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        long acc = s0.d[pc.src_off[0] + i];
        if (_194)
        {
            long param = acc;
            long param_1 = s1.d[pc.src_off[1] + i];
            acc = combine(param, param_1);
        }
        if (_212)
        {
            long param_2 = acc;
            long param_3 = s2.d[pc.src_off[2] + i];
            acc = combine(param_2, param_3);
        }
        if (_229)
        {
            long param_4 = acc;
            long param_5 = s3.d[pc.src_off[3] + i];
            acc = combine(param_4, param_5);
        }
        if (_247)
        {
            long param_6 = acc;
            long param_7 = s4.d[pc.src_off[4] + i];
            acc = combine(param_6, param_7);
        }
        if (_264)
        {
            long param_8 = acc;
            long param_9 = s5.d[pc.src_off[5] + i];
            acc = combine(param_8, param_9);
        }
        if (_282)
        {
            long param_10 = acc;
            long param_11 = s6.d[pc.src_off[6] + i];
            acc = combine(param_10, param_11);
        }
        if (_300)
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
        dst.d[pc.dst_off + i] = acc;
    }
}

