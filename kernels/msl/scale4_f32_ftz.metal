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

struct ResType
{
    uint _m0;
    uint _m1;
};

struct Params
{
    uint n;
    uint dst_off;
    uint src_off;
    uint div;
    float scale;
};

constant uint _615_tmp [[function_constant(0)]];
constant uint _615 = is_function_constant_defined(_615_tmp) ? _615_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_615, 1u, 1u);

struct Src
{
    uint4 d[1];
};

constant bool SCALE_tmp [[function_constant(3)]];
constant bool SCALE = is_function_constant_defined(SCALE_tmp) ? SCALE_tmp : false;

struct Dst
{
    uint4 d[1];
};

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
uint f32_div(thread const uint& x, thread const uint& div, thread const float& r)
{
    uint ax = x & 2147483647u;
    if ((ax >= 2139095040u) || (ax == 0u))
    {
        return x;
    }
    uint param = x;
    uint param_1 = div;
    if (div_small_f32(param, param_1))
    {
        uint param_2 = x;
        uint param_3 = div;
        return divide_small_f32(param_2, param_3);
    }
    float param_4 = as_type<float>(x);
    uint param_5 = div;
    float param_6 = r;
    return as_type<uint>(divide(param_4, param_5, param_6));
}

static inline __attribute__((always_inline))
uint f32_mul_soft(thread const uint& a, thread const uint& b)
{
    uint _sign = (a ^ b) & 2147483648u;
    uint aa = a & 2147483647u;
    uint ab = b & 2147483647u;
    if (aa > 2139095040u)
    {
        return a | 4194304u;
    }
    if (ab > 2139095040u)
    {
        return b | 4194304u;
    }
    if (aa == 2139095040u)
    {
        uint _273;
        if (ab == 0u)
        {
            _273 = 4290772992u;
        }
        else
        {
            _273 = _sign | 2139095040u;
        }
        return _273;
    }
    if (ab == 2139095040u)
    {
        uint _288;
        if (aa == 0u)
        {
            _288 = 4290772992u;
        }
        else
        {
            _288 = _sign | 2139095040u;
        }
        return _288;
    }
    if ((aa == 0u) || (ab == 0u))
    {
        return _sign;
    }
    int ea = int(aa >> uint(23));
    int eb = int(ab >> uint(23));
    uint ma = aa & 8388607u;
    uint mb = ab & 8388607u;
    if (ea == 0)
    {
        int s = 23 - int(spvFindUMSB(ma));
        ma = ma << uint(s);
        ea = 1 - s;
    }
    else
    {
        ma |= 8388608u;
    }
    if (eb == 0)
    {
        int s_1 = 23 - int(spvFindUMSB(mb));
        mb = mb << uint(s_1);
        eb = 1 - s_1;
    }
    else
    {
        mb |= 8388608u;
    }
    ResType _358;
    _358._m0 = ma * mb;
    _358._m1 = mulhi(ma, mb);
    uint lo = _358._m0;
    uint hi = _358._m1;
    int e = (ea + eb) - 127;
    uint m;
    if (hi >= 32768u)
    {
        m = ((hi << uint(16)) | (lo >> uint(16))) | uint((lo & 65535u) != 0u);
        e++;
    }
    else
    {
        m = ((hi << uint(17)) | (lo >> uint(15))) | uint((lo & 32767u) != 0u);
    }
    if (e >= 255)
    {
        return _sign | 2139095040u;
    }
    if (e < 1)
    {
        uint sh = uint(1 - e);
        uint _420;
        if (sh >= 32u)
        {
            _420 = 1u;
        }
        else
        {
            _420 = (m >> sh) | uint((m & ((1u << sh) - 1u)) != 0u);
        }
        m = _420;
        e = 1;
    }
    uint rem = m & 255u;
    m = m >> uint(8);
    bool _445 = rem > 128u;
    bool _457;
    if (!_445)
    {
        bool _450 = rem == 128u;
        bool _456;
        if (_450)
        {
            _456 = (m & 1u) != 0u;
        }
        else
        {
            _456 = _450;
        }
        _457 = _456;
    }
    else
    {
        _457 = _445;
    }
    if (_457)
    {
        m++;
    }
    return _sign | min(((uint(e - 1) << uint(23)) + m), 2139095040u);
}

static inline __attribute__((always_inline))
uint f32_mul(thread const uint& a, thread const uint& b)
{
    uint ea = (a >> uint(23)) & 255u;
    uint eb = (b >> uint(23)) & 255u;
    bool _484 = (ea - 1u) < 254u;
    bool _490;
    if (_484)
    {
        _490 = (eb - 1u) < 254u;
    }
    else
    {
        _490 = _484;
    }
    bool _499;
    if (_490)
    {
        _499 = ((ea + eb) - 128u) <= 251u;
    }
    else
    {
        _499 = _490;
    }
    if (_499)
    {
        float p = spvFMul(as_type<float>(a), as_type<float>(b));
        return as_type<uint>(p);
    }
    uint param = a;
    uint param_1 = b;
    return f32_mul_soft(param, param_1);
}

static inline __attribute__((always_inline))
uint scale1(thread const uint& x, constant Params& pc)
{
    uint _562;
    if (pc.div != 0u)
    {
        uint param = x;
        uint param_1 = pc.div;
        float param_2 = pc.scale;
        _562 = f32_div(param, param_1, param_2);
    }
    else
    {
        uint param_3 = x;
        uint param_4 = as_type<uint>(pc.scale);
        _562 = f32_mul(param_3, param_4);
    }
    return _562;
}

static inline __attribute__((always_inline))
uint4 scale_elem(thread const uint4& x, constant Params& pc)
{
    uint4 r;
    for (int c = 0; c < 4; c++)
    {
        uint param = x[c];
        r[c] = scale1(param, pc);
    }
    return r;
}

kernel void main0(constant Params& pc [[buffer(0)]], device Dst& dst [[buffer(0)]], const device Src& src [[buffer(1)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint _618 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint stride = _618, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        uint4 v = src.d[pc.src_off + i];
        if (SCALE)
        {
            uint4 param = v;
            v = scale_elem(param, pc);
        }
        dst.d[pc.dst_off + i] = v;
    }
}

