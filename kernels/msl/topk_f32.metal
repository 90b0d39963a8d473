#pragma clang diagnostic ignored "-Wmissing-prototypes"
#pragma clang diagnostic ignored "-Wunused-variable"

#include <metal_stdlib>
#include <simd/simd.h>
#include <metal_atomic>

using namespace metal;

// Implementation of the GLSL findLSB() function
template<typename T>
inline T spvFindLSB(T x)
{
    return select(ctz(x), T(-1), x == T(0));
}

struct Src
{
    uint d[1];
};

struct Params
{
    uint n;
    uint k;
    uint shift;
    uint idx_off;
    uint val_off;
    uint src_off;
};

constant uint _160_tmp [[function_constant(0)]];
constant uint _160 = is_function_constant_defined(_160_tmp) ? _160_tmp : 1u;
constant uint3 gl_WorkGroupSize [[maybe_unused]] = uint3(_160, 1u, 1u);
constant uint _163 = gl_WorkGroupSize.x;
constant uint _165 = (_163 * 16u);

struct Work
{
    uint d[1];
};

constant uint _505 = gl_WorkGroupSize.x;
constant uint _506 = (_505 * 16u);
constant uint _757 = gl_WorkGroupSize.x;
constant uint _758 = (_757 * 16u);

struct Idx
{
    uint d[1];
};

struct Val
{
    uint d[1];
};

constant uint STAGE_tmp [[function_constant(4)]];
constant uint STAGE = is_function_constant_defined(STAGE_tmp) ? STAGE_tmp : 0u;
constant bool _919 = (STAGE == 0u);
constant bool _924 = (STAGE == 1u);
constant bool _929 = (STAGE == 2u);
constant bool _935 = (STAGE == 3u);
constant bool _941 = (STAGE == 4u);

static inline __attribute__((always_inline))
void init(constant Params& pc, thread uint3& gl_LocalInvocationID, device Work& work)
{
    for (uint b = gl_LocalInvocationID.x; b < 256u; b += gl_WorkGroupSize.x)
    {
        work.d[0u + b] = 0u;
    }
    if (gl_LocalInvocationID.x == 0u)
    {
        work.d[256] = 0u;
        work.d[257] = 0u;
        work.d[258] = pc.k;
    }
}

static inline __attribute__((always_inline))
uint2 highMask(thread const uint& s)
{
    if (s >= 64u)
    {
        return uint2(0u);
    }
    if (s >= 32u)
    {
        return uint2(0u, 4294967295u << (s - 32u));
    }
    return uint2(4294967295u << s, 4294967295u);
}

static inline __attribute__((always_inline))
uint2 keyOf(thread const uint& i, const device Src& src, constant Params& pc)
{
    uint v = src.d[pc.src_off + i];
    uint a = v & 2147483647u;
    return uint2(0u, min(a, 2139095040u));
}

static inline __attribute__((always_inline))
uint digitOf(thread const uint2& key, thread const uint& shift)
{
    uint _140;
    if (shift >= 32u)
    {
        _140 = (key.y >> (shift - 32u)) & 255u;
    }
    else
    {
        _140 = (key.x >> shift) & 255u;
    }
    return _140;
}

static inline __attribute__((always_inline))
void hist(const device Src& src, constant Params& pc, thread uint3& gl_LocalInvocationID, threadgroup uint (&sh)[256], device Work& work, thread uint3& gl_NumWorkGroups, thread uint3& gl_GlobalInvocationID)
{
    uint t = gl_LocalInvocationID.x;
    for (uint b = t; b < 256u; b += gl_WorkGroupSize.x)
    {
        sh[b] = 0u;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    uint param = pc.shift + 8u;
    uint2 m = highMask(param);
    uint2 want = uint2(work.d[256], work.d[257]) & m;
    uint _303 = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    for (uint stride = _303, i = gl_GlobalInvocationID.x; i < pc.n; i += stride)
    {
        uint param_1 = i;
        uint2 key = keyOf(param_1, src, pc);
        if (all((key & m) == want))
        {
            uint2 param_2 = key;
            uint param_3 = pc.shift;
            uint _337 = atomic_fetch_add_explicit((threadgroup atomic_uint*)&sh[digitOf(param_2, param_3)], 1u, memory_order_relaxed);
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint b_1 = t; b_1 < 256u; b_1 += gl_WorkGroupSize.x)
    {
        uint c = sh[b_1];
        if (c != 0u)
        {
            uint _362 = atomic_fetch_add_explicit((device atomic_uint*)&work.d[0u + b_1], c, memory_order_relaxed);
        }
    }
}

static inline __attribute__((always_inline))
void select_(constant Params& pc, thread uint3& gl_LocalInvocationID, device Work& work)
{
    if (gl_LocalInvocationID.x == 0u)
    {
        uint rem = work.d[258];
        uint d = 0u;
        for (int b = 255; b >= 0; b--)
        {
            uint c = work.d[0u + uint(b)];
            if (rem <= c)
            {
                d = uint(b);
                break;
            }
            rem -= c;
        }
        if (pc.shift >= 32u)
        {
            work.d[257] |= (d << (pc.shift - 32u));
        }
        else
        {
            work.d[256] |= (d << pc.shift);
        }
        work.d[258] = rem;
    }
    threadgroup_barrier(mem_flags::mem_device);
    for (uint b_1 = gl_LocalInvocationID.x; b_1 < 256u; b_1 += gl_WorkGroupSize.x)
    {
        work.d[0u + b_1] = 0u;
    }
}

static inline __attribute__((always_inline))
uint nblocks(constant Params& pc)
{
    uint b = _165;
    return ((pc.n + b) - 1u) / b;
}

static inline __attribute__((always_inline))
bool greater(thread const uint2& a, thread const uint2& b)
{
    bool _95 = a.y > b.y;
    bool _112;
    if (!_95)
    {
        bool _103 = a.y == b.y;
        bool _111;
        if (_103)
        {
            _111 = a.x > b.x;
        }
        else
        {
            _111 = _103;
        }
        _112 = _111;
    }
    else
    {
        _112 = _95;
    }
    return _112;
}

static inline __attribute__((always_inline))
void flags(thread const uint& first, thread const uint2& thr, thread uint& gt, thread uint& eq, const device Src& src, constant Params& pc)
{
    gt = 0u;
    eq = 0u;
    for (uint j = 0u; j < 16u; j++)
    {
        uint i = first + j;
        if (i >= pc.n)
        {
            break;
        }
        uint param = i;
        uint2 key = keyOf(param, src, pc);
        uint2 param_1 = key;
        uint2 param_2 = thr;
        if (greater(param_1, param_2))
        {
            gt |= (1u << j);
        }
        else
        {
            if (all(key == thr))
            {
                eq |= (1u << j);
            }
        }
    }
}

static inline __attribute__((always_inline))
void count(const device Src& src, constant Params& pc, thread uint3& gl_LocalInvocationID, device Work& work, thread uint3& gl_NumWorkGroups, thread uint3& gl_WorkGroupID, threadgroup uint (&sh2)[2])
{
    uint t = gl_LocalInvocationID.x;
    uint nb = nblocks(pc);
    uint2 thr = uint2(work.d[256], work.d[257]);
    uint bsize = _506;
    uint param_2;
    uint param_3;
    for (uint b = gl_WorkGroupID.x; b < nb; b += gl_NumWorkGroups.x)
    {
        if (t == 0u)
        {
            sh2[0] = 0u;
            sh2[1] = 0u;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        uint param = (b * bsize) + (t * 16u);
        uint2 param_1 = thr;
        flags(param, param_1, param_2, param_3, src, pc);
        uint gt = param_2;
        uint eq = param_3;
        if (gt != 0u)
        {
            uint _552 = atomic_fetch_add_explicit((threadgroup atomic_uint*)&sh2[0], uint(int(popcount(gt))), memory_order_relaxed);
        }
        if (eq != 0u)
        {
            uint _561 = atomic_fetch_add_explicit((threadgroup atomic_uint*)&sh2[1], uint(int(popcount(eq))), memory_order_relaxed);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        if (t == 0u)
        {
            work.d[260u + b] = sh2[0];
            work.d[(260u + nb) + b] = sh2[1];
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
}

static inline __attribute__((always_inline))
uint scanExclusive(thread const uint& v, thread uint3& gl_LocalInvocationID, threadgroup uint (&sh)[256])
{
    uint t = gl_LocalInvocationID.x;
    sh[t] = v;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    uint _204;
    for (uint off = 1u; off < gl_WorkGroupSize.x; off = off << uint(1))
    {
        if (t >= off)
        {
            _204 = sh[t - off];
        }
        else
        {
            _204 = 0u;
        }
        uint x = _204;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        sh[t] += x;
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    uint r = sh[t] - v;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    return r;
}

static inline __attribute__((always_inline))
uint take(thread const uint& rem, thread const uint& eqBase, thread const uint& eq)
{
    uint _586;
    if (rem > eqBase)
    {
        _586 = min(eq, (rem - eqBase));
    }
    else
    {
        _586 = 0u;
    }
    return _586;
}

static inline __attribute__((always_inline))
void scan(constant Params& pc, thread uint3& gl_LocalInvocationID, threadgroup uint (&sh)[256], device Work& work)
{
    uint t = gl_LocalInvocationID.x;
    uint nb = nblocks(pc);
    uint rem = work.d[258];
    uint per = ((nb + gl_WorkGroupSize.x) - 1u) / gl_WorkGroupSize.x;
    uint lo = min((t * per), nb);
    uint hi = min((lo + per), nb);
    uint sumEq = 0u;
    for (uint b = lo; b < hi; b++)
    {
        sumEq += work.d[(260u + nb) + b];
    }
    uint param = sumEq;
    uint _649 = scanExclusive(param, gl_LocalInvocationID, sh);
    uint eqBase = _649;
    uint sumSel = 0u;
    uint e = eqBase;
    for (uint b_1 = lo; b_1 < hi; b_1++)
    {
        uint q = work.d[(260u + nb) + b_1];
        uint param_1 = rem;
        uint param_2 = e;
        uint param_3 = q;
        sumSel += (work.d[260u + b_1] + take(param_1, param_2, param_3));
        e += q;
    }
    uint param_4 = sumSel;
    uint _692 = scanExclusive(param_4, gl_LocalInvocationID, sh);
    uint o = _692;
    e = eqBase;
    for (uint b_2 = lo; b_2 < hi; b_2++)
    {
        uint g = work.d[260u + b_2];
        uint q_1 = work.d[(260u + nb) + b_2];
        work.d[260u + b_2] = o;
        work.d[(260u + nb) + b_2] = e;
        uint param_5 = rem;
        uint param_6 = e;
        uint param_7 = q_1;
        o += (g + take(param_5, param_6, param_7));
        e += q_1;
    }
}

static inline __attribute__((always_inline))
void scatter(const device Src& src, constant Params& pc, thread uint3& gl_LocalInvocationID, threadgroup uint (&sh)[256], device Work& work, thread uint3& gl_NumWorkGroups, thread uint3& gl_WorkGroupID, device Idx& idx, device Val& val)
{
    uint t = gl_LocalInvocationID.x;
    uint nb = nblocks(pc);
    uint2 thr = uint2(work.d[256], work.d[257]);
    uint rem = work.d[258];
    uint bsize = _758;
    uint _780;
    uint param_2;
    uint param_3;
    for (uint b = gl_WorkGroupID.x; b < nb; b += gl_NumWorkGroups.x)
    {
        uint outBase = work.d[260u + b];
        if ((b + 1u) < nb)
        {
            _780 = work.d[(260u + b) + 1u];
        }
        else
        {
            _780 = pc.k;
        }
        uint outEnd = _780;
        if (outEnd == outBase)
        {
            continue;
        }
        uint first = (b * bsize) + (t * 16u);
        uint param = first;
        uint2 param_1 = thr;
        flags(param, param_1, param_2, param_3, src, pc);
        uint gt = param_2;
        uint eq = param_3;
        uint _822 = work.d[(260u + nb) + b];
        uint param_4 = uint(int(popcount(eq)));
        uint _827 = scanExclusive(param_4, gl_LocalInvocationID, sh);
        uint r = _822 + _827;
        uint sel = gt;
        for (uint m = eq; m != 0u; m &= (m - 1u))
        {
            if (r >= rem)
            {
                break;
            }
            sel |= (1u << uint(int(spvFindLSB(m))));
            r++;
        }
        uint param_5 = uint(int(popcount(sel)));
        uint _864 = scanExclusive(param_5, gl_LocalInvocationID, sh);
        uint pos = outBase + _864;
        for (uint m_1 = sel; m_1 != 0u; m_1 &= (m_1 - 1u))
        {
            uint i = first + uint(int(spvFindLSB(m_1)));
            idx.d[pc.idx_off + pos] = i;
            val.d[pc.val_off + pos] = src.d[pc.src_off + i];
            pos++;
        }
    }
}

kernel void main0(constant Params& pc [[buffer(0)]], device Idx& idx [[buffer(0)]], device Val& val [[buffer(1)]], device Work& work [[buffer(2)]], const device Src& src [[buffer(3)]], uint3 gl_LocalInvocationID [[thread_position_in_threadgroup]], uint3 gl_NumWorkGroups [[threadgroups_per_grid]], uint3 gl_GlobalInvocationID [[thread_position_in_grid]], uint3 gl_WorkGroupID [[threadgroup_position_in_grid]])
{
    threadgroup uint sh[256];
    threadgroup uint sh2[2];
    if (_919)
    {
        init(pc, gl_LocalInvocationID, work);
    }
    else
    {
        if (_924)
        {
            hist(src, pc, gl_LocalInvocationID, sh, work, gl_NumWorkGroups, gl_GlobalInvocationID);
        }
        else
        {
            if (_929)
            {
                select_(pc, gl_LocalInvocationID, work);
            }
            else
            {
                if (_935)
                {
                    count(src, pc, gl_LocalInvocationID, work, gl_NumWorkGroups, gl_WorkGroupID, sh2);
                }
                else
                {
                    if (_941)
                    {
                        scan(pc, gl_LocalInvocationID, sh, work);
                    }
                    else
                    {
                        scatter(src, pc, gl_LocalInvocationID, sh, work, gl_NumWorkGroups, gl_WorkGroupID, idx, val);
                    }
                }
            }
        }
    }
}

