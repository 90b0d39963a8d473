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

constant uint OP_tmp [[function_constant(1)]];
constant uint OP = is_function_constant_defined(OP_tmp) ? OP_tmp : 0u;
constant bool _64 = (OP == 0u);
constant bool _72 = (OP == 1u);
constant bool _99 = (OP == 2u);
constant bool _117 = (OP == 2u);

struct Params
{
    uint n;
    uint dst_off[8];
    uint src_off[8];
    char _m3_pad[4];
    float scale;
    char _m4_pad[4];
    uint div;
};

constant uint _394_tmp [[function_constant(0)]];
constant uint _394 = is_function_constant_defined(_394_tmp) ? _394_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_394, 1u, 1u);

struct Src0
{
    float d[1];
};

constant uint K_tmp [[function_constant(2)]];
constant uint K = is_function_constant_defined(K_tmp) ? K_tmp : 2u;
constant bool _426 = (K > 1u);

struct Src1
{
    float d[1];
};

constant bool _443 = (K > 2u);

struct Src2
{
    float d[1];
};

constant bool _461 = (K > 3u);

struct Src3
{
    float d[1];
};

constant bool _479 = (K > 4u);

struct Src4
{
    float d[1];
};

constant bool _497 = (K > 5u);

struct Src5
{
    float d[1];
};

constant bool _516 = (K > 6u);

struct Src6
{
    float d[1];
};

constant bool _535 = (K > 7u);

struct Src7
{
    float d[1];
};

constant bool SCALE_tmp [[function_constant(3)]];
constant bool SCALE = is_function_constant_defined(SCALE_tmp) ? SCALE_tmp : false;

struct Dst0
{
    float d[1];
};

constant uint M_tmp [[function_constant(5)]];
constant uint M = is_function_constant_defined(M_tmp) ? M_tmp : 1u;
constant bool _570 = (M > 1u);

struct Dst1
{
    float d[1];
};

constant bool _583 = (M > 2u);

struct Dst2
{
    float d[1];
};

constant bool _596 = (M > 3u);

struct Dst3
{
    float d[1];
};

constant bool _609 = (M > 4u);

struct Dst4
{
    float d[1];
};

constant bool _622 = (M > 5u);

struct Dst5
{
    float d[1];
};

constant bool _635 = (M > 6u);

struct Dst6
{
    float d[1];
};

constant bool _648 = (M > 7u);

struct Dst7
{
    float d[1];
};

static inline __attribute__((always_inline))
bool negative(thread const float& x)
{
    return (as_type<uint>(x) >> uint(31)) != 0u;
}

static inline __attribute__((always_inline))
float combine(thread const float& a, thread const float& b)
{
    if (_64)
    {
        return a + b;
    }
    if (_72)
    {
        return a * b;
    }
    if (isnan(a))
    {
        return a;
    }
    if (isnan(b))
    {
        return b;
    }
    if (a == b)
    {
        bool _100;
        if (_99)
        {
            float param = a;
            _100 = !negative(param);
        }
        else
        {
            float param_1 = a;
            _100 = negative(param_1);
        }
        bool pick_a = _100;
        return pick_a ? a : b;
    }
    if (_117)
    {
        return (a > b) ? a : b;
    }
    return (a < b) ? a : b;
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
bool div_small_f32(thread const uint& x, thread const uint& div)
{
    uint ax = x & 2147483647u;
    bool _303 = ax != 0u;
    bool _312;
    if (_303)
    {
        _312 = ax < as_type<uint>(float(div) * 1.1754943508222875079687365372222e-38);
    }
    else
    {
        _312 = _303;
    }
    return _312;
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
    bool _273 = (2u * rem) > div;
    bool _287;
    if (!_273)
    {
        bool _280 = (2u * rem) == div;
        bool _286;
        if (_280)
        {
            _286 = (q & 1u) != 0u;
        }
        else
        {
            _286 = _280;
        }
        _287 = _286;
    }
    else
    {
        _287 = _273;
    }
    if (_287)
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
    float _323;
    if (div_small_f32(param, param_1))
    {
        uint param_2 = b;
        uint param_3 = div;
        _323 = as_type<float>(divide_small_f32(param_2, param_3));
    }
    else
    {
        _323 = q;
    }
    return _323;
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
float scale_acc(thread const float& x, constant Params& pc)
{
    float _365;
    if (pc.div != 0u)
    {
        float param = x;
        uint param_1 = pc.div;
        float param_2 = pc.scale;
        _365 = divide_exact(param, param_1, param_2);
    }
    else
    {
        _365 = x * pc.scale;
    }
    return _365;
}

kernel void main0(constant Params& pc [[buffer(0)]], device Dst0& d0 [[buffer(0)]], device Dst1& d1 [[buffer(1)]], device Dst2& d2 [[buffer(2)]], device Dst3& d3 [[buffer(3)]], device Dst4& d4 [[buffer(4)]], device Dst5& d5 [[buffer(5)]], device Dst6& d6 [[buffer(6)]], device Dst7& d7 [[buffer(7)]], const device Src0& s0 [[buffer(8)]], const device Src1& s1 [[buffer(9)]], const device Src2& s2 [[buffer(10)]], const device Src3& s3 [[buffer(11)]], const device Src4& s4 [[buffer(12)]], const device Src5& s5 [[buffer(13)]], const device Src6& s6 [[buffer(14)]], const device Src7& s7 [[buffer(15)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint _397 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint stride = _397, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        float acc = s0.d[pc.src_off[0] + i];
        if (_426)
        {
            float param = acc;
            float param_1 = s1.d[pc.src_off[1] + i];
            acc = combine(param, param_1);
        }
        if (_443)
        {
            float param_2 = acc;
            float param_3 = s2.d[pc.src_off[2] + i];
            acc = combine(param_2, param_3);
        }
        if (_461)
        {
            float param_4 = acc;
            float param_5 = s3.d[pc.src_off[3] + i];
            acc = combine(param_4, param_5);
        }
        if (_479)
        {
            float param_6 = acc;
            float param_7 = s4.d[pc.src_off[4] + i];
            acc = combine(param_6, param_7);
        }
        if (_497)
        {
            float param_8 = acc;
            float param_9 = s5.d[pc.src_off[5] + i];
            acc = combine(param_8, param_9);
        }
        if (_516)
        {
            float param_10 = acc;
            float param_11 = s6.d[pc.src_off[6] + i];
            acc = combine(param_10, param_11);
        }
        if (_535)
        {
            float param_12 = acc;
            float param_13 = s7.d[pc.src_off[7] + i];
            acc = combine(param_12, param_13);
        }
        if (SCALE)
        {
            float param_14 = acc;
            acc = scale_acc(param_14, pc);
        }
        d0.d[pc.dst_off[0] + i] = acc;
        if (_570)
        {
            d1.d[pc.dst_off[1] + i] = acc;
        }
        if (_583)
        {
            d2.d[pc.dst_off[2] + i] = acc;
        }
        if (_596)
        {
            d3.d[pc.dst_off[3] + i] = acc;
        }
        if (_609)
        {
            d4.d[pc.dst_off[4] + i] = acc;
        }
        if (_622)
        {
            d5.d[pc.dst_off[5] + i] = acc;
        }
        if (_635)
        {
            d6.d[pc.dst_off[6] + i] = acc;
        }
        if (_648)
        {
            d7.d[pc.dst_off[7] + i] = acc;
        }
    }
}

