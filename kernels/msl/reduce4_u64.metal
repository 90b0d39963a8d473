#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

constant uint OP_tmp [[function_constant(1)]];
constant uint OP = is_function_constant_defined(OP_tmp) ? OP_tmp : 0u;
constant bool _22 = (OP == 0u);
constant bool _39 = (OP == 1u);
constant bool _56 = (OP == 2u);
constant bool _64 = (OP == 3u);
constant bool _72 = (OP == 4u);
constant bool _80 = (OP == 5u);
constant bool _88 = (OP == 6u);
constant bool _96 = (OP == 7u);
constant bool _116 = (OP == 8u);

struct Params
{
    uint n;
    uint dst_off;
    uint src_off[8];
    uint scale;
    char _m4_pad[4];
    uint div;
};

constant uint _171_tmp [[function_constant(0)]];
constant uint _171 = is_function_constant_defined(_171_tmp) ? _171_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_171, 1u, 1u);

struct Src0
{
    ulong2 d[1];
};

constant uint K_tmp [[function_constant(2)]];
constant uint K = is_function_constant_defined(K_tmp) ? K_tmp : 2u;
constant bool _203 = (K > 1u);

struct Src1
{
    ulong2 d[1];
};

constant bool _221 = (K > 2u);

struct Src2
{
    ulong2 d[1];
};

constant bool _238 = (K > 3u);

struct Src3
{
    ulong2 d[1];
};

constant bool _256 = (K > 4u);

struct Src4
{
    ulong2 d[1];
};

constant bool _273 = (K > 5u);

struct Src5
{
    ulong2 d[1];
};

constant bool _291 = (K > 6u);

struct Src6
{
    ulong2 d[1];
};

constant bool _309 = (K > 7u);

struct Src7
{
    ulong2 d[1];
};

constant bool SCALE_tmp [[function_constant(3)]];
constant bool SCALE = is_function_constant_defined(SCALE_tmp) ? SCALE_tmp : false;

struct Dst
{
    ulong2 d[1];
};

static inline __attribute__((always_inline))
ulong2 combine(thread const ulong2& a, thread const ulong2& b)
{
    if (_22)
    {
        return ulong2(ulong2(a) + ulong2(b));
    }
    if (_39)
    {
        return ulong2(ulong2(a) * ulong2(b));
    }
    if (_56)
    {
        return max(a, b);
    }
    if (_64)
    {
        return min(a, b);
    }
    if (_72)
    {
        return a & b;
    }
    if (_80)
    {
        return a | b;
    }
    if (_88)
    {
        return a ^ b;
    }
    if (_96)
    {
        return ulong2(ulong2(a != ulong2(0ul)) & ulong2(b != ulong2(0ul)));
    }
    if (_116)
    {
        return ulong2(ulong2(a != ulong2(0ul)) | ulong2(b != ulong2(0ul)));
    }
    return ulong2(ulong2(a != ulong2(0ul)) ^ ulong2(b != ulong2(0ul)));
}

static inline __attribute__((always_inline))
ulong2 scale_acc(thread const ulong2& x, constant Params& pc)
{
    return ulong2(ulong2(x) / ulong2(ulong(pc.div)));
}

kernel void main0(constant Params& pc [[buffer(0)]], device Dst& dst [[buffer(0)]], const device Src0& s0 [[buffer(1)]], const device Src1& s1 [[buffer(2)]], const device Src2& s2 [[buffer(3)]], const device Src3& s3 [[buffer(4)]], const device Src4& s4 [[buffer(5)]], const device Src5& s5 [[buffer(6)]], const device Src6& s6 [[buffer(7)]], const device Src7& s7 [[buffer(8)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint _174 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint stride = _174, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        ulong2 acc = s0.d[pc.src_off[0] + i];
        if (_203)
        {
            ulong2 param = acc;
            ulong2 param_1 = s1.d[pc.src_off[1] + i];
            acc = combine(param, param_1);
        }
        if (_221)
        {
            ulong2 param_2 = acc;
            ulong2 param_3 = s2.d[pc.src_off[2] + i];
            acc = combine(param_2, param_3);
        }
        if (_238)
        {
            ulong2 param_4 = acc;
            ulong2 param_5 = s3.d[pc.src_off[3] + i];
            acc = combine(param_4, param_5);
        }
        if (_256)
        {
            ulong2 param_6 = acc;
            ulong2 param_7 = s4.d[pc.src_off[4] + i];
            acc = combine(param_6, param_7);
        }
        if (_273)
        {
            ulong2 param_8 = acc;
            ulong2 param_9 = s5.d[pc.src_off[5] + i];
            acc = combine(param_8, param_9);
        }
        if (_291)
        {
            ulong2 param_10 = acc;
            ulong2 param_11 = s6.d[pc.src_off[6] + i];
            acc = combine(param_10, param_11);
        }
        if (_309)
        {
            ulong2 param_12 = acc;
            ulong2 param_13 = s7.d[pc.src_off[7] + i];
            acc = combine(param_12, param_13);
        }
        if (SCALE)
        {
            ulong2 param_14 = acc;
            acc = scale_acc(param_14, pc);
        }
        dst.d[pc.dst_off + i] = acc;
    }
}

