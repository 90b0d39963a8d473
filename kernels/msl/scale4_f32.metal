#pragma clang diagnostic ignored "-Wmissing-prototypes"

#include <metal_stdlib>
#include <simd/simd.h>

using namespace metal;

template<typename T>
[[clang::optnone]] T spvFMul(T l, T r)
{
    return fma(l, r, T(0));
}

template<typename T, int Cols, int Rows>
[[clang::optnone]] vec<T, Cols> spvFMulVectorMatrix(vec<T, Rows> v, matrix<T, Cols, Rows> m)
{
    vec<T, Cols> res = vec<T, Cols>(0);
    for (uint i = Rows; i > 0; --i)
    {
        vec<T, Cols> tmp(0);
        for (uint j = 0; j < Cols; ++j)
        {
            tmp[j] = m[j][i - 1];
        }
        res = fma(tmp, vec<T, Cols>(v[i - 1]), res);
    }
    return res;
}

template<typename T, int Cols, int Rows>
[[clang::optnone]] vec<T, Rows> spvFMulMatrixVector(matrix<T, Cols, Rows> m, vec<T, Cols> v)
{
    vec<T, Rows> res = vec<T, Rows>(0);
    for (uint i = Cols; i > 0; --i)
    {
        res = fma(m[i - 1], vec<T, Rows>(v[i - 1]), res);
    }
    return res;
}

template<typename T, int LCols, int LRows, int RCols, int RRows>
[[clang::optnone]] matrix<T, RCols, LRows> spvFMulMatrixMatrix(matrix<T, LCols, LRows> l, matrix<T, RCols, RRows> r)
{
    matrix<T, RCols, LRows> res;
    for (uint i = 0; i < RCols; i++)
    {
        vec<T, RCols> tmp(0);
        for (uint j = 0; j < LCols; j++)
        {
            tmp = fma(vec<T, RCols>(r[i][j]), l[j], tmp);
        }
        res[i] = tmp;
    }
    return res;
}

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

struct Params
{
    uint n;
    uint dst_off;
    uint src_off;
    uint div;
    float scale;
};

constant uint _335_tmp [[function_constant(0)]];
constant uint _335 = is_function_constant_defined(_335_tmp) ? _335_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_335, 1u, 1u);

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
    float4 a = abs(x);
    bool4 small = a < float4(8.8817841970012523233890533447266e-16);
    bool4 sub = a < float4(spvFMul(n, 1.1754943508222875079687365372222e-38));
    float4 up = select(select(float4(1.0), float4(18446744073709551616.0), small), float4(1.0), sub);
    float4 down = select(select(float4(1.0), float4(5.4210108624275221700372640043497e-20), small), float4(1.0), sub);
    float4 xs = spvFMul(x, up);
    float4 q = xs * r;
    float4 param = q;
    float4 qh = high_bits(param);
    float4 ql = spvFSub(q, qh);
    float4 e = spvFAdd(spvFSub(qh * n, xs), ql * n);
    float4 q1 = spvFSub(q, e * r);
    float4 res = spvFMul(select(q1, q, isinf(q)), down);
    return res;
}

static inline __attribute__((always_inline))
bool div_small_f32(thread const uint& x, thread const uint& div)
{
    uint ax = x & 2147483647u;
    bool _228 = ax != 0u;
    bool _237;
    if (_228)
    {
        _237 = ax < as_type<uint>(float(div) * 1.1754943508222875079687365372222e-38);
    }
    else
    {
        _237 = _228;
    }
    return _237;
}

static inline __attribute__((always_inline))
uint divide_small_f32(thread const uint& x, thread const uint& div)
{
    uint ax = x & 2147483647u;
    uint e = ax >> uint(23);
    uint m = ax & 8388607u;
    uint s = 0u;
    if (e != 0u)
    {
        m |= 8388608u;
        s = e - 1u;
    }
    uint q = m / div;
    uint rem = m % div;
    for (uint i = 0u; i < s; i++)
    {
        rem = rem << uint(1);
        q = q << uint(1);
        if (rem >= div)
        {
            rem -= div;
            q |= 1u;
        }
    }
    bool _198 = (2u * rem) > div;
    bool _212;
    if (!_198)
    {
        bool _205 = (2u * rem) == div;
        bool _211;
        if (_205)
        {
            _211 = (q & 1u) != 0u;
        }
        else
        {
            _211 = _205;
        }
        _212 = _211;
    }
    else
    {
        _212 = _198;
    }
    if (_212)
    {
        q++;
    }
    return (x & 2147483648u) | q;
}

static inline __attribute__((always_inline))
float divide_exact1(thread const float& x, thread const float& q, thread const uint& div)
{
    uint b = as_type<uint>(x);
    uint param = b;
    uint param_1 = div;
    float _248;
    if (div_small_f32(param, param_1))
    {
        uint param_2 = b;
        uint param_3 = div;
        _248 = as_type<float>(divide_small_f32(param_2, param_3));
    }
    else
    {
        _248 = q;
    }
    return _248;
}

static inline __attribute__((always_inline))
float4 divide_exact(thread const float4& x, thread const uint& div, thread const float& r)
{
    float4 param = x;
    uint param_1 = div;
    float param_2 = r;
    float4 q = divide(param, param_1, param_2);
    for (int c = 0; c < 4; c++)
    {
        float param_3 = x[c];
        float param_4 = q[c];
        uint param_5 = div;
        q[c] = divide_exact1(param_3, param_4, param_5);
    }
    return q;
}

static inline __attribute__((always_inline))
float4 scale_elem(thread const float4& x, constant Params& pc)
{
    float4 _307;
    if (pc.div != 0u)
    {
        float4 param = x;
        uint param_1 = pc.div;
        float param_2 = pc.scale;
        _307 = divide_exact(param, param_1, param_2);
    }
    else
    {
        _307 = x * pc.scale;
    }
    return _307;
}

kernel void main0(constant Params& pc [[buffer(0)]], device Dst& dst [[buffer(0)]], const device Src& src [[buffer(1)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint _338 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint stride = _338, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        float4 v = src.d[pc.src_off + i];
        if (SCALE)
        {
            float4 param = v;
            v = scale_elem(param, pc);
        }
        dst.d[pc.dst_off + i] = v;
    }
}

