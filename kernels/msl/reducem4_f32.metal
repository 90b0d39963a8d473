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
constant bool _47 = (OP == 0u);
constant bool _55 = (OP == 1u);
constant bool _82 = (OP == 2u);
constant bool _100 = (OP == 2u);
constant bool _118 = (OP == 0u);
constant bool _125 = (OP == 1u);
constant uint _256_tmp [[function_constant(0)]];
constant uint _256 = is_function_constant_defined(_256_tmp) ? _256_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_256, 1u, 1u);

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

struct Src0
{
    float4 d[1];
};

constant uint K_tmp [[function_constant(2)]];
constant uint K = is_function_constant_defined(K_tmp) ? K_tmp : 2u;
constant bool _294 = (K > 1u);

struct Src1
{
    float4 d[1];
};

constant bool _311 = (K > 2u);

struct Src2
{
    float4 d[1];
};

constant bool _329 = (K > 3u);

struct Src3
{
    float4 d[1];
};

constant bool _348 = (K > 4u);

struct Src4
{
    float4 d[1];
};

constant bool _366 = (K > 5u);

struct Src5
{
    float4 d[1];
};

constant bool _385 = (K > 6u);

struct Src6
{
    float4 d[1];
};

constant bool _404 = (K > 7u);

struct Src7
{
    float4 d[1];
};

constant bool SCALE_tmp [[function_constant(3)]];
constant bool SCALE = is_function_constant_defined(SCALE_tmp) ? SCALE_tmp : false;

struct Dst0
{
    float4 d[1];
};

constant uint M_tmp [[function_constant(5)]];
constant uint M = is_function_constant_defined(M_tmp) ? M_tmp : 1u;
constant bool _458 = (M > 1u);

struct Dst1
{
    float4 d[1];
};

constant bool _471 = (M > 2u);

struct Dst2
{
    float4 d[1];
};

constant bool _484 = (M > 3u);

struct Dst3
{
    float4 d[1];
};

constant bool _497 = (M > 4u);

struct Dst4
{
    float4 d[1];
};

constant bool _510 = (M > 5u);

struct Dst5
{
    float4 d[1];
};

constant bool _523 = (M > 6u);

struct Dst6
{
    float4 d[1];
};

constant bool _536 = (M > 7u);

struct Dst7
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
    if (_47)
    {
        return a + b;
    }
    if (_55)
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
        bool _83;
        if (_82)
        {
            float param = a;
            _83 = !negative(param);
        }
        else
        {
            float param_1 = a;
            _83 = negative(param_1);
        }
        bool pick_a = _83;
        return pick_a ? a : b;
    }
    if (_100)
    {
        return (a > b) ? a : b;
    }
    return (a < b) ? a : b;
}

static inline __attribute__((always_inline))
float4 combine(thread const float4& a, thread const float4& b)
{
    if (_118)
    {
        return a + b;
    }
    if (_125)
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

kernel void main0(constant Params& pc [[buffer(0)]], device Dst0& d0 [[buffer(0)]], device Dst1& d1 [[buffer(1)]], device Dst2& d2 [[buffer(2)]], device Dst3& d3 [[buffer(3)]], device Dst4& d4 [[buffer(4)]], device Dst5& d5 [[buffer(5)]], device Dst6& d6 [[buffer(6)]], device Dst7& d7 [[buffer(7)]], const device Src0& s0 [[buffer(8)]], const device Src1& s1 [[buffer(9)]], const device Src2& s2 [[buffer(10)]], const device Src3& s3 [[buffer(11)]], const device Src4& s4 [[buffer(12)]], const device Src5& s5 [[buffer(13)]], const device Src6& s6 [[buffer(14)]], const device Src7& s7 [[buffer(15)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint _259 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    float4 _428;
    for (uint stride = _259, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        float4 acc = s0.d[pc.src_off[0] + i];
        if (_294)
        {
            float4 param = acc;
            float4 param_1 = s1.d[pc.src_off[1] + i];
            acc = combine(param, param_1);
        }
        if (_311)
        {
            float4 param_2 = acc;
            float4 param_3 = s2.d[pc.src_off[2] + i];
            acc = combine(param_2, param_3);
        }
        if (_329)
        {
            float4 param_4 = acc;
            float4 param_5 = s3.d[pc.src_off[3] + i];
            acc = combine(param_4, param_5);
        }
        if (_348)
        {
            float4 param_6 = acc;
            float4 param_7 = s4.d[pc.src_off[4] + i];
            acc = combine(param_6, param_7);
        }
        if (_366)
        {
            float4 param_8 = acc;
            float4 param_9 = s5.d[pc.src_off[5] + i];
            acc = combine(param_8, param_9);
        }
        if (_385)
        {
            float4 param_10 = acc;
            float4 param_11 = s6.d[pc.src_off[6] + i];
            acc = combine(param_10, param_11);
        }
        if (_404)
        {
            float4 param_12 = acc;
            float4 param_13 = s7.d[pc.src_off[7] + i];
            acc = combine(param_12, param_13);
        }
        if (SCALE)
        {
            if (pc.div != 0u)
            {
                float4 param_14 = acc;
                uint param_15 = pc.div;
                float param_16 = pc.scale;
                _428 = divide(param_14, param_15, param_16);
            }
            else
            {
                _428 = acc * pc.scale;
            }
            acc = _428;
        }
        d0.d[pc.dst_off[0] + i] = acc;
        if (_458)
        {
            d1.d[pc.dst_off[1] + i] = acc;
        }
        if (_471)
        {
            d2.d[pc.dst_off[2] + i] = acc;
        }
        if (_484)
        {
            d3.d[pc.dst_off[3] + i] = acc;
        }
        if (_497)
        {
            d4.d[pc.dst_off[4] + i] = acc;
        }
        if (_510)
        {
            d5.d[pc.dst_off[5] + i] = acc;
        }
        if (_523)
        {
            d6.d[pc.dst_off[6] + i] = acc;
        }
        if (_536)
        {
            d7.d[pc.dst_off[7] + i] = acc;
        }
    }
}

