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

struct ResType
{
    uint _m0;
    uint _m1;
};

constant uint OP_tmp [[function_constant(1)]];
constant uint OP = is_function_constant_defined(OP_tmp) ? OP_tmp : 0u;
constant bool _731 = (OP == 0u);
constant bool _740 = (OP == 1u);
constant bool _750 = (OP == 2u);
constant uint _780_tmp [[function_constant(0)]];
constant uint _780 = is_function_constant_defined(_780_tmp) ? _780_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_780, 1u, 1u);

struct Params
{
    uint n;
    uint dst_off;
    uint src_off[8];
    float scale;
    char _m4_pad[4];
    uint div;
};

struct Src0
{
    uchar d[1];
};

constant uint K_tmp [[function_constant(2)]];
constant uint K = is_function_constant_defined(K_tmp) ? K_tmp : 2u;
constant bool _820 = (K > 1u);

struct Src1
{
    uchar d[1];
};

constant bool _840 = (K > 2u);

struct Src2
{
    uchar d[1];
};

constant bool _860 = (K > 3u);

struct Src3
{
    uchar d[1];
};

constant bool _880 = (K > 4u);

struct Src4
{
    uchar d[1];
};

constant bool _902 = (K > 5u);

struct Src5
{
    uchar d[1];
};

constant bool _924 = (K > 6u);

struct Src6
{
    uchar d[1];
};

constant bool _945 = (K > 7u);

struct Src7
{
    uchar d[1];
};

struct Dst
{
    uint d[1];
};

constant bool SCALE_tmp [[function_constant(3)]];
constant bool SCALE = is_function_constant_defined(SCALE_tmp) ? SCALE_tmp : false;

static inline __attribute__((always_inline))
uint e5m2_to_f32(thread const uint& h)
{
    uint _sign = (h & 128u) << uint(24);
    uint e = (h >> uint(2)) & 31u;
    uint m = h & 3u;
    if (e == 31u)
    {
        return (_sign | 2139095040u) | (m << uint(21));
    }
    if (e == 0u)
    {
        if (m == 0u)
        {
            return _sign;
        }
        int s = 2 - int(spvFindUMSB(m));
        return (_sign | (uint(113 - s) << uint(23))) | (((m << uint(s)) & 3u) << uint(21));
    }
    return (_sign | ((e + 112u) << uint(23))) | (m << uint(21));
}

static inline __attribute__((always_inline))
uint f32_add_soft(thread uint& a, thread uint& b)
{
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
        bool _77 = ab == 2139095040u;
        bool _87;
        if (_77)
        {
            _87 = ((a ^ b) & 2147483648u) != 0u;
        }
        else
        {
            _87 = _77;
        }
        return _87 ? 4290772992u : a;
    }
    if (ab == 2139095040u)
    {
        return b;
    }
    if (ab == 0u)
    {
        uint _104;
        if (aa == 0u)
        {
            _104 = a & b;
        }
        else
        {
            _104 = a;
        }
        return _104;
    }
    if (aa == 0u)
    {
        return b;
    }
    if (ab > aa)
    {
        uint t = a;
        a = b;
        b = t;
        t = aa;
        aa = ab;
        ab = t;
    }
    uint ea = aa >> uint(23);
    uint eb = ab >> uint(23);
    uint ma = aa & 8388607u;
    uint mb = ab & 8388607u;
    if (ea != 0u)
    {
        ma |= 8388608u;
    }
    else
    {
        ea = 1u;
    }
    if (eb != 0u)
    {
        mb |= 8388608u;
    }
    else
    {
        eb = 1u;
    }
    ma = ma << uint(3);
    mb = mb << uint(3);
    uint d = ea - eb;
    if (d >= 27u)
    {
        mb = 1u;
    }
    else
    {
        if (d != 0u)
        {
            mb = (mb >> d) | uint((mb & ((1u << d) - 1u)) != 0u);
        }
    }
    uint e = ea;
    uint m;
    if (((a ^ b) & 2147483648u) == 0u)
    {
        m = ma + mb;
        if (m >= 134217728u)
        {
            m = (m >> uint(1)) | (m & 1u);
            e++;
        }
    }
    else
    {
        m = ma - mb;
        if (m == 0u)
        {
            return 0u;
        }
        uint sh = min(uint(26 - int(spvFindUMSB(m))), (e - 1u));
        m = m << sh;
        e -= sh;
    }
    uint rem = m & 7u;
    m = m >> uint(3);
    bool _251 = rem > 4u;
    bool _263;
    if (!_251)
    {
        bool _256 = rem == 4u;
        bool _262;
        if (_256)
        {
            _262 = (m & 1u) != 0u;
        }
        else
        {
            _262 = _256;
        }
        _263 = _262;
    }
    else
    {
        _263 = _251;
    }
    if (_263)
    {
        m++;
    }
    return (a & 2147483648u) | min((((e - 1u) << uint(23)) + m), 2139095040u);
}

static inline __attribute__((always_inline))
uint f32_add(thread const uint& a, thread const uint& b)
{
    uint ea = (a >> uint(23)) & 255u;
    uint eb = (b >> uint(23)) & 255u;
    bool _292 = (ea - 25u) <= 228u;
    bool _298;
    if (_292)
    {
        _298 = (eb - 25u) <= 228u;
    }
    else
    {
        _298 = _292;
    }
    if (_298)
    {
        float s = spvFAdd(as_type<float>(a), as_type<float>(b));
        uint r = as_type<uint>(s);
        return ((r & 2147483647u) == 0u) ? 0u : r;
    }
    uint param = a;
    uint param_1 = b;
    uint _322 = f32_add_soft(param, param_1);
    return _322;
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
        uint _356;
        if (ab == 0u)
        {
            _356 = 4290772992u;
        }
        else
        {
            _356 = _sign | 2139095040u;
        }
        return _356;
    }
    if (ab == 2139095040u)
    {
        uint _370;
        if (aa == 0u)
        {
            _370 = 4290772992u;
        }
        else
        {
            _370 = _sign | 2139095040u;
        }
        return _370;
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
    ResType _440;
    _440._m0 = ma * mb;
    _440._m1 = mulhi(ma, mb);
    uint lo = _440._m0;
    uint hi = _440._m1;
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
        uint _502;
        if (sh >= 32u)
        {
            _502 = 1u;
        }
        else
        {
            _502 = (m >> sh) | uint((m & ((1u << sh) - 1u)) != 0u);
        }
        m = _502;
        e = 1;
    }
    uint rem = m & 255u;
    m = m >> uint(8);
    bool _526 = rem > 128u;
    bool _538;
    if (!_526)
    {
        bool _531 = rem == 128u;
        bool _537;
        if (_531)
        {
            _537 = (m & 1u) != 0u;
        }
        else
        {
            _537 = _531;
        }
        _538 = _537;
    }
    else
    {
        _538 = _526;
    }
    if (_538)
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
    bool _565 = (ea - 1u) < 254u;
    bool _571;
    if (_565)
    {
        _571 = (eb - 1u) < 254u;
    }
    else
    {
        _571 = _565;
    }
    bool _580;
    if (_571)
    {
        _580 = ((ea + eb) - 128u) <= 251u;
    }
    else
    {
        _580 = _571;
    }
    if (_580)
    {
        float p = spvFMul(as_type<float>(a), as_type<float>(b));
        return as_type<uint>(p);
    }
    uint param = a;
    uint param_1 = b;
    return f32_mul_soft(param, param_1);
}

static inline __attribute__((always_inline))
uint f32_key(thread const uint& x)
{
    uint _602;
    if ((x & 2147483648u) != 0u)
    {
        _602 = ~x;
    }
    else
    {
        _602 = x | 2147483648u;
    }
    return _602;
}

static inline __attribute__((always_inline))
uint f32_max(thread const uint& a, thread const uint& b)
{
    if ((a & 2147483647u) > 2139095040u)
    {
        return a;
    }
    if ((b & 2147483647u) > 2139095040u)
    {
        return b;
    }
    uint param = a;
    uint param_1 = b;
    return (f32_key(param) >= f32_key(param_1)) ? a : b;
}

static inline __attribute__((always_inline))
uint f32_min(thread const uint& a, thread const uint& b)
{
    if ((a & 2147483647u) > 2139095040u)
    {
        return a;
    }
    if ((b & 2147483647u) > 2139095040u)
    {
        return b;
    }
    uint param = a;
    uint param_1 = b;
    return (f32_key(param) <= f32_key(param_1)) ? a : b;
}

static inline __attribute__((always_inline))
uint combine1(thread const uint& a, thread const uint& b)
{
    if (_731)
    {
        uint param = a;
        uint param_1 = b;
        return f32_add(param, param_1);
    }
    if (_740)
    {
        uint param_2 = a;
        uint param_3 = b;
        return f32_mul(param_2, param_3);
    }
    if (_750)
    {
        uint param_4 = a;
        uint param_5 = b;
        return f32_max(param_4, param_5);
    }
    uint param_6 = a;
    uint param_7 = b;
    return f32_min(param_6, param_7);
}

static inline __attribute__((always_inline))
uint combine(thread const uint& a, thread const uint& b)
{
    uint param = a;
    uint param_1 = b;
    return combine1(param, param_1);
}

kernel void main0(constant Params& pc [[buffer(0)]], device Dst& dst [[buffer(0)]], const device Src0& s0 [[buffer(1)]], const device Src1& s1 [[buffer(2)]], const device Src2& s2 [[buffer(3)]], const device Src3& s3 [[buffer(4)]], const device Src4& s4 [[buffer(5)]], const device Src5& s5 [[buffer(6)]], const device Src6& s6 [[buffer(7)]], const device Src7& s7 [[buffer(8)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint _783 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint stride = _783, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        uint param = uint(s0.d[pc.src_off[0] + i]);
        uint acc = e5m2_to_f32(param);
        if (_820)
        {
            uint param_1 = uint(s1.d[pc.src_off[1] + i]);
            uint param_2 = acc;
            uint param_3 = e5m2_to_f32(param_1);
            acc = combine(param_2, param_3);
        }
        if (_840)
        {
            uint param_4 = uint(s2.d[pc.src_off[2] + i]);
            uint param_5 = acc;
            uint param_6 = e5m2_to_f32(param_4);
            acc = combine(param_5, param_6);
        }
        if (_860)
        {
            uint param_7 = uint(s3.d[pc.src_off[3] + i]);
            uint param_8 = acc;
            uint param_9 = e5m2_to_f32(param_7);
            acc = combine(param_8, param_9);
        }
        if (_880)
        {
            uint param_10 = uint(s4.d[pc.src_off[4] + i]);
            uint param_11 = acc;
            uint param_12 = e5m2_to_f32(param_10);
            acc = combine(param_11, param_12);
        }
        if (_902)
        {
            uint param_13 = uint(s5.d[pc.src_off[5] + i]);
            uint param_14 = acc;
            uint param_15 = e5m2_to_f32(param_13);
            acc = combine(param_14, param_15);
        }
        if (_924)
        {
            uint param_16 = uint(s6.d[pc.src_off[6] + i]);
            uint param_17 = acc;
            uint param_18 = e5m2_to_f32(param_16);
            acc = combine(param_17, param_18);
        }
        if (_945)
        {
            uint param_19 = uint(s7.d[pc.src_off[7] + i]);
            uint param_20 = acc;
            uint param_21 = e5m2_to_f32(param_19);
            acc = combine(param_20, param_21);
        }
        uint res = acc;
        dst.d[pc.dst_off + i] = res;
    }
}

