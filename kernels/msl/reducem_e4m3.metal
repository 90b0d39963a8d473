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
constant bool _1135 = (OP == 0u);
constant bool _1144 = (OP == 1u);
constant bool _1153 = (OP == 2u);

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

constant uint _1223_tmp [[function_constant(0)]];
constant uint _1223 = is_function_constant_defined(_1223_tmp) ? _1223_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_1223, 1u, 1u);

struct Src0
{
    uchar d[1];
};

constant uint K_tmp [[function_constant(2)]];
constant uint K = is_function_constant_defined(K_tmp) ? K_tmp : 2u;
constant bool _1258 = (K > 1u);

struct Src1
{
    uchar d[1];
};

constant bool _1278 = (K > 2u);

struct Src2
{
    uchar d[1];
};

constant bool _1298 = (K > 3u);

struct Src3
{
    uchar d[1];
};

constant bool _1318 = (K > 4u);

struct Src4
{
    uchar d[1];
};

constant bool _1339 = (K > 5u);

struct Src5
{
    uchar d[1];
};

constant bool _1361 = (K > 6u);

struct Src6
{
    uchar d[1];
};

constant bool _1382 = (K > 7u);

struct Src7
{
    uchar d[1];
};

constant bool SCALE_tmp [[function_constant(3)]];
constant bool SCALE = is_function_constant_defined(SCALE_tmp) ? SCALE_tmp : false;

struct Dst0
{
    uchar d[1];
};

constant uint M_tmp [[function_constant(5)]];
constant uint M = is_function_constant_defined(M_tmp) ? M_tmp : 1u;
constant bool _1424 = (M > 1u);

struct Dst1
{
    uchar d[1];
};

constant bool _1438 = (M > 2u);

struct Dst2
{
    uchar d[1];
};

constant bool _1452 = (M > 3u);

struct Dst3
{
    uchar d[1];
};

constant bool _1466 = (M > 4u);

struct Dst4
{
    uchar d[1];
};

constant bool _1480 = (M > 5u);

struct Dst5
{
    uchar d[1];
};

constant bool _1494 = (M > 6u);

struct Dst6
{
    uchar d[1];
};

constant bool _1508 = (M > 7u);

struct Dst7
{
    uchar d[1];
};

static inline __attribute__((always_inline))
uint e4m3_to_f32(thread const uint& h)
{
    uint _sign = (h & 128u) << uint(24);
    uint e = (h >> uint(3)) & 15u;
    uint m = h & 7u;
    if ((h & 127u) == 127u)
    {
        return _sign | 2143289344u;
    }
    if (e == 0u)
    {
        if (m == 0u)
        {
            return _sign;
        }
        int s = 3 - int(spvFindUMSB(m));
        return (_sign | (uint(121 - s) << uint(23))) | (((m << uint(s)) & 7u) << uint(20));
    }
    return (_sign | ((e + 120u) << uint(23))) | (m << uint(20));
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
        bool _306 = ab == 2139095040u;
        bool _314;
        if (_306)
        {
            _314 = ((a ^ b) & 2147483648u) != 0u;
        }
        else
        {
            _314 = _306;
        }
        return _314 ? 4290772992u : a;
    }
    if (ab == 2139095040u)
    {
        return b;
    }
    if (ab == 0u)
    {
        uint _331;
        if (aa == 0u)
        {
            _331 = a & b;
        }
        else
        {
            _331 = a;
        }
        return _331;
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
    bool _472 = rem > 4u;
    bool _484;
    if (!_472)
    {
        bool _477 = rem == 4u;
        bool _483;
        if (_477)
        {
            _483 = (m & 1u) != 0u;
        }
        else
        {
            _483 = _477;
        }
        _484 = _483;
    }
    else
    {
        _484 = _472;
    }
    if (_484)
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
    bool _513 = (ea - 25u) <= 228u;
    bool _519;
    if (_513)
    {
        _519 = (eb - 25u) <= 228u;
    }
    else
    {
        _519 = _513;
    }
    if (_519)
    {
        float s = spvFAdd(as_type<float>(a), as_type<float>(b));
        uint r = as_type<uint>(s);
        return ((r & 2147483647u) == 0u) ? 0u : r;
    }
    uint param = a;
    uint param_1 = b;
    uint _541 = f32_add_soft(param, param_1);
    return _541;
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
        uint _575;
        if (ab == 0u)
        {
            _575 = 4290772992u;
        }
        else
        {
            _575 = _sign | 2139095040u;
        }
        return _575;
    }
    if (ab == 2139095040u)
    {
        uint _589;
        if (aa == 0u)
        {
            _589 = 4290772992u;
        }
        else
        {
            _589 = _sign | 2139095040u;
        }
        return _589;
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
    ResType _658;
    _658._m0 = ma * mb;
    _658._m1 = mulhi(ma, mb);
    uint lo = _658._m0;
    uint hi = _658._m1;
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
        uint _720;
        if (sh >= 32u)
        {
            _720 = 1u;
        }
        else
        {
            _720 = (m >> sh) | uint((m & ((1u << sh) - 1u)) != 0u);
        }
        m = _720;
        e = 1;
    }
    uint rem = m & 255u;
    m = m >> uint(8);
    bool _744 = rem > 128u;
    bool _756;
    if (!_744)
    {
        bool _749 = rem == 128u;
        bool _755;
        if (_749)
        {
            _755 = (m & 1u) != 0u;
        }
        else
        {
            _755 = _749;
        }
        _756 = _755;
    }
    else
    {
        _756 = _744;
    }
    if (_756)
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
    bool _783 = (ea - 1u) < 254u;
    bool _789;
    if (_783)
    {
        _789 = (eb - 1u) < 254u;
    }
    else
    {
        _789 = _783;
    }
    bool _798;
    if (_789)
    {
        _798 = ((ea + eb) - 128u) <= 251u;
    }
    else
    {
        _798 = _789;
    }
    if (_798)
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
    uint _820;
    if ((x & 2147483648u) != 0u)
    {
        _820 = ~x;
    }
    else
    {
        _820 = x | 2147483648u;
    }
    return _820;
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
    if (_1135)
    {
        uint param = a;
        uint param_1 = b;
        return f32_add(param, param_1);
    }
    if (_1144)
    {
        uint param_2 = a;
        uint param_3 = b;
        return f32_mul(param_2, param_3);
    }
    if (_1153)
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
bool div_small_f32(thread const uint& x, thread const uint& div)
{
    uint ax = x & 2147483647u;
    bool _267 = ax != 0u;
    bool _276;
    if (_267)
    {
        _276 = ax < as_type<uint>(float(div) * 1.1754943508222875079687365372222e-38);
    }
    else
    {
        _276 = _267;
    }
    return _276;
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
    bool _237 = (2u * rem) > div;
    bool _251;
    if (!_237)
    {
        bool _244 = (2u * rem) == div;
        bool _250;
        if (_244)
        {
            _250 = (q & 1u) != 0u;
        }
        else
        {
            _250 = _244;
        }
        _251 = _250;
    }
    else
    {
        _251 = _237;
    }
    if (_251)
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
    uint _1180;
    if (pc.div != 0u)
    {
        uint param = x;
        uint param_1 = pc.div;
        float param_2 = pc.scale;
        _1180 = f32_div(param, param_1, param_2);
    }
    else
    {
        uint param_3 = x;
        uint param_4 = as_type<uint>(pc.scale);
        _1180 = f32_mul(param_3, param_4);
    }
    return _1180;
}

static inline __attribute__((always_inline))
uint scale_acc(thread const uint& x, constant Params& pc)
{
    uint param = x;
    return scale1(param, pc);
}

static inline __attribute__((always_inline))
uint f32_to_f8(thread const uint& b, thread const uint& mbits, thread const int& bias0, thread const uint& maxb, thread const bool& inf)
{
    uint _sign = (b >> uint(24)) & 128u;
    uint a = b & 2147483647u;
    if (a > 2139095040u)
    {
        uint _994;
        if (inf)
        {
            _994 = (_sign | 126u) | ((a >> (23u - mbits)) & 3u);
        }
        else
        {
            _994 = _sign | 127u;
        }
        return _994;
    }
    if (a == 2139095040u)
    {
        uint _1018;
        if (inf)
        {
            _1018 = _sign | 124u;
        }
        else
        {
            _1018 = _sign | maxb;
        }
        return _1018;
    }
    int _exp = int(a >> uint(23));
    if (_exp == 0)
    {
        return _sign;
    }
    uint m = (a & 8388607u) | 8388608u;
    int e = (_exp - 127) + bias0;
    uint shift = 23u - mbits;
    if (e <= 0)
    {
        shift += uint(1 - e);
        e = 0;
        if (shift > 24u)
        {
            return _sign;
        }
    }
    uint r = m >> shift;
    if (e > 0)
    {
        r = (uint(e) << mbits) | (r & ((1u << mbits) - 1u));
    }
    uint rem = m & ((1u << shift) - 1u);
    uint half_ = 1u << (shift - 1u);
    bool _1098 = rem > half_;
    bool _1111;
    if (!_1098)
    {
        bool _1104 = rem == half_;
        bool _1110;
        if (_1104)
        {
            _1110 = (r & 1u) != 0u;
        }
        else
        {
            _1110 = _1104;
        }
        _1111 = _1110;
    }
    else
    {
        _1111 = _1098;
    }
    if (_1111)
    {
        r++;
    }
    return _sign | min(r, maxb);
}

static inline __attribute__((always_inline))
uint f32_to_e4m3(thread const uint& b)
{
    uint param = b;
    uint param_1 = 3u;
    int param_2 = 7;
    uint param_3 = 126u;
    bool param_4 = false;
    return f32_to_f8(param, param_1, param_2, param_3, param_4);
}

kernel void main0(constant Params& pc [[buffer(0)]], device Dst0& d0 [[buffer(0)]], device Dst1& d1 [[buffer(1)]], device Dst2& d2 [[buffer(2)]], device Dst3& d3 [[buffer(3)]], device Dst4& d4 [[buffer(4)]], device Dst5& d5 [[buffer(5)]], device Dst6& d6 [[buffer(6)]], device Dst7& d7 [[buffer(7)]], const device Src0& s0 [[buffer(8)]], const device Src1& s1 [[buffer(9)]], const device Src2& s2 [[buffer(10)]], const device Src3& s3 [[buffer(11)]], const device Src4& s4 [[buffer(12)]], const device Src5& s5 [[buffer(13)]], const device Src6& s6 [[buffer(14)]], const device Src7& s7 [[buffer(15)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint _1226 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint stride = _1226, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        uint param = uint(s0.d[pc.src_off[0] + i]);
        uint acc = e4m3_to_f32(param);
        if (_1258)
        {
            uint param_1 = uint(s1.d[pc.src_off[1] + i]);
            uint param_2 = acc;
            uint param_3 = e4m3_to_f32(param_1);
            acc = combine(param_2, param_3);
        }
        if (_1278)
        {
            uint param_4 = uint(s2.d[pc.src_off[2] + i]);
            uint param_5 = acc;
            uint param_6 = e4m3_to_f32(param_4);
            acc = combine(param_5, param_6);
        }
        if (_1298)
        {
            uint param_7 = uint(s3.d[pc.src_off[3] + i]);
            uint param_8 = acc;
            uint param_9 = e4m3_to_f32(param_7);
            acc = combine(param_8, param_9);
        }
        if (_1318)
        {
            uint param_10 = uint(s4.d[pc.src_off[4] + i]);
            uint param_11 = acc;
            uint param_12 = e4m3_to_f32(param_10);
            acc = combine(param_11, param_12);
        }
        if (_1339)
        {
            uint param_13 = uint(s5.d[pc.src_off[5] + i]);
            uint param_14 = acc;
            uint param_15 = e4m3_to_f32(param_13);
            acc = combine(param_14, param_15);
        }
        if (_1361)
        {
            uint param_16 = uint(s6.d[pc.src_off[6] + i]);
            uint param_17 = acc;
            uint param_18 = e4m3_to_f32(param_16);
            acc = combine(param_17, param_18);
        }
        if (_1382)
        {
            uint param_19 = uint(s7.d[pc.src_off[7] + i]);
            uint param_20 = acc;
            uint param_21 = e4m3_to_f32(param_19);
            acc = combine(param_20, param_21);
        }
        if (SCALE)
        {
            uint param_22 = acc;
            acc = scale_acc(param_22, pc);
        }
        uint param_23 = acc;
        uint res = f32_to_e4m3(param_23);
        d0.d[pc.dst_off[0] + i] = uchar(res);
        if (_1424)
        {
            d1.d[pc.dst_off[1] + i] = uchar(res);
        }
        if (_1438)
        {
            d2.d[pc.dst_off[2] + i] = uchar(res);
        }
        if (_1452)
        {
            d3.d[pc.dst_off[3] + i] = uchar(res);
        }
        if (_1466)
        {
            d4.d[pc.dst_off[4] + i] = uchar(res);
        }
        if (_1480)
        {
            d5.d[pc.dst_off[5] + i] = uchar(res);
        }
        if (_1494)
        {
            d6.d[pc.dst_off[6] + i] = uchar(res);
        }
        if (_1508)
        {
            d7.d[pc.dst_off[7] + i] = uchar(res);
        }
    }
}

