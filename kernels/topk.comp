// topk: selection of the k elements of src with the largest magnitude, their
// indices (uint) to idx and their values to val in increasing index order.
// NaN counts as larger than any finite number and ties with +-Inf, ties go
// to the lower index: exactly the selection of host's sort-based topK.
//
// Compiled with 32-bit elements (topk_f32) and 64-bit elements (topk_f64,
// -DGOCOLL_F64). Elements are moved as uint / uvec2, never as floats, so
// values (NaN payloads included) are copied bit for bit and no float64
// arithmetic is needed.
//
// The backend records the stages as dispatches of one submission, with a
// memory barrier between dispatches (STAGE picks one, a specialization
// constant):
//
//   0 INIT     one work group: clear the digit histogram, prefix = 0, rem = k.
//   1 HIST     histogram of the 8-bit digit at bit pc.shift of the keys whose
//              higher bits equal the prefix found so far (shared-memory
//              histogram per work group, then atomicAdd to the global one).
//   2 SELECT   one work group: the digit holding the rem-th largest key:
//              prefix |= digit << shift, rem -= keys above it in higher
//              digits; clears the histogram for the next pass.
//   After 4 (f32) or 8 (f64) HIST/SELECT passes the prefix is T, the k-th
//   largest key, and rem is how many keys equal to T are selected (the
//   rem lowest-indexed ones). Then a stable compaction:
//   3 COUNT    per block of BLOCK elements: keys > T and keys == T.
//   4 SCAN     one work group: exclusive scans over the blocks of the tie
//              counts (tie rank base) and of the selected counts (output
//              position base), written over the counts.
//   5 SCATTER  per block: tie ranks and output positions by work-group scans
//              over threads, each thread owning ITEMS consecutive elements;
//              writes idx and val in index order.
//
// The key of an element is |x| as an unsigned integer (uvec2(lo, hi); for
// f32 the bits sit in hi and lo is 0), NaN mapped to the key of +Inf.
#version 450

#ifdef GOCOLL_F64
#define ELEM uvec2
#else
#define ELEM uint
#endif

layout(local_size_x_id = 0) in;                 // work-group size, <= 256
layout(constant_id = 4) const uint STAGE = 0;

// Elements a thread owns in COUNT and SCATTER; a block is
// ITEMS * work-group size elements (the backend computes the same).
#define ITEMS 16u

layout(set = 0, binding = 0) buffer Idx { uint d[]; } idx;
layout(set = 0, binding = 1) buffer Val { ELEM d[]; } val;
// work: hist[256], state (prefix lo, prefix hi, rem, pad), then the per-block
// counts: gt[nblocks], eq[nblocks].
layout(set = 0, binding = 2) buffer Work { uint d[]; } work;
layout(set = 0, binding = 3) readonly buffer Src { ELEM d[]; } src;

#define HIST 0u
#define PREFIX_LO 256u
#define PREFIX_HI 257u
#define REM 258u
#define BLOCKS 260u

layout(push_constant) uniform Params {
    uint n;          // elements of src
    uint k;
    uint shift;      // HIST, SELECT: bit position of the digit in the 64-bit key
    uint idx_off;    // element offsets into the bindings
    uint val_off;
    uint src_off;
} pc;

shared uint sh[256];
shared uint sh2[2];

uvec2 keyOf(uint i) {
    ELEM v = src.d[pc.src_off + i];
#ifdef GOCOLL_F64
    uint hi = v.y & 0x7fffffffu;
    if (hi > 0x7ff00000u || (hi == 0x7ff00000u && v.x != 0u)) return uvec2(0u, 0x7ff00000u);
    return uvec2(v.x, hi);
#else
    uint a = v & 0x7fffffffu;
    return uvec2(0u, min(a, 0x7f800000u));
#endif
}

bool greater(uvec2 a, uvec2 b) { return a.y > b.y || (a.y == b.y && a.x > b.x); }

// mask of the key bits at and above bit s (0 < s <= 64).
uvec2 highMask(uint s) {
    if (s >= 64u) return uvec2(0u);
    if (s >= 32u) return uvec2(0u, 0xffffffffu << (s - 32u));
    return uvec2(0xffffffffu << s, 0xffffffffu);
}

uint digitOf(uvec2 key, uint shift) {
    return shift >= 32u ? (key.y >> (shift - 32u)) & 255u : (key.x >> shift) & 255u;
}

uint nblocks() {
    uint b = gl_WorkGroupSize.x * ITEMS;
    return (pc.n + b - 1u) / b;
}

// Exclusive scan of v over the work group (Hillis-Steele in shared memory).
uint scanExclusive(uint v) {
    uint t = gl_LocalInvocationID.x;
    sh[t] = v;
    barrier();
    for (uint off = 1u; off < gl_WorkGroupSize.x; off <<= 1) {
        uint x = t >= off ? sh[t - off] : 0u;
        barrier();
        sh[t] += x;
        barrier();
    }
    uint r = sh[t] - v;
    barrier();
    return r;
}

void init() {
    for (uint b = gl_LocalInvocationID.x; b < 256u; b += gl_WorkGroupSize.x) work.d[HIST + b] = 0u;
    if (gl_LocalInvocationID.x == 0u) {
        work.d[PREFIX_LO] = 0u;
        work.d[PREFIX_HI] = 0u;
        work.d[REM] = pc.k;
    }
}

void hist() {
    uint t = gl_LocalInvocationID.x;
    for (uint b = t; b < 256u; b += gl_WorkGroupSize.x) sh[b] = 0u;
    barrier();
    uvec2 m = highMask(pc.shift + 8u);
    uvec2 want = uvec2(work.d[PREFIX_LO], work.d[PREFIX_HI]) & m;
    uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint i = gl_GlobalInvocationID.x; i < pc.n; i += stride) {
        uvec2 key = keyOf(i);
        if ((key & m) == want) atomicAdd(sh[digitOf(key, pc.shift)], 1u);
    }
    barrier();
    for (uint b = t; b < 256u; b += gl_WorkGroupSize.x) {
        uint c = sh[b];
        if (c != 0u) atomicAdd(work.d[HIST + b], c);
    }
}

void select_() {
    if (gl_LocalInvocationID.x == 0u) {
        uint rem = work.d[REM];
        uint d = 0u;
        for (int b = 255; b >= 0; b--) {
            uint c = work.d[HIST + uint(b)];
            if (rem <= c) {
                d = uint(b);
                break;
            }
            rem -= c;
        }
        if (pc.shift >= 32u) work.d[PREFIX_HI] |= d << (pc.shift - 32u);
        else work.d[PREFIX_LO] |= d << pc.shift;
        work.d[REM] = rem;
    }
    memoryBarrierBuffer();
    barrier();
    for (uint b = gl_LocalInvocationID.x; b < 256u; b += gl_WorkGroupSize.x) work.d[HIST + b] = 0u;
}

// flags sets bit j of gt (eq) when element first+j has a key above (equal
// to) the threshold.
void flags(uint first, uvec2 thr, out uint gt, out uint eq) {
    gt = 0u;
    eq = 0u;
    for (uint j = 0u; j < ITEMS; j++) {
        uint i = first + j;
        if (i >= pc.n) break;
        uvec2 key = keyOf(i);
        if (greater(key, thr)) gt |= 1u << j;
        else if (key == thr) eq |= 1u << j;
    }
}

void count() {
    uint t = gl_LocalInvocationID.x;
    uint nb = nblocks();
    uvec2 thr = uvec2(work.d[PREFIX_LO], work.d[PREFIX_HI]);
    uint bsize = gl_WorkGroupSize.x * ITEMS;
    for (uint b = gl_WorkGroupID.x; b < nb; b += gl_NumWorkGroups.x) {
        if (t == 0u) {
            sh2[0] = 0u;
            sh2[1] = 0u;
        }
        barrier();
        uint gt, eq;
        flags(b * bsize + t * ITEMS, thr, gt, eq);
        if (gt != 0u) atomicAdd(sh2[0], uint(bitCount(gt)));
        if (eq != 0u) atomicAdd(sh2[1], uint(bitCount(eq)));
        barrier();
        if (t == 0u) {
            work.d[BLOCKS + b] = sh2[0];
            work.d[BLOCKS + nb + b] = sh2[1];
        }
        barrier();
    }
}

uint take(uint rem, uint eqBase, uint eq) {
    return rem > eqBase ? min(eq, rem - eqBase) : 0u;
}

void scan() {
    uint t = gl_LocalInvocationID.x;
    uint nb = nblocks();
    uint rem = work.d[REM];
    uint per = (nb + gl_WorkGroupSize.x - 1u) / gl_WorkGroupSize.x;
    uint lo = min(t * per, nb), hi = min(lo + per, nb);
    uint sumEq = 0u;
    for (uint b = lo; b < hi; b++) sumEq += work.d[BLOCKS + nb + b];
    uint eqBase = scanExclusive(sumEq);
    uint sumSel = 0u;
    uint e = eqBase;
    for (uint b = lo; b < hi; b++) {
        uint q = work.d[BLOCKS + nb + b];
        sumSel += work.d[BLOCKS + b] + take(rem, e, q);
        e += q;
    }
    uint o = scanExclusive(sumSel);
    e = eqBase;
    for (uint b = lo; b < hi; b++) {
        uint g = work.d[BLOCKS + b];
        uint q = work.d[BLOCKS + nb + b];
        work.d[BLOCKS + b] = o;
        work.d[BLOCKS + nb + b] = e;
        o += g + take(rem, e, q);
        e += q;
    }
}

void scatter() {
    uint t = gl_LocalInvocationID.x;
    uint nb = nblocks();
    uvec2 thr = uvec2(work.d[PREFIX_LO], work.d[PREFIX_HI]);
    uint rem = work.d[REM];
    uint bsize = gl_WorkGroupSize.x * ITEMS;
    for (uint b = gl_WorkGroupID.x; b < nb; b += gl_NumWorkGroups.x) {
        uint outBase = work.d[BLOCKS + b];
        uint outEnd = b + 1u < nb ? work.d[BLOCKS + b + 1u] : pc.k;
        if (outEnd == outBase) continue; // nothing selected here (uniform)
        uint first = b * bsize + t * ITEMS;
        uint gt, eq;
        flags(first, thr, gt, eq);
        uint r = work.d[BLOCKS + nb + b] + scanExclusive(uint(bitCount(eq)));
        uint sel = gt;
        for (uint m = eq; m != 0u; m &= m - 1u) {
            if (r >= rem) break;
            sel |= 1u << uint(findLSB(m));
            r++;
        }
        uint pos = outBase + scanExclusive(uint(bitCount(sel)));
        for (uint m = sel; m != 0u; m &= m - 1u) {
            uint i = first + uint(findLSB(m));
            idx.d[pc.idx_off + pos] = i;
            val.d[pc.val_off + pos] = src.d[pc.src_off + i];
            pos++;
        }
    }
}

void main() {
    if (STAGE == 0u) init();
    else if (STAGE == 1u) hist();
    else if (STAGE == 2u) select_();
    else if (STAGE == 3u) count();
    else if (STAGE == 4u) scan();
    else scatter();
}
