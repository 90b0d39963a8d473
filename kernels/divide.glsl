// divide(x, N, r) returns x / N correctly rounded, for r = 1/N rounded to S
// (the scale a mean passes) and an integer N that backend.Divisor accepts
// (N <= 2^20, odd part below 2^12): included by reduce.comp and scale.comp,
// which define S (the scalar type) and T (S, or the 16-byte vector of S).
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
// and is at least ulp/(2N) from one, far more than the error. So the result
// is correctly rounded wherever no value is subnormal (a GPU may flush them).
// Inf stays Inf (e would be NaN); NaN stays NaN; a zero keeps its sign (e is
// +0 and q - (+0) is q). precise keeps every operation as written: nothing
// contracted or reassociated.
#ifdef GOCOLL_F64
S high_half(S v) {
    uvec2 w = unpackDouble2x32(v); // (low word, high word)
    w.x &= 0xFC000000u;            // keep 27 significant bits
    return packDouble2x32(w);
}
#ifdef GOCOLL_VEC
T high_bits(T v) { return T(high_half(v.x), high_half(v.y)); }
#else
T high_bits(T v) { return high_half(v); }
#endif
#else
// Keep 12 significant bits (per component for vec4).
T high_bits(T v) { return uintBitsToFloat(floatBitsToUint(v) & 0xFFFFF000u); }
#endif

T divide(T x, uint div, S r) {
    S n = S(div);
    precise T q = x * r;
    T qh = high_bits(q);
    precise T ql = q - qh;
    precise T e = (qh * n - x) + ql * n; // q*N - x, exactly
    precise T q1 = q - e * r;
    return mix(q1, q, isinf(q));
}
