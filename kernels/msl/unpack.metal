#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

// Implementation of the unsigned GLSL findMSB() function
template<typename T>
inline T spvFindUMSB(T x)
{
    return select(clz(T(0)) - (clz(x) + T(1)), T(-1), x == T(0));
}

constant uint WIRE_tmp [[function_constant(4)]];
constant uint WIRE = is_function_constant_defined(WIRE_tmp) ? WIRE_tmp : 0u;
constant bool _91 = (WIRE == 1u);

struct Params
{
    uint n;
    uint dst_off;
    uint src_off;
};

constant uint _122_tmp [[function_constant(0)]];
constant uint _122 = is_function_constant_defined(_122_tmp) ? _122_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_122, 1u, 1u);

struct Src
{
    uint d[1];
};

struct Dst
{
    uint d[1];
};

static inline __attribute__((always_inline))
uint fromHalf(thread const uint& h)
{
    uint _sign = (h & 32768u) << uint(16);
    uint e = (h >> uint(10)) & 31u;
    uint mant = h & 1023u;
    if (e == 31u)
    {
        return (_sign | 2139095040u) | (mant << uint(13));
    }
    if (e == 0u)
    {
        if (mant == 0u)
        {
            return _sign;
        }
        uint p = uint(int(spvFindUMSB(mant)));
        return (_sign | ((p + 103u) << uint(23))) | ((mant << (23u - p)) & 8388607u);
    }
    return (_sign | (((e + 127u) - 15u) << uint(23))) | (mant << uint(13));
}

static inline __attribute__((always_inline))
uint conv(thread const uint& h)
{
    uint _92;
    if (_91)
    {
        _92 = h << uint(16);
    }
    else
    {
        uint param = h;
        _92 = fromHalf(param);
    }
    return _92;
}

kernel void main0(constant Params& pc [[buffer(0)]], device Dst& dst [[buffer(0)]], const device Src& src [[buffer(1)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint words = (pc.n + 1u) >> uint(1);
    uint _125 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint stride = _125, w = gl_GlobalInvocationID.x; w < words; w += stride)
    {
        uint v = src.d[pc.src_off + w];
        uint i = 2u * w;
        uint param = v & 65535u;
        dst.d[pc.dst_off + i] = conv(param);
        if ((i + 1u) < pc.n)
        {
            uint param_1 = v >> uint(16);
            dst.d[(pc.dst_off + i) + 1u] = conv(param_1);
        }
    }
}

