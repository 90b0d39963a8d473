// unpack: dst = elements of src in a 16-bit wire format converted to f32,
// exactly (integer bit manipulation, subnormal halves included), bit for
// bit as host.F16ToF32 and the bfloat16 shift. src holds two elements a
// word, element 2w in the low half of word w. One invocation per input
// word.
#version 450

layout(local_size_x_id = 0) in;
layout(constant_id = 4) const uint WIRE = 0;    // 0 half (binary16), 1 bfloat16

layout(set = 0, binding = 0) buffer Dst { uint d[]; } dst;
layout(set = 0, binding = 1) readonly buffer Src { uint d[]; } src;

layout(push_constant) uniform Params {
    uint n;          // f32 elements
    uint dst_off;    // in elements
    uint src_off;    // in words
} pc;

uint fromHalf(uint h) {
    uint sign = (h & 0x8000u) << 16;
    uint e = (h >> 10) & 0x1fu;
    uint mant = h & 0x3ffu;
    if (e == 0x1fu) return sign | 0x7f800000u | (mant << 13);
    if (e == 0u) {
        if (mant == 0u) return sign;
        // Subnormal: mant * 2^-24 = 1.f * 2^(p-24), p the leading bit.
        uint p = uint(findMSB(mant));
        return sign | ((p + 103u) << 23) | ((mant << (23u - p)) & 0x7fffffu);
    }
    return sign | ((e + 127u - 15u) << 23) | (mant << 13);
}

uint conv(uint h) {
    return WIRE == 1u ? h << 16 : fromHalf(h);
}

void main() {
    uint words = (pc.n + 1u) >> 1;
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint w = gl_GlobalInvocationID.x; w < words; w += stride) {
        uint v = src.d[pc.src_off + w];
        uint i = 2u * w;
        dst.d[pc.dst_off + i] = conv(v & 0xffffu);
        if (i + 1u < pc.n) dst.d[pc.dst_off + i + 1u] = conv(v >> 16);
    }
}
