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

constant uint OP_tmp [[function_constant(1)]];
constant uint OP = is_function_constant_defined(OP_tmp) ? OP_tmp : 0u;
constant bool _917 = (OP == 0u);
constant bool _926 = (OP == 1u);
constant bool _935 = (OP == 2u);

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
    uint d[1];
};

constant uint K_tmp [[function_constant(2)]];
constant uint K = is_function_constant_defined(K_tmp) ? K_tmp : 2u;
constant bool _1025 = (K > 1u);

struct Src1
{
    uint d[1];
};

constant bool _1055 = (K > 2u);

struct Src2
{
    uint d[1];
};

constant bool _1086 = (K > 3u);

struct Src3
{
    uint d[1];
};

constant bool _1116 = (K > 4u);

struct Src4
{
    uint d[1];
};

constant bool _1147 = (K > 5u);

struct Src5
{
    uint d[1];
};

constant bool _1179 = (K > 6u);

struct Src6
{
    uint d[1];
};

constant bool _1210 = (K > 7u);

struct Src7
{
    uint d[1];
};

constant uint _1364_tmp [[function_constant(0)]];
constant uint _1364 = is_function_constant_defined(_1364_tmp) ? _1364_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_1364, 1u, 1u);
constant bool _1381 = (OP == 0u);
constant bool _1403 = (K > 1u);
constant bool _1416 = (K > 2u);
constant bool _1429 = (K > 3u);
constant bool _1442 = (K > 4u);
constant bool _1455 = (K > 5u);
constant bool _1468 = (K > 6u);
constant bool _1481 = (K > 7u);
constant bool SCALE_tmp [[function_constant(3)]];
constant bool SCALE = is_function_constant_defined(SCALE_tmp) ? SCALE_tmp : false;

struct Dst
{
    uint d[1];
};

static inline __attribute__((always_inline))
bool sum_fast(thread const uint& i, thread uint& acc, constant Params& pc, const device Src0& s0, const device Src1& s1, const device Src2& s2, const device Src3& s3, const device Src4& s4, const device Src5& s5, const device Src6& s6, const device Src7& s7)
{
    uint x = s0.d[pc.src_off[0] + i];
    uint t = x + x;
    uint lo = t - 2u;
    uint hi = t;
    uint all_bits = x;
    float f = as_type<float>(x);
    if (_1025)
    {
        x = s1.d[pc.src_off[1] + i];
        t = x + x;
        lo = min(lo, (t - 2u));
        hi = max(hi, t);
        all_bits &= x;
        f = spvFAdd(f, as_type<float>(x));
    }
    if (_1055)
    {
        x = s2.d[pc.src_off[2] + i];
        t = x + x;
        lo = min(lo, (t - 2u));
        hi = max(hi, t);
        all_bits &= x;
        f = spvFAdd(f, as_type<float>(x));
    }
    if (_1086)
    {
        x = s3.d[pc.src_off[3] + i];
        t = x + x;
        lo = min(lo, (t - 2u));
        hi = max(hi, t);
        all_bits &= x;
        f = spvFAdd(f, as_type<float>(x));
    }
    if (_1116)
    {
        x = s4.d[pc.src_off[4] + i];
        t = x + x;
        lo = min(lo, (t - 2u));
        hi = max(hi, t);
        all_bits &= x;
        f = spvFAdd(f, as_type<float>(x));
    }
    if (_1147)
    {
        x = s5.d[pc.src_off[5] + i];
        t = x + x;
        lo = min(lo, (t - 2u));
        hi = max(hi, t);
        all_bits &= x;
        f = spvFAdd(f, as_type<float>(x));
    }
    if (_1179)
    {
        x = s6.d[pc.src_off[6] + i];
        t = x + x;
        lo = min(lo, (t - 2u));
        hi = max(hi, t);
        all_bits &= x;
        f = spvFAdd(f, as_type<float>(x));
    }
    if (_1210)
    {
        x = s7.d[pc.src_off[7] + i];
        t = x + x;
        lo = min(lo, (t - 2u));
        hi = max(hi, t);
        all_bits &= x;
        f = spvFAdd(f, as_type<float>(x));
    }
    uint _1245;
    if ((as_type<uint>(f) & 2147483647u) == 0u)
    {
        _1245 = all_bits & 2147483648u;
    }
    else
    {
        _1245 = as_type<uint>(f);
    }
    acc = _1245;
    bool _1260 = (419430398u <= lo) && (hi < 4278190080u);
    bool _1266;
    if (_1260)
    {
        _1266 = (acc & 2147483647u) < 2139095040u;
    }
    else
    {
        _1266 = _1260;
    }
    return _1266;
}

static inline __attribute__((always_inline))
uint src_k(thread const uint& k, thread const uint& i, constant Params& pc, const device Src1& s1, const device Src2& s2, const device Src3& s3, const device Src4& s4, const device Src5& s5, const device Src6& s6, const device Src7& s7)
{
    switch (k)
    {
        case 1u:
        {
            return s1.d[pc.src_off[1] + i];
        }
        case 2u:
        {
            return s2.d[pc.src_off[2] + i];
        }
        case 3u:
        {
            return s3.d[pc.src_off[3] + i];
        }
        case 4u:
        {
            return s4.d[pc.src_off[4] + i];
        }
        case 5u:
        {
            return s5.d[pc.src_off[5] + i];
        }
        case 6u:
        {
            return s6.d[pc.src_off[6] + i];
        }
    }
    return s7.d[pc.src_off[7] + i];
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
        bool _302 = ab == 2139095040u;
        bool _310;
        if (_302)
        {
            _310 = ((a ^ b) & 2147483648u) != 0u;
        }
        else
        {
            _310 = _302;
        }
        return _310 ? 4290772992u : a;
    }
    if (ab == 2139095040u)
    {
        return b;
    }
    if (ab == 0u)
    {
        uint _327;
        if (aa == 0u)
        {
            _327 = a & b;
        }
        else
        {
            _327 = a;
        }
        return _327;
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
    bool _468 = rem > 4u;
    bool _480;
    if (!_468)
    {
        bool _473 = rem == 4u;
        bool _479;
        if (_473)
        {
            _479 = (m & 1u) != 0u;
        }
        else
        {
            _479 = _473;
        }
        _480 = _479;
    }
    else
    {
        _480 = _468;
    }
    if (_480)
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
    bool _509 = (ea - 25u) <= 228u;
    bool _515;
    if (_509)
    {
        _515 = (eb - 25u) <= 228u;
    }
    else
    {
        _515 = _509;
    }
    if (_515)
    {
        float s = spvFAdd(as_type<float>(a), as_type<float>(b));
        uint r = as_type<uint>(s);
        return ((r & 2147483647u) == 0u) ? 0u : r;
    }
    uint param = a;
    uint param_1 = b;
    uint _537 = f32_add_soft(param, param_1);
    return _537;
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
        uint _571;
        if (ab == 0u)
        {
            _571 = 4290772992u;
        }
        else
        {
            _571 = _sign | 2139095040u;
        }
        return _571;
    }
    if (ab == 2139095040u)
    {
        uint _585;
        if (aa == 0u)
        {
            _585 = 4290772992u;
        }
        else
        {
            _585 = _sign | 2139095040u;
        }
        return _585;
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
    ResType _655;
    _655._m0 = ma * mb;
    _655._m1 = mulhi(ma, mb);
    uint lo = _655._m0;
    uint hi = _655._m1;
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
        uint _717;
        if (sh >= 32u)
        {
            _717 = 1u;
        }
        else
        {
            _717 = (m >> sh) | uint((m & ((1u << sh) - 1u)) != 0u);
        }
        m = _717;
        e = 1;
    }
    uint rem = m & 255u;
    m = m >> uint(8);
    bool _741 = rem > 128u;
    bool _753;
    if (!_741)
    {
        bool _746 = rem == 128u;
        bool _752;
        if (_746)
        {
            _752 = (m & 1u) != 0u;
        }
        else
        {
            _752 = _746;
        }
        _753 = _752;
    }
    else
    {
        _753 = _741;
    }
    if (_753)
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
    bool _780 = (ea - 1u) < 254u;
    bool _786;
    if (_780)
    {
        _786 = (eb - 1u) < 254u;
    }
    else
    {
        _786 = _780;
    }
    bool _795;
    if (_786)
    {
        _795 = ((ea + eb) - 128u) <= 251u;
    }
    else
    {
        _795 = _786;
    }
    if (_795)
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
    uint _817;
    if ((x & 2147483648u) != 0u)
    {
        _817 = ~x;
    }
    else
    {
        _817 = x | 2147483648u;
    }
    return _817;
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
    if (_917)
    {
        uint param = a;
        uint param_1 = b;
        return f32_add(param, param_1);
    }
    if (_926)
    {
        uint param_2 = a;
        uint param_3 = b;
        return f32_mul(param_2, param_3);
    }
    if (_935)
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

static inline __attribute__((always_inline))
uint sum_slow(thread const uint& i, constant Params& pc, const device Src0& s0, const device Src1& s1, const device Src2& s2, const device Src3& s3, const device Src4& s4, const device Src5& s5, const device Src6& s6, const device Src7& s7)
{
    uint acc = s0.d[pc.src_off[0] + i];
    for (uint k = 1u; k < K; k++)
    {
        uint param = k;
        uint param_1 = i;
        uint param_2 = acc;
        uint param_3 = src_k(param, param_1, pc, s1, s2, s3, s4, s5, s6, s7);
        acc = combine(param_2, param_3);
    }
    return acc;
}

static inline __attribute__((always_inline))
bool div_small_f32(thread const uint& x, thread const uint& div)
{
    uint ax = x & 2147483647u;
    bool _263 = ax != 0u;
    bool _272;
    if (_263)
    {
        _272 = ax < as_type<uint>(float(div) * 1.1754943508222875079687365372222e-38);
    }
    else
    {
        _272 = _263;
    }
    return _272;
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
    bool _233 = (2u * rem) > div;
    bool _247;
    if (!_233)
    {
        bool _240 = (2u * rem) == div;
        bool _246;
        if (_240)
        {
            _246 = (q & 1u) != 0u;
        }
        else
        {
            _246 = _240;
        }
        _247 = _246;
    }
    else
    {
        _247 = _233;
    }
    if (_247)
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
uint scale1(thread const uint& x, constant Params& pc)
{
    uint _961;
    if (pc.div != 0u)
    {
        uint param = x;
        uint param_1 = pc.div;
        float param_2 = pc.scale;
        _961 = f32_div(param, param_1, param_2);
    }
    else
    {
        uint param_3 = x;
        uint param_4 = as_type<uint>(pc.scale);
        _961 = f32_mul(param_3, param_4);
    }
    return _961;
}

static inline __attribute__((always_inline))
uint scale_acc(thread const uint& x, constant Params& pc)
{
    uint param = x;
    return scale1(param, pc);
}

kernel void main0(constant Params& pc [[buffer(0)]], device Dst& dst [[buffer(0)]], const device Src0& s0 [[buffer(1)]], const device Src1& s1 [[buffer(2)]], const device Src2& s2 [[buffer(3)]], const device Src3& s3 [[buffer(4)]], const device Src4& s4 [[buffer(5)]], const device Src5& s5 [[buffer(6)]], const device Src6& s6 [[buffer(7)]], const device Src7& s7 [[buffer(8)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint _1367 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    uint acc;
    uint param_1;
    for (uint stride = _1367, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        if (_1381)
        {
            uint param = i;
            bool _1388 = sum_fast(param, param_1, pc, s0, s1, s2, s3, s4, s5, s6, s7);
            acc = param_1;
            if (!_1388)
            {
                uint param_2 = i;
                acc = sum_slow(param_2, pc, s0, s1, s2, s3, s4, s5, s6, s7);
            }
        }
        else
        {
            acc = s0.d[pc.src_off[0] + i];
            if (_1403)
            {
                uint param_3 = acc;
                uint param_4 = s1.d[pc.src_off[1] + i];
                acc = combine(param_3, param_4);
            }
            if (_1416)
            {
                uint param_5 = acc;
                uint param_6 = s2.d[pc.src_off[2] + i];
                acc = combine(param_5, param_6);
            }
            if (_1429)
            {
                uint param_7 = acc;
                uint param_8 = s3.d[pc.src_off[3] + i];
                acc = combine(param_7, param_8);
            }
            if (_1442)
            {
                uint param_9 = acc;
                uint param_10 = s4.d[pc.src_off[4] + i];
                acc = combine(param_9, param_10);
            }
            if (_1455)
            {
                uint param_11 = acc;
                uint param_12 = s5.d[pc.src_off[5] + i];
                acc = combine(param_11, param_12);
            }
            if (_1468)
            {
                uint param_13 = acc;
                uint param_14 = s6.d[pc.src_off[6] + i];
                acc = combine(param_13, param_14);
            }
            if (_1481)
            {
                uint param_15 = acc;
                uint param_16 = s7.d[pc.src_off[7] + i];
                acc = combine(param_15, param_16);
            }
        }
        if (SCALE)
        {
            uint param_17 = acc;
            acc = scale_acc(param_17, pc);
        }
        dst.d[pc.dst_off + i] = acc;
    }
}

