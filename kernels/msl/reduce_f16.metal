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
constant bool _1113 = (OP == 0u);
constant bool _1122 = (OP == 1u);
constant bool _1131 = (OP == 2u);

struct Params
{
    uint n;
    uint dst_off;
    uint src_off[8];
    float scale;
    char _m4_pad[4];
    uint div;
};

constant uint _1200_tmp [[function_constant(0)]];
constant uint _1200 = is_function_constant_defined(_1200_tmp) ? _1200_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_1200, 1u, 1u);
constant uint K_tmp [[function_constant(2)]];
constant uint K = is_function_constant_defined(K_tmp) ? K_tmp : 2u;
constant bool _1218 = (K == 0u);

struct Dst
{
    ushort d[1];
};

struct Src0
{
    ushort d[1];
};

constant bool _1254 = (K > 1u);

struct Src1
{
    ushort d[1];
};

constant bool _1274 = (K > 2u);

struct Src2
{
    ushort d[1];
};

constant bool _1295 = (K > 3u);

struct Src3
{
    ushort d[1];
};

constant bool _1315 = (K > 4u);

struct Src4
{
    ushort d[1];
};

constant bool _1336 = (K > 5u);

struct Src5
{
    ushort d[1];
};

constant bool _1358 = (K > 6u);

struct Src6
{
    ushort d[1];
};

constant bool _1379 = (K > 7u);

struct Src7
{
    ushort d[1];
};

constant bool SCALE_tmp [[function_constant(3)]];
constant bool SCALE = is_function_constant_defined(SCALE_tmp) ? SCALE_tmp : false;

static inline __attribute__((always_inline))
uint f16_to_f32(thread const uint& h)
{
    uint _sign = (h & 32768u) << uint(16);
    uint e = (h >> uint(10)) & 31u;
    uint m = h & 1023u;
    if (e == 31u)
    {
        return (_sign | 2139095040u) | (m << uint(13));
    }
    if (e == 0u)
    {
        if (m == 0u)
        {
            return _sign;
        }
        int s = 10 - int(spvFindUMSB(m));
        return (_sign | (uint(113 - s) << uint(23))) | (((m << uint(s)) & 1023u) << uint(13));
    }
    return (_sign | ((e + 112u) << uint(23))) | (m << uint(13));
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
        bool _297 = ab == 2139095040u;
        bool _305;
        if (_297)
        {
            _305 = ((a ^ b) & 2147483648u) != 0u;
        }
        else
        {
            _305 = _297;
        }
        return _305 ? 4290772992u : a;
    }
    if (ab == 2139095040u)
    {
        return b;
    }
    if (ab == 0u)
    {
        uint _322;
        if (aa == 0u)
        {
            _322 = a & b;
        }
        else
        {
            _322 = a;
        }
        return _322;
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
    bool _463 = rem > 4u;
    bool _475;
    if (!_463)
    {
        bool _468 = rem == 4u;
        bool _474;
        if (_468)
        {
            _474 = (m & 1u) != 0u;
        }
        else
        {
            _474 = _468;
        }
        _475 = _474;
    }
    else
    {
        _475 = _463;
    }
    if (_475)
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
    bool _504 = (ea - 25u) <= 228u;
    bool _510;
    if (_504)
    {
        _510 = (eb - 25u) <= 228u;
    }
    else
    {
        _510 = _504;
    }
    if (_510)
    {
        float s = spvFAdd(as_type<float>(a), as_type<float>(b));
        uint r = as_type<uint>(s);
        return ((r & 2147483647u) == 0u) ? 0u : r;
    }
    uint param = a;
    uint param_1 = b;
    uint _532 = f32_add_soft(param, param_1);
    return _532;
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
        uint _566;
        if (ab == 0u)
        {
            _566 = 4290772992u;
        }
        else
        {
            _566 = _sign | 2139095040u;
        }
        return _566;
    }
    if (ab == 2139095040u)
    {
        uint _580;
        if (aa == 0u)
        {
            _580 = 4290772992u;
        }
        else
        {
            _580 = _sign | 2139095040u;
        }
        return _580;
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
    ResType _650;
    _650._m0 = ma * mb;
    _650._m1 = mulhi(ma, mb);
    uint lo = _650._m0;
    uint hi = _650._m1;
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
        uint _712;
        if (sh >= 32u)
        {
            _712 = 1u;
        }
        else
        {
            _712 = (m >> sh) | uint((m & ((1u << sh) - 1u)) != 0u);
        }
        m = _712;
        e = 1;
    }
    uint rem = m & 255u;
    m = m >> uint(8);
    bool _736 = rem > 128u;
    bool _748;
    if (!_736)
    {
        bool _741 = rem == 128u;
        bool _747;
        if (_741)
        {
            _747 = (m & 1u) != 0u;
        }
        else
        {
            _747 = _741;
        }
        _748 = _747;
    }
    else
    {
        _748 = _736;
    }
    if (_748)
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
    bool _775 = (ea - 1u) < 254u;
    bool _781;
    if (_775)
    {
        _781 = (eb - 1u) < 254u;
    }
    else
    {
        _781 = _775;
    }
    bool _790;
    if (_781)
    {
        _790 = ((ea + eb) - 128u) <= 251u;
    }
    else
    {
        _790 = _781;
    }
    if (_790)
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
    uint _812;
    if ((x & 2147483648u) != 0u)
    {
        _812 = ~x;
    }
    else
    {
        _812 = x | 2147483648u;
    }
    return _812;
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
    if (_1113)
    {
        uint param = a;
        uint param_1 = b;
        return f32_add(param, param_1);
    }
    if (_1122)
    {
        uint param_2 = a;
        uint param_3 = b;
        return f32_mul(param_2, param_3);
    }
    if (_1131)
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
    bool _258 = ax != 0u;
    bool _267;
    if (_258)
    {
        _267 = ax < as_type<uint>(float(div) * 1.1754943508222875079687365372222e-38);
    }
    else
    {
        _267 = _258;
    }
    return _267;
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
    bool _228 = (2u * rem) > div;
    bool _242;
    if (!_228)
    {
        bool _235 = (2u * rem) == div;
        bool _241;
        if (_235)
        {
            _241 = (q & 1u) != 0u;
        }
        else
        {
            _241 = _235;
        }
        _242 = _241;
    }
    else
    {
        _242 = _228;
    }
    if (_242)
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
    uint _1157;
    if (pc.div != 0u)
    {
        uint param = x;
        uint param_1 = pc.div;
        float param_2 = pc.scale;
        _1157 = f32_div(param, param_1, param_2);
    }
    else
    {
        uint param_3 = x;
        uint param_4 = as_type<uint>(pc.scale);
        _1157 = f32_mul(param_3, param_4);
    }
    return _1157;
}

static inline __attribute__((always_inline))
uint scale_acc(thread const uint& x, constant Params& pc)
{
    uint param = x;
    return scale1(param, pc);
}

static inline __attribute__((always_inline))
uint f32_to_f16(thread const uint& b)
{
    uint _sign = (b >> uint(16)) & 32768u;
    uint _exp = (b >> uint(23)) & 255u;
    uint mant = b & 8388607u;
    if (_exp == 255u)
    {
        uint _992;
        if (mant != 0u)
        {
            _992 = (_sign | 32256u) | (mant >> uint(13));
        }
        else
        {
            _992 = _sign | 31744u;
        }
        return _992;
    }
    int e = (int(_exp) - 127) + 15;
    if (e >= 31)
    {
        return _sign | 31744u;
    }
    if (e <= 0)
    {
        if (e < (-10))
        {
            return _sign;
        }
        uint m = mant | 8388608u;
        uint shift = uint(14 - e);
        uint r = m >> shift;
        uint rem = m & ((1u << shift) - 1u);
        uint half_ = 1u << (shift - 1u);
        bool _1055 = rem > half_;
        bool _1068;
        if (!_1055)
        {
            bool _1061 = rem == half_;
            bool _1067;
            if (_1061)
            {
                _1067 = (r & 1u) != 0u;
            }
            else
            {
                _1067 = _1061;
            }
            _1068 = _1067;
        }
        else
        {
            _1068 = _1055;
        }
        if (_1068)
        {
            r++;
        }
        return _sign | r;
    }
    uint r_1 = (uint(e) << uint(10)) | (mant >> uint(13));
    uint rem_1 = mant & 8191u;
    bool _1090 = rem_1 > 4096u;
    bool _1102;
    if (!_1090)
    {
        bool _1095 = rem_1 == 4096u;
        bool _1101;
        if (_1095)
        {
            _1101 = (r_1 & 1u) != 0u;
        }
        else
        {
            _1101 = _1095;
        }
        _1102 = _1101;
    }
    else
    {
        _1102 = _1090;
    }
    if (_1102)
    {
        r_1++;
    }
    return _sign | r_1;
}

kernel void main0(constant Params& pc [[buffer(0)]], device Dst& dst [[buffer(0)]], const device Src0& s0 [[buffer(1)]], const device Src1& s1 [[buffer(2)]], const device Src2& s2 [[buffer(3)]], const device Src3& s3 [[buffer(4)]], const device Src4& s4 [[buffer(5)]], const device Src5& s5 [[buffer(6)]], const device Src6& s6 [[buffer(7)]], const device Src7& s7 [[buffer(8)]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]])
{
    uint _1203 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint stride = _1203, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        if (_1218)
        {
            dst.d[pc.dst_off + i] = s0.d[pc.src_off[0] + i];
            continue;
        }
        uint param = uint(s0.d[pc.src_off[0] + i]);
        uint acc = f16_to_f32(param);
        if (_1254)
        {
            uint param_1 = uint(s1.d[pc.src_off[1] + i]);
            uint param_2 = acc;
            uint param_3 = f16_to_f32(param_1);
            acc = combine(param_2, param_3);
        }
        if (_1274)
        {
            uint param_4 = uint(s2.d[pc.src_off[2] + i]);
            uint param_5 = acc;
            uint param_6 = f16_to_f32(param_4);
            acc = combine(param_5, param_6);
        }
        if (_1295)
        {
            uint param_7 = uint(s3.d[pc.src_off[3] + i]);
            uint param_8 = acc;
            uint param_9 = f16_to_f32(param_7);
            acc = combine(param_8, param_9);
        }
        if (_1315)
        {
            uint param_10 = uint(s4.d[pc.src_off[4] + i]);
            uint param_11 = acc;
            uint param_12 = f16_to_f32(param_10);
            acc = combine(param_11, param_12);
        }
        if (_1336)
        {
            uint param_13 = uint(s5.d[pc.src_off[5] + i]);
            uint param_14 = acc;
            uint param_15 = f16_to_f32(param_13);
            acc = combine(param_14, param_15);
        }
        if (_1358)
        {
            uint param_16 = uint(s6.d[pc.src_off[6] + i]);
            uint param_17 = acc;
            uint param_18 = f16_to_f32(param_16);
            acc = combine(param_17, param_18);
        }
        if (_1379)
        {
            uint param_19 = uint(s7.d[pc.src_off[7] + i]);
            uint param_20 = acc;
            uint param_21 = f16_to_f32(param_19);
            acc = combine(param_20, param_21);
        }
        if (SCALE)
        {
            uint param_22 = acc;
            acc = scale_acc(param_22, pc);
        }
        uint param_23 = acc;
        uint res = f32_to_f16(param_23);
        dst.d[pc.dst_off + i] = ushort(res);
    }
}

