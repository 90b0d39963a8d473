// float32 arithmetic on the bits of binary32 values (uint), exactly as IEEE
// 754 rounds to nearest even with subnormals, whatever the device does with
// subnormals: included by reduce.comp for the 16-bit float kernels
// (reduce_f16, reduce_bf16), whose results must be the host backend's bit for
// bit (host/exec.go reduce16: float32 in Go, subnormals kept), and by
// reduce.comp and scale.comp for the float32 kernels of devices that do not
// promise to keep subnormals (the _ftz variants: reduce_f32_ftz and the
// others; devices with shaderDenormPreserveFloat32 run reduce_f32 and the
// others, which declare DenormPreserve and use the hardware's arithmetic, and
// so do devices without it whose self-test at open found that arithmetic
// keeping subnormals, as lavapipe's does).
// kernels/float32_test.go models every function here in Go and checks the
// model against Go's float32 arithmetic; keep the two in step.
//
// Vulkan lets a device flush subnormal inputs and results of float
// instructions to zero unless the kernel declares DenormPreserve, which not
// every device takes (neither the H200 nor lavapipe does); an H200 flushes
// (in reduce_f32, 2^-100 * 2^-30 and 2^-140 + 2^-140 came out 0), lavapipe
// keeps them. And
// bfloat16 values, partial sums and products are subnormal in float32 often
// enough to matter. So every operation runs
// on the hardware only where its inputs and result are normal, finite and
// nonzero (Vulkan rounds OpFAdd and OpFMul correctly there), and otherwise
// in integer arithmetic here: zeros, infinities, NaN, subnormals, and values
// near the ends of the exponent range. The hardware path covers all but
// such values (every sum of half values, for one), so the kernels stay
// memory-bound.
//
// NaN: max and min return a NaN input itself (as host maximum/minimum do);
// add and mul return the first NaN input quieted, and a new NaN (Inf - Inf,
// 0 * Inf) is 0xFFC00000, as amd64 computes them. The host's NaN payloads
// depend on its CPU and compiler, so tests compare NaN as NaN.

const uint F32_SIGN = 0x80000000u;
const uint F32_ABS = 0x7FFFFFFFu;
const uint F32_INF = 0x7F800000u;
const uint F32_QUIET = 0x00400000u;
const uint F32_NEW_NAN = 0xFFC00000u;

// f32_add_soft is a + b, every case.
uint f32_add_soft(uint a, uint b) {
    uint aa = a & F32_ABS, ab = b & F32_ABS;
    if (aa > F32_INF) return a | F32_QUIET;
    if (ab > F32_INF) return b | F32_QUIET;
    if (aa == F32_INF) return (ab == F32_INF && ((a ^ b) & F32_SIGN) != 0u) ? F32_NEW_NAN : a;
    if (ab == F32_INF) return b;
    if (ab == 0u) return aa == 0u ? (a & b) : a; // -0 + -0 is -0, +0 + -0 is +0
    if (aa == 0u) return b;
    if (ab > aa) { // |a| >= |b| from here on
        uint t = a; a = b; b = t;
        t = aa; aa = ab; ab = t;
    }
    uint ea = aa >> 23, eb = ab >> 23;
    uint ma = aa & 0x7FFFFFu, mb = ab & 0x7FFFFFu;
    // Significands with their leading bit and 3 bits below them; a
    // subnormal has exponent 1 and no leading bit.
    if (ea != 0u) ma |= 0x800000u; else ea = 1u;
    if (eb != 0u) mb |= 0x800000u; else eb = 1u;
    ma <<= 3;
    mb <<= 3;
    // Align b, jamming what it shifts out into its lowest bit: the rounding
    // point is at least 2 bits above, so the result rounds as the exact one.
    uint d = ea - eb;
    if (d >= 27u) {
        mb = 1u;
    } else if (d != 0u) {
        mb = (mb >> d) | uint((mb & ((1u << d) - 1u)) != 0u);
    }
    uint e = ea, m;
    if (((a ^ b) & F32_SIGN) == 0u) {
        m = ma + mb;
        if (m >= (1u << 27)) { // carry: one bit right, jammed
            m = (m >> 1) | (m & 1u);
            e += 1u;
        }
    } else {
        m = ma - mb;
        if (m == 0u) return 0u; // x - x is +0
        // Normalize; only down to exponent 1 (a subnormal result is exact).
        uint sh = min(uint(26 - findMSB(m)), e - 1u);
        m <<= sh;
        e -= sh;
    }
    uint rem = m & 7u;
    m >>= 3;
    if (rem > 4u || (rem == 4u && (m & 1u) != 0u)) m += 1u;
    // The exponent field plus the significand, leading bit included: a
    // carry of the rounding moves to the next exponent, a subnormal (e 1,
    // no leading bit) encodes as itself, and the largest finite value
    // rounded up is Inf.
    return (a & F32_SIGN) | min(((e - 1u) << 23) + m, F32_INF);
}

// f32_add is a + b: on the hardware where both are normal with exponents
// from -102 to 126 (then the sum is a multiple of 2^-125, so 0 or normal,
// and finite), else f32_add_soft.
uint f32_add(uint a, uint b) {
    uint ea = (a >> 23) & 0xFFu, eb = (b >> 23) & 0xFFu;
    if (ea - 25u <= 228u && eb - 25u <= 228u) {
        precise float s = uintBitsToFloat(a) + uintBitsToFloat(b);
        uint r = floatBitsToUint(s);
        return (r & F32_ABS) == 0u ? 0u : r; // x + -x is +0
    }
    return f32_add_soft(a, b);
}

// f32_mul_soft is a * b, every case.
uint f32_mul_soft(uint a, uint b) {
    uint sign = (a ^ b) & F32_SIGN;
    uint aa = a & F32_ABS, ab = b & F32_ABS;
    if (aa > F32_INF) return a | F32_QUIET;
    if (ab > F32_INF) return b | F32_QUIET;
    if (aa == F32_INF) return ab == 0u ? F32_NEW_NAN : sign | F32_INF;
    if (ab == F32_INF) return aa == 0u ? F32_NEW_NAN : sign | F32_INF;
    if (aa == 0u || ab == 0u) return sign;
    // Significands of 24 bits with the leading one (subnormals normalized),
    // biased exponents (below 1 for subnormals).
    int ea = int(aa >> 23), eb = int(ab >> 23);
    uint ma = aa & 0x7FFFFFu, mb = ab & 0x7FFFFFu;
    if (ea == 0) {
        int s = 23 - findMSB(ma);
        ma <<= s;
        ea = 1 - s;
    } else {
        ma |= 0x800000u;
    }
    if (eb == 0) {
        int s = 23 - findMSB(mb);
        mb <<= s;
        eb = 1 - s;
    } else {
        mb |= 0x800000u;
    }
    // The exact 48-bit product, 2^46 <= p < 2^48; its top 32 bits with the
    // rest jammed into the lowest.
    uint hi, lo;
    umulExtended(ma, mb, hi, lo);
    int e = ea + eb - 127;
    uint m;
    if (hi >= 0x8000u) {
        m = (hi << 16) | (lo >> 16) | uint((lo & 0xFFFFu) != 0u);
        e += 1;
    } else {
        m = (hi << 17) | (lo >> 15) | uint((lo & 0x7FFFu) != 0u);
    }
    if (e >= 255) return sign | F32_INF;
    if (e < 1) { // subnormal: shift to exponent 1, jammed
        uint sh = uint(1 - e);
        m = sh >= 32u ? 1u : (m >> sh) | uint((m & ((1u << sh) - 1u)) != 0u);
        e = 1;
    }
    uint rem = m & 0xFFu;
    m >>= 8;
    if (rem > 0x80u || (rem == 0x80u && (m & 1u) != 0u)) m += 1u;
    return sign | min((uint(e - 1) << 23) + m, F32_INF);
}

// f32_mul is a * b: on the hardware where both are normal and the product
// of their exponents' powers of two is from 2^-126 to 2^125 (then the
// product is normal and finite), else f32_mul_soft.
uint f32_mul(uint a, uint b) {
    uint ea = (a >> 23) & 0xFFu, eb = (b >> 23) & 0xFFu;
    if (ea - 1u < 254u && eb - 1u < 254u && ea + eb - 128u <= 251u) {
        precise float p = uintBitsToFloat(a) * uintBitsToFloat(b);
        return floatBitsToUint(p);
    }
    return f32_mul_soft(a, b);
}

// f32_key orders binary32 bits as their values: -0 below +0.
uint f32_key(uint x) { return (x & F32_SIGN) != 0u ? ~x : x | F32_SIGN; }

// f32_max and f32_min are the host's maximum and minimum (IEEE 754-2019): a
// NaN input (a first) is the result as it is; -0 < +0.
uint f32_max(uint a, uint b) {
    if ((a & F32_ABS) > F32_INF) return a;
    if ((b & F32_ABS) > F32_INF) return b;
    return f32_key(a) >= f32_key(b) ? a : b;
}

uint f32_min(uint a, uint b) {
    if ((a & F32_ABS) > F32_INF) return a;
    if ((b & F32_ABS) > F32_INF) return b;
    return f32_key(a) <= f32_key(b) ? a : b;
}

// f32_div is x / N correctly rounded, as the host computes it
// (float32(float64(x) / N)), for r = 1/N rounded to float and an N that
// backend.Divisor accepts (N <= 2^20): NaN, infinities and zeros as they
// are; a quotient of at least the least normal by divide (divide.glsl, exact
// on devices that flush too); a smaller one (a subnormal, or rounding up
// to the least normal) by integer long division (divide_small_f32).
uint f32_div(uint x, uint div, float r) {
    uint ax = x & F32_ABS;
    if (ax >= F32_INF || ax == 0u) return x;
    if (div_small_f32(x, div)) return divide_small_f32(x, div);
    return floatBitsToUint(divide(uintBitsToFloat(x), div, r));
}

// f16_to_f32 widens binary16 bits to binary32 bits, exactly; a NaN keeps its
// payload (host F16ToF32).
uint f16_to_f32(uint h) {
    uint sign = (h & 0x8000u) << 16;
    uint e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    if (e == 0x1Fu) return sign | F32_INF | (m << 13);
    if (e == 0u) {
        if (m == 0u) return sign;
        int s = 10 - findMSB(m); // subnormal m * 2^-24: normalize
        return sign | (uint(113 - s) << 23) | (((m << s) & 0x3FFu) << 13);
    }
    return sign | ((e + 112u) << 23) | (m << 13);
}

// f32_to_f16 rounds binary32 bits to binary16 bits, to nearest even;
// overflow gives Inf, a NaN stays a quiet NaN with the top of its payload
// (host F32ToF16, step for step).
uint f32_to_f16(uint b) {
    uint sign = (b >> 16) & 0x8000u;
    uint exp = (b >> 23) & 0xFFu, mant = b & 0x7FFFFFu;
    if (exp == 0xFFu) return mant != 0u ? sign | 0x7E00u | (mant >> 13) : sign | 0x7C00u;
    int e = int(exp) - 127 + 15;
    if (e >= 0x1F) return sign | 0x7C00u;
    if (e <= 0) {
        if (e < -10) return sign;
        uint m = mant | 0x800000u;
        uint shift = uint(14 - e);
        uint r = m >> shift, rem = m & ((1u << shift) - 1u), half_ = 1u << (shift - 1u);
        if (rem > half_ || (rem == half_ && (r & 1u) != 0u)) r += 1u;
        return sign | r;
    }
    uint r = (uint(e) << 10) | (mant >> 13), rem = mant & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u) != 0u)) r += 1u; // may carry to Inf
    return sign | r;
}

// bf16_to_f32 widens bfloat16 bits: the top half of a binary32.
uint bf16_to_f32(uint h) { return h << 16; }

// f32_to_bf16 rounds binary32 bits to bfloat16 bits, to nearest even; a NaN
// stays a quiet NaN (host F32ToBF16).
uint f32_to_bf16(uint b) {
    if ((b & F32_ABS) > F32_INF) return (b >> 16) | 0x40u;
    return (b + 0x7FFFu + ((b >> 16) & 1u)) >> 16;
}

// e4m3_to_f32 widens OCP E4M3 (FN) bits to binary32 bits, exactly;
// S.1111.111 is a quiet NaN (host E4M3ToF32).
uint e4m3_to_f32(uint h) {
    uint sign = (h & 0x80u) << 24;
    uint e = (h >> 3) & 0xFu, m = h & 7u;
    if ((h & 0x7Fu) == 0x7Fu) return sign | 0x7FC00000u;
    if (e == 0u) {
        if (m == 0u) return sign;
        int s = 3 - findMSB(m); // subnormal m * 2^-9: normalize
        return sign | (uint(121 - s) << 23) | (((m << s) & 7u) << 20);
    }
    return sign | ((e + 120u) << 23) | (m << 20);
}

// e5m2_to_f32 widens OCP E5M2 bits to binary32 bits, exactly; a NaN keeps
// its payload (host E5M2ToF32).
uint e5m2_to_f32(uint h) {
    uint sign = (h & 0x80u) << 24;
    uint e = (h >> 2) & 0x1Fu, m = h & 3u;
    if (e == 0x1Fu) return sign | F32_INF | (m << 21);
    if (e == 0u) {
        if (m == 0u) return sign;
        int s = 2 - findMSB(m); // subnormal m * 2^-16: normalize
        return sign | (uint(113 - s) << 23) | (((m << s) & 3u) << 21);
    }
    return sign | ((e + 112u) << 23) | (m << 21);
}

// f32_to_f8 rounds binary32 bits to the bits of an OCP 8-bit format (mbits
// fraction bits, exponent bias bias, largest finite value maxb; inf: E5M2,
// with infinities), to nearest even; a finite overflow saturates to maxb,
// Inf too where the format has none; a NaN stays NaN (host fp8.from32, step
// for step).
uint f32_to_f8(uint b, uint mbits, int bias, uint maxb, bool inf) {
    uint sign = (b >> 24) & 0x80u;
    uint a = b & F32_ABS;
    if (a > F32_INF) return inf ? sign | 0x7Eu | ((a >> (23u - mbits)) & 3u) : sign | 0x7Fu;
    if (a == F32_INF) return inf ? sign | 0x7Cu : sign | maxb;
    int exp = int(a >> 23);
    if (exp == 0) return sign; // float32 zeros and subnormals round to zero
    uint m = (a & 0x7FFFFFu) | 0x800000u;
    int e = exp - 127 + bias;
    uint shift = 23u - mbits;
    if (e <= 0) {
        shift += uint(1 - e); // subnormal
        e = 0;
        if (shift > 24u) return sign;
    }
    uint r = m >> shift;
    if (e > 0) r = (uint(e) << mbits) | (r & ((1u << mbits) - 1u));
    uint rem = m & ((1u << shift) - 1u), half_ = 1u << (shift - 1u);
    if (rem > half_ || (rem == half_ && (r & 1u) != 0u)) r += 1u; // may carry into the exponent
    return sign | min(r, maxb);
}

uint f32_to_e4m3(uint b) { return f32_to_f8(b, 3u, 7, 0x7Eu, false); }
uint f32_to_e5m2(uint b) { return f32_to_f8(b, 2u, 15, 0x7Bu, true); }
