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

constant uint _306_tmp [[function_constant(0)]];
constant uint _306 = is_function_constant_defined(_306_tmp) ? _306_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_306, 1u, 1u);

struct Src
{
    float d[1];
};

constant bool SCALE_tmp [[function_constant(3)]];
constant bool SCALE = is_function_constant_defined(SCALE_tmp) ? SCALE_tmp : false;

struct Dst
{
    float d[1];
};

static inline __attribute__((always_inline))
float high_bits(thread const float& v)
{
    return as_type<float>(as_type<uint>(v) & 4294963200u);
}

static inline __attribute__((always_inline))
float divide(thread const float& x, thread const uint& div, thread const float& r)
{
    float n = float(div);
    float a = abs(x);
    bool small = a < 8.8817841970012523233890533447266e-16;
    bool sub = a < spvFMul(n, 1.1754943508222875079687365372222e-38);
    float up = sub ? 1.0 : (small ? 18446744073709551616.0 : 1.0);
    float down = sub ? 1.0 : (small ? 5.4210108624275221700372640043497e-20 : 1.0);
    float xs = spvFMul(x, up);
    float q = spvFMul(xs, r);
    float param = q;
    float qh = high_bits(param);
    float ql = spvFSub(q, qh);
    float e = spvFAdd(spvFSub(spvFMul(qh, n), xs), spvFMul(ql, n));
    float q1 = spvFSub(q, spvFMul(e, r));
    float res = spvFMul(isinf(q) ? q : q1, down);
    return res;
}

static inline __attribute__((always_inline))
bool div_small_f32(thread const uint& x, thread const uint& div)
{
    uint ax = x & 2147483647u;
    bool _218 = ax != 0u;
    bool _227;
    if (_218)
    {
        _227 = ax < as_type<uint>(float(div) * 1.1754943508222875079687365372222e-38);
    }
    else
    {
        _227 = _218;
    }
    return _227;
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
    bool _188 = (2u * rem) > div;
    bool _202;
    if (!_188)
    {
        bool _195 = (2u * rem) == div;
        bool _201;
        if (_195)
        {
            _201 = (q & 1u) != 0u;
        }
        else
        {
            _201 = _195;
        }
        _202 = _201;
    }
    else
    {
        _202 = _188;
    }
    if (_202)
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
    float _238;
    if (div_small_f32(param, param_1))
    {
        uint param_2 = b;
        uint param_3 = div;
        _238 = as_type<float>(divide_small_f32(param_2, param_3));
    }
    else
    {
        _238 = q;
    }
    return _238;
}

static inline __attribute__((always_inline))
float divide_exact(thread const float& x, thread const uint& div, thread const float& r)
{
    float param = x;
    uint param_1 = div;
    float param_2 = r;
    float q = divide(param, param_1, param_2);
    float param_3 = x;
    float param_4 = q;
    uint param_5 = div;
    return divide_exact1(param_3, param_4, param_5);
}

static inline __attribute__((always_inline))
float scale_elem(thread const float& x, constant Params& pc)
{
    float _277;
    if (pc.div != 0u)
    {
        float param = x;
        uint param_1 = pc.div;
        float param_2 = pc.scale;
        _277 = divide_exact(param, param_1, param_2);
    }
    else
    {
        _277 = x * pc.scale;
    }
    return _277;
}

kernel void main0(constant Params& pc [[buffer(0)]], device Dst& dst [[buffer(0)]], const device Src& src [[buffer(1)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint _309 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint stride = _309, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        float v = src.d[pc.src_off + i];
        if (SCALE)
        {
            float param = v;
            v = scale_elem(param, pc);
        }
        dst.d[pc.dst_off + i] = v;
    }
}

