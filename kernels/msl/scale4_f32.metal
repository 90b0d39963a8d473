#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

template<typename T>
[[clang::optnone]] T spvFAdd(T l, T r)
{
    return fma(T(1), l, r);
}

template<typename T>
[[clang::optnone]] T spvFSub(T l, T r)
{
    return fma(T(-1), r, l);
}

constant uint _79_tmp [[function_constant(0)]];
constant uint _79 = is_function_constant_defined(_79_tmp) ? _79_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_79, 1u, 1u);

struct Params
{
    uint n;
    uint dst_off;
    uint src_off;
    uint div;
    float scale;
};

struct Src
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
float4 high_bits(thread const float4& v)
{
    return as_type<float4>(as_type<uint4>(v) & uint4(4294963200u));
}

static inline __attribute__((always_inline))
float4 divide(thread const float4& x, thread const uint& div, thread const float& r)
{
    float n = float(div);
    float4 q = x * r;
    float4 param = q;
    float4 qh = high_bits(param);
    float4 ql = spvFSub(q, qh);
    float4 e = spvFAdd(spvFSub(qh * n, x), ql * n);
    float4 q1 = spvFSub(q, e * r);
    return select(q1, q, isinf(q));
}

kernel void main0(constant Params& pc [[buffer(0)]], device Dst& dst [[buffer(0)]], const device Src& src [[buffer(1)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint _83 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    float4 _123;
    for (uint stride = _83, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        float4 v = src.d[pc.src_off + i];
        if (SCALE)
        {
            if (pc.div != 0u)
            {
                float4 param = v;
                uint param_1 = pc.div;
                float param_2 = pc.scale;
                _123 = divide(param, param_1, param_2);
            }
            else
            {
                _123 = v * pc.scale;
            }
            v = _123;
        }
        dst.d[pc.dst_off + i] = v;
    }
}

