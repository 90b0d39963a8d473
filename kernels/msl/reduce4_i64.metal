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
    uint dst_off;
    uint src_off[8];
    int scale;
    char _m4_pad[4];
    uint div;
};

constant uint _171_tmp [[function_constant(0)]];
constant uint _171 = is_function_constant_defined(_171_tmp) ? _171_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_171, 1u, 1u);

struct Src0
{
    long2 d[1];
};

constant uint K_tmp [[function_constant(2)]];
constant uint K = is_function_constant_defined(K_tmp) ? K_tmp : 2u;
constant bool _203 = (K > 1u);

struct Src1
{
    long2 d[1];
};

constant bool _221 = (K > 2u);

struct Src2
{
    long2 d[1];
};

constant bool _238 = (K > 3u);

struct Src3
{
    long2 d[1];
};

constant bool _256 = (K > 4u);

struct Src4
{
    long2 d[1];
};

constant bool _273 = (K > 5u);

struct Src5
{
    long2 d[1];
};

constant bool _291 = (K > 6u);

struct Src6
{
    long2 d[1];
};

constant bool _309 = (K > 7u);

struct Src7
{
    long2 d[1];
};

constant bool SCALE_tmp [[function_constant(3)]];
constant bool SCALE = is_function_constant_defined(SCALE_tmp) ? SCALE_tmp : false;

struct Dst
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

kernel void main0(constant Params& pc [[buffer(0)]], device Dst& dst [[buffer(0)]], const device Src0& s0 [[buffer(1)]], const device Src1& s1 [[buffer(2)]], const device Src2& s2 [[buffer(3)]], const device Src3& s3 [[buffer(4)]], const device Src4& s4 [[buffer(5)]], const device Src5& s5 [[buffer(6)]], const device Src6& s6 [[buffer(7)]], const device Src7& s7 [[buffer(8)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint _174 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint stride = _174, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        long2 acc = s0.d[pc.src_off[0] + i];
        if (_203)
        {
            long2 param = acc;
            long2 param_1 = s1.d[pc.src_off[1] + i];
            acc = combine(param, param_1);
        }
        if (_221)
        {
            long2 param_2 = acc;
            long2 param_3 = s2.d[pc.src_off[2] + i];
            acc = combine(param_2, param_3);
        }
        if (_238)
        {
            long2 param_4 = acc;
            long2 param_5 = s3.d[pc.src_off[3] + i];
            acc = combine(param_4, param_5);
        }
        if (_256)
        {
            long2 param_6 = acc;
            long2 param_7 = s4.d[pc.src_off[4] + i];
            acc = combine(param_6, param_7);
        }
        if (_273)
        {
            long2 param_8 = acc;
            long2 param_9 = s5.d[pc.src_off[5] + i];
            acc = combine(param_8, param_9);
        }
        if (_291)
        {
            long2 param_10 = acc;
            long2 param_11 = s6.d[pc.src_off[6] + i];
            acc = combine(param_10, param_11);
        }
        if (_309)
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
        dst.d[pc.dst_off + i] = acc;
    }
}

