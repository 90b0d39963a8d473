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

constant uint _109_tmp [[function_constant(0)]];
constant uint _109 = is_function_constant_defined(_109_tmp) ? _109_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_109, 1u, 1u);

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

kernel void main0(constant Params& pc [[buffer(0)]], device Dst& dst [[buffer(0)]], const device Src& src [[buffer(1)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint _113 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    float _153;
    for (uint stride = _113, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        float v = src.d[pc.src_off + i];
        if (SCALE)
        {
            if (pc.div != 0u)
            {
                float param = v;
                uint param_1 = pc.div;
                float param_2 = pc.scale;
                _153 = divide(param, param_1, param_2);
            }
            else
            {
                _153 = v * pc.scale;
            }
            v = _153;
        }
        dst.d[pc.dst_off + i] = v;
    }
}

