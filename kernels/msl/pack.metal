#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

constant uint WIRE_tmp [[function_constant(4)]];
constant uint WIRE = is_function_constant_defined(WIRE_tmp) ? WIRE_tmp : 0u;
constant bool _196 = (WIRE == 1u);

struct Params
{
    uint n;
    uint dst_off;
    uint src_off;
};

constant uint _226_tmp [[function_constant(0)]];
constant uint _226 = is_function_constant_defined(_226_tmp) ? _226_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_226, 1u, 1u);

struct Src
{
    uint d[1];
};

struct Dst
{
    uint d[1];
};

static inline __attribute__((always_inline))
uint toBF16(thread uint& b)
{
    if ((b & 2147483647u) > 2139095040u)
    {
        return ((b >> uint(16)) | 64u) & 65535u;
    }
    b += (32767u + ((b >> uint(16)) & 1u));
    return b >> uint(16);
}

static inline __attribute__((always_inline))
uint toHalf(thread const uint& b)
{
    uint _sign = (b >> uint(16)) & 32768u;
    int e = int((b >> uint(23)) & 255u);
    uint mant = b & 8388607u;
    if (e == 255)
    {
        if (mant != 0u)
        {
            return (_sign | 32256u) | (mant >> uint(13));
        }
        return _sign | 31744u;
    }
    e = (e - 127) + 15;
    if (e >= 31)
    {
        return _sign | 31744u;
    }
    if (e <= 0)
    {
        if (e < (-10))
        {
            return _sign;
        }
        uint m = mant | 8388608u;
        uint shift = uint(14 - e);
        uint r = m >> shift;
        uint rem = m & ((1u << shift) - 1u);
        uint half_ = 1u << (shift - 1u);
        bool _111 = rem > half_;
        bool _124;
        if (!_111)
        {
            bool _117 = rem == half_;
            bool _123;
            if (_117)
            {
                _123 = (r & 1u) == 1u;
            }
            else
            {
                _123 = _117;
            }
            _124 = _123;
        }
        else
        {
            _124 = _111;
        }
        if (_124)
        {
            r++;
        }
        return _sign | r;
    }
    uint r_1 = (uint(e) << uint(10)) | (mant >> uint(13));
    uint rem_1 = mant & 8191u;
    bool _148 = rem_1 > 4096u;
    bool _160;
    if (!_148)
    {
        bool _153 = rem_1 == 4096u;
        bool _159;
        if (_153)
        {
            _159 = (r_1 & 1u) == 1u;
        }
        else
        {
            _159 = _153;
        }
        _160 = _159;
    }
    else
    {
        _160 = _148;
    }
    if (_160)
    {
        r_1++;
    }
    return _sign | r_1;
}

static inline __attribute__((always_inline))
uint conv(thread const uint& b)
{
    uint _197;
    if (_196)
    {
        uint param = b;
        uint _202 = toBF16(param);
        _197 = _202;
    }
    else
    {
        uint param_1 = b;
        _197 = toHalf(param_1);
    }
    return _197;
}

kernel void main0(constant Params& pc [[buffer(0)]], device Dst& dst [[buffer(0)]], const device Src& src [[buffer(1)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint words = (pc.n + 1u) >> uint(1);
    uint _229 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint stride = _229, w = gl_GlobalInvocationID.x; w < words; w += stride)
    {
        uint i = 2u * w;
        uint param = src.d[pc.src_off + i];
        uint lo = conv(param);
        uint hi = 0u;
        if ((i + 1u) < pc.n)
        {
            uint param_1 = src.d[(pc.src_off + i) + 1u];
            hi = conv(param_1);
        }
        dst.d[pc.dst_off + w] = lo | (hi << uint(16));
    }
}

