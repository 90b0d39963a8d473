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
constant bool _71 = (OP == 0u);
constant bool _79 = (OP == 1u);
constant bool _106 = (OP == 2u);
constant bool _124 = (OP == 2u);
constant bool _142 = (OP == 0u);
constant bool _149 = (OP == 1u);

struct Params
{
    uint n;
    uint dst_off;
    uint src_off[8];
    float scale;
    char _m4_pad[4];
    uint div;
};

constant uint _467_tmp [[function_constant(0)]];
constant uint _467 = is_function_constant_defined(_467_tmp) ? _467_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_467, 1u, 1u);

struct Src0
{
    float4 d[1];
};

constant uint K_tmp [[function_constant(2)]];
constant uint K = is_function_constant_defined(K_tmp) ? K_tmp : 2u;
constant bool _498 = (K > 1u);

struct Src1
{
    float4 d[1];
};

constant bool _515 = (K > 2u);

struct Src2
{
    float4 d[1];
};

constant bool _533 = (K > 3u);

struct Src3
{
    float4 d[1];
};

constant bool _551 = (K > 4u);

struct Src4
{
    float4 d[1];
};

constant bool _569 = (K > 5u);

struct Src5
{
    float4 d[1];
};

constant bool _588 = (K > 6u);

struct Src6
{
    float4 d[1];
};

constant bool _607 = (K > 7u);

struct Src7
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
bool negative(thread const float& x)
{
    return (as_type<uint>(x) >> uint(31)) != 0u;
}

static inline __attribute__((always_inline))
float combine1(thread const float& a, thread const float& b)
{
    if (_71)
    {
        return a + b;
    }
    if (_79)
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
        bool _107;
        if (_106)
        {
            float param = a;
            _107 = !negative(param);
        }
        else
        {
            float param_1 = a;
            _107 = negative(param_1);
        }
        bool pick_a = _107;
        return pick_a ? a : b;
    }
    if (_124)
    {
        return (a > b) ? a : b;
    }
    return (a < b) ? a : b;
}

static inline __attribute__((always_inline))
float4 combine(thread const float4& a, thread const float4& b)
{
    if (_142)
    {
        return a + b;
    }
    if (_149)
    {
        return a * b;
    }
    float4 r;
    for (int c = 0; c < 4; c++)
    {
        float param = a[c];
        float param_1 = b[c];
        r[c] = combine1(param, param_1);
    }
    return r;
}

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
    bool _361 = ax != 0u;
    bool _370;
    if (_361)
    {
        _370 = ax < as_type<uint>(float(div) * 1.1754943508222875079687365372222e-38);
    }
    else
    {
        _370 = _361;
    }
    return _370;
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
    bool _331 = (2u * rem) > div;
    bool _345;
    if (!_331)
    {
        bool _338 = (2u * rem) == div;
        bool _344;
        if (_338)
        {
            _344 = (q & 1u) != 0u;
        }
        else
        {
            _344 = _338;
        }
        _345 = _344;
    }
    else
    {
        _345 = _331;
    }
    if (_345)
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
    float _381;
    if (div_small_f32(param, param_1))
    {
        uint param_2 = b;
        uint param_3 = div;
        _381 = as_type<float>(divide_small_f32(param_2, param_3));
    }
    else
    {
        _381 = q;
    }
    return _381;
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
float4 scale_acc(thread const float4& x, constant Params& pc)
{
    float4 _438;
    if (pc.div != 0u)
    {
        float4 param = x;
        uint param_1 = pc.div;
        float param_2 = pc.scale;
        _438 = divide_exact(param, param_1, param_2);
    }
    else
    {
        _438 = x * pc.scale;
    }
    return _438;
}

kernel void main0(constant Params& pc [[buffer(0)]], device Dst& dst [[buffer(0)]], const device Src0& s0 [[buffer(1)]], const device Src1& s1 [[buffer(2)]], const device Src2& s2 [[buffer(3)]], const device Src3& s3 [[buffer(4)]], const device Src4& s4 [[buffer(5)]], const device Src5& s5 [[buffer(6)]], const device Src6& s6 [[buffer(7)]], const device Src7& s7 [[buffer(8)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint _470 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint stride = _470, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        float4 acc = s0.d[pc.src_off[0] + i];
        if (_498)
        {
            float4 param = acc;
            float4 param_1 = s1.d[pc.src_off[1] + i];
            acc = combine(param, param_1);
        }
        if (_515)
        {
            float4 param_2 = acc;
            float4 param_3 = s2.d[pc.src_off[2] + i];
            acc = combine(param_2, param_3);
        }
        if (_533)
        {
            float4 param_4 = acc;
            float4 param_5 = s3.d[pc.src_off[3] + i];
            acc = combine(param_4, param_5);
        }
        if (_551)
        {
            float4 param_6 = acc;
            float4 param_7 = s4.d[pc.src_off[4] + i];
            acc = combine(param_6, param_7);
        }
        if (_569)
        {
            float4 param_8 = acc;
            float4 param_9 = s5.d[pc.src_off[5] + i];
            acc = combine(param_8, param_9);
        }
        if (_588)
        {
            float4 param_10 = acc;
            float4 param_11 = s6.d[pc.src_off[6] + i];
            acc = combine(param_10, param_11);
        }
        if (_607)
        {
            float4 param_12 = acc;
            float4 param_13 = s7.d[pc.src_off[7] + i];
            acc = combine(param_12, param_13);
        }
        if (SCALE)
        {
            float4 param_14 = acc;
            acc = scale_acc(param_14, pc);
        }
        dst.d[pc.dst_off + i] = acc;
    }
}

