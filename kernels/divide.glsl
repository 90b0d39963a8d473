// divide(x, N, r) returns x / N correctly rounded wherever x / N is a normal
// float, also on a device that flushes subnormals to zero, for r = 1/N
// rounded to S (the scale a mean passes) and an integer N that
// backend.Divisor accepts (N <= 2^20, odd part below 2^12): included by
// reduce.comp and scale.comp, which define S (the scalar type) and T (S, or
// the 16-byte vector of S). kernels/divide_test.go models it in Go, with and
// without flushing; keep the two in step.
//
// x * r alone can be more than 1 ulp from v = x/N (r is not 1/N exactly).
// q = x*r is within 2 ulp of v, so the remainder q*N - x is exactly
// representable (a multiple of ulp(v)/2 below 4N of them). It is computed
// exactly with correctly rounded multiplies and subtractions only (Vulkan
// lets a driver compute fma as a multiply and an add, and lavapipe does):
// q = qh + ql, qh the top 12 bits of q's significand (f32; 27 in f64), ql the
// rest; qh*N and ql*N are exact (at most 24 resp. 53 bits, N's odd part
// having at most 12); qh*N - x is exact (Sterbenz: the two are within a
// factor of 2), and adding ql*N gives the remainder e, exact because the
// result is representable. Then q - e*r = v + (v - q)(N*r - 1) plus the
// rounding of e*r is within 4 * 2^-p ulp of v (precision p = 24 or 53), and
// rounding it once gives the float nearest v: x/N is never a midpoint
// between two floats (that would need p+1 significant bits times an integer)
// and is at least ulp/(2N) from one, far more than the error.
//
// That needs every value, and every exact result before rounding, to be
// normal or zero: Vulkan lets a device flush subnormal f32 (and f64) inputs
// and results to zero unless it reports shaderDenormPreserveFloat32 (and the
// kernel declares DenormPreserve), and NVIDIA's flushes (an H200 with driver
// 580 reports no shaderDenormPreserveFloat32). With 2^E <= |q| < 2^(E+1), the smallest nonzero value is
// e*r: ql is 0 or at least ulp(q) = 2^(E-p+1); qh*N - x, ql*N and e are
// multiples of ulp(q) (x is a multiple of ulp(x) >= ulp(q)), so e*r is 0 or
// above 2^(E-p+1) / 2^21 = 2^(E-p-20); all else is at least about |q|. So
// all is normal when E >= emin + p + 20: -82 in f32 (emin -126), -949 in f64
// (emin -1022). A small x therefore is first scaled by the exact power of
// two UP (2^64 in f32, 2^128 in f64) and the quotient by DOWN = 1/UP:
//   - |x| >= SMALL (2^-50 in f32, 2^-896 in f64): not scaled; |q| >=
//     SMALL/2^20 * (1 - 2^-p)^2, E >= -71 (f32) or -917 (f64).
//   - N * 2^emin <= |x| < SMALL, so that v is at least the least normal
//     2^emin: x*UP is exact, |x*UP| < 2^14 (f32) or 2^-768 (f64), E >= emin +
//     64 - 1 = -63 (f32) or emin + 128 - 1 = -895 (f64), and the correctly
//     rounded quotient of x*UP, at least 2^emin * UP, times DOWN is exact and
//     normal: the correctly rounded x/N.
//   - |x| < N * 2^emin (v is subnormal, or x is 0): not scaled, as before;
//     where subnormals are kept the result is within 1 ulp, where they are
//     flushed it may be 0. divide_exact (below) takes such x to integer long
//     division instead (divide_small_f32, divide_small_f64): the kernels
//     call it, never divide alone, for a quotient correct on every device.
//     The kernels never scale a zero, NaN or infinity.
// A device that flushes keeps every input and exact result normal or zero
// along the first two paths, so it computes the very bits lavapipe does.
// Inf stays Inf (e would be NaN); NaN stays NaN; a zero keeps its sign (e is
// +0 and q - (+0) is q). precise keeps every operation as written: nothing
// contracted or reassociated.
//
// T is a vector where the includer defines DIV_VEC (to the number of
// components): divide and divide_exact then work per component.
#ifdef GOCOLL_F64
#define DIV_MIN_NORMAL 2.2250738585072014e-308LF // 2^-1022
#define DIV_SMALL 1.8928834978668395e-270LF      // 2^-896
#define DIV_UP 3.402823669209385e+38LF           // 2^128
#define DIV_DOWN 2.938735877055719e-39LF         // 2^-128
S high_half(S v) {
    uvec2 w = unpackDouble2x32(v); // (low word, high word)
    w.x &= 0xFC000000u;            // keep 27 significant bits
    return packDouble2x32(w);
}
#ifdef DIV_VEC
T high_bits(T v) { return T(high_half(v.x), high_half(v.y)); }
#else
T high_bits(T v) { return high_half(v); }
#endif
#else
#define DIV_MIN_NORMAL 1.1754943508222875e-38 // 2^-126
#define DIV_SMALL 8.881784197001252e-16       // 2^-50
#define DIV_UP 1.8446744073709552e+19         // 2^64
#define DIV_DOWN 5.421010862427522e-20        // 2^-64
// Keep 12 significant bits (per component for vec4).
T high_bits(T v) { return uintBitsToFloat(floatBitsToUint(v) & 0xFFFFF000u); }
#endif

// Per component a < b, and its type.
#ifdef DIV_VEC
#define DIV_LESS(a, b) lessThan(a, b)
#ifdef GOCOLL_F64
#define DIV_BOOL bvec2
#else
#define DIV_BOOL bvec4
#endif
#else
#define DIV_LESS(a, b) ((a) < (b))
#define DIV_BOOL bool
#endif

T divide(T x, uint div, S r) {
    S n = S(div);
    // Scale by UP, and back by DOWN, where N * 2^emin <= |x| < SMALL; else
    // by 1 (NaN and infinities included).
    T a = abs(x);
    DIV_BOOL small = DIV_LESS(a, T(DIV_SMALL));
    DIV_BOOL sub = DIV_LESS(a, T(n * S(DIV_MIN_NORMAL)));
    T up = mix(mix(T(1), T(DIV_UP), small), T(1), sub);
    T down = mix(mix(T(1), T(DIV_DOWN), small), T(1), sub);
    precise T xs = x * up; // exact
    precise T q = xs * r;
    T qh = high_bits(q);
    precise T ql = q - qh;
    precise T e = (qh * n - xs) + ql * n; // q*N - xs, exactly
    precise T q1 = q - e * r;
    precise T res = mix(q1, q, isinf(q)) * down; // exact
    return res;
}

// divide_small_f32 is x / N correctly rounded (to nearest even), for the
// bits x of a float32 with 0 < |x| < N * 2^-126 (a quotient below the least
// normal, or rounding up to it) and N <= 2^20: integer long division in
// units of 2^-149, exact whatever the device does with subnormals. The
// result is a subnormal or the least normal (2^23 units encode as it).
uint divide_small_f32(uint x, uint div) {
    // |x| < 2^20 * 2^-126: x = m * 2^s units of 2^-149, s <= 19.
    uint ax = x & 0x7FFFFFFFu;
    uint e = ax >> 23, m = ax & 0x7FFFFFu, s = 0u;
    if (e != 0u) {
        m |= 0x800000u;
        s = e - 1u;
    }
    uint q = m / div, rem = m % div;
    for (uint i = 0u; i < s; i++) {
        rem <<= 1;
        q <<= 1;
        if (rem >= div) {
            rem -= div;
            q |= 1u;
        }
    }
    if (2u * rem > div || (2u * rem == div && (q & 1u) != 0u)) q += 1u;
    return (x & 0x80000000u) | q;
}

// div_small_f32 reports whether the float32 bits x are nonzero and below N *
// 2^-126 in magnitude (divide_small_f32's range), comparing bits, so that no
// float comparison sees a subnormal.
bool div_small_f32(uint x, uint div) {
    uint ax = x & 0x7FFFFFFFu;
    return ax != 0u && ax < floatBitsToUint(float(div) * 1.1754943508222875e-38);
}

#ifdef GOCOLL_F64
// divide_small_f64 is divide_small_f32 for float64 bits (uvec2: low word,
// high word), with 0 < |x| < N * 2^-1022, in units of 2^-1074: x = m * 2^s
// units with m < 2^53 and s <= 19, divided a bit at a time (the remainder
// stays below N <= 2^20; the quotient, below 2^52 + 1 units, is two words).
uvec2 divide_small_f64(uvec2 x, uint div) {
    uint hi = x.y & 0x7FFFFFFFu;
    uint e = hi >> 20, mhi = hi & 0xFFFFFu, s = 0u;
    if (e != 0u) {
        mhi |= 0x100000u;
        s = e - 1u;
    }
    uint rem = 0u, qhi = 0u, qlo = 0u;
    for (uint i = 0u; i < 53u + s; i++) {
        // Bit 52 - i of m, then s zeros.
        uint bit = 0u;
        if (i < 21u) {
            bit = (mhi >> (20u - i)) & 1u;
        } else if (i < 53u) {
            bit = (x.x >> (52u - i)) & 1u;
        }
        rem = (rem << 1) | bit;
        qhi = (qhi << 1) | (qlo >> 31);
        qlo <<= 1;
        if (rem >= div) {
            rem -= div;
            qlo |= 1u;
        }
    }
    if (2u * rem > div || (2u * rem == div && (qlo & 1u) != 0u)) {
        qlo += 1u;
        if (qlo == 0u) qhi += 1u;
    }
    return uvec2(qlo, (x.y & 0x80000000u) | qhi);
}

bool div_small_f64(uvec2 x, uint div) {
    uvec2 lim = unpackDouble2x32(double(div) * DIV_MIN_NORMAL);
    uint hi = x.y & 0x7FFFFFFFu;
    return (hi | x.x) != 0u && (hi < lim.y || (hi == lim.y && x.x < lim.x));
}

double divide_exact1(double x, double q, uint div) {
    uvec2 b = unpackDouble2x32(x);
    return div_small_f64(b, div) ? packDouble2x32(divide_small_f64(b, div)) : q;
}
#else
float divide_exact1(float x, float q, uint div) {
    uint b = floatBitsToUint(x);
    return div_small_f32(b, div) ? uintBitsToFloat(divide_small_f32(b, div)) : q;
}
#endif

// divide_exact is x / N correctly rounded for every x: divide, and
// divide_small_* where the quotient is below the least normal (decided on
// the bits, per component).
T divide_exact(T x, uint div, S r) {
    T q = divide(x, div, r);
#ifdef DIV_VEC
    for (int c = 0; c < DIV_VEC; c++) q[c] = divide_exact1(x[c], q[c], div);
    return q;
#else
    return divide_exact1(x, q, div);
#endif
}
