// pack: dst = f32 elements of src converted to a 16-bit wire format, two to
// a 32-bit word (element 2w in the low half of word w, 2w+1 in the high
// half; the high half of the last word of an odd count is zero).
//
// The conversion rounds to nearest even with integer arithmetic, bit for
// bit as host.F32ToF16 and host.F32ToBF16 (packHalf2x16 rounds as the
// implementation likes). Elements are read as uint so NaN payloads survive.
// One invocation per output word.
#version 450

layout(local_size_x_id = 0) in;
layout(constant_id = 4) const uint WIRE = 0;    // 0 half (binary16), 1 bfloat16

layout(set = 0, binding = 0) buffer Dst { uint d[]; } dst;
layout(set = 0, binding = 1) readonly buffer Src { uint d[]; } src;

// Element offsets: bindings start at the device's offset alignment.
layout(push_constant) uniform Params {
    uint n;          // f32 elements
    uint dst_off;    // in words
    uint src_off;    // in elements
} pc;

uint toHalf(uint b) {
    uint sign = (b >> 16) & 0x8000u;
    int e = int((b >> 23) & 0xffu);
    uint mant = b & 0x7fffffu;
    if (e == 0xff) {
        if (mant != 0u) return sign | 0x7e00u | (mant >> 13);
        return sign | 0x7c00u;
    }
    e = e - 127 + 15;
    if (e >= 0x1f) return sign | 0x7c00u;
    if (e <= 0) {
        if (e < -10) return sign;
        uint m = mant | 0x800000u;
        uint shift = uint(14 - e);              // 14..24
        uint r = m >> shift;
        uint rem = m & ((1u << shift) - 1u);
        uint half_ = 1u << (shift - 1u);
        if (rem > half_ || (rem == half_ && (r & 1u) == 1u)) r++;
        return sign | r;
    }
    uint r = (uint(e) << 10) | (mant >> 13);
    uint rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u) == 1u)) r++; // may round up to Inf
    return sign | r;
}

uint toBF16(uint b) {
    if ((b & 0x7fffffffu) > 0x7f800000u) return ((b >> 16) | 0x40u) & 0xffffu;
    b += 0x7fffu + ((b >> 16) & 1u);
    return b >> 16;
}

uint conv(uint b) {
    return WIRE == 1u ? toBF16(b) : toHalf(b);
}

void main() {
    uint words = (pc.n + 1u) >> 1;
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint w = gl_GlobalInvocationID.x; w < words; w += stride) {
        uint i = 2u * w;
        uint lo = conv(src.d[pc.src_off + i]);
        uint hi = 0u;
        if (i + 1u < pc.n) hi = conv(src.d[pc.src_off + i + 1u]);
        dst.d[pc.dst_off + w] = lo | (hi << 16);
    }
}
