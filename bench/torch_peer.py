#!/usr/bin/env python3
"""PyTorch peer of cmd/gocoll-devbench, run in the same device run.

Measures, on cuda:0, the figures gocoll-devbench compares against:
  - in-place mul_ over SIZE bytes of f32 and f64 (bytes read + written / s, CUDA events)
  - pinned and pageable H2D / D2H copies of SIZE bytes
  - launch + synchronize latency (1-element add_)
  - LAT bytes pinned non-blocking round trip: copy in, add, copy out, synchronize
  - sums of 2 and 8 device inputs of REDUCE bytes (the T1 peer)
  - "the same collective work" as gocoll's 2-rank all-reduce: two AR-byte f32
    host tensors -> GPU, sum, result back into both host tensors, from pageable
    and from pinned host memory (time per op)
Writes JSON (GB = 1e9 bytes, latencies in microseconds). Each section that
fails records its error and the others still run.

usage: torch_peer.py [--size 1G] [--reduce-size 256M] [--ar-size 1G] [--lat 4K] [--out torch.json]
"""
import argparse
import json
import statistics
import subprocess
import sys
import time
import traceback


def parse_size(s):
    s = s.strip().upper()
    for suf, m in (("GIB", 1 << 30), ("MIB", 1 << 20), ("KIB", 1 << 10), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if s.endswith(suf):
            return int(s[: -len(suf)]) * m
    return int(s)


def pct(xs, q):
    xs = sorted(xs)
    pos = q * (len(xs) - 1)
    lo, hi = int(pos), min(int(pos) + 1, len(xs) - 1)
    f = pos - lo
    return xs[lo] * (1 - f) + xs[hi] * f


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="1G")
    ap.add_argument("--reduce-size", default="256M")
    ap.add_argument("--ar-size", default="1G")
    ap.add_argument("--lat", default="4K")
    ap.add_argument("--t7-size", default="256M")
    ap.add_argument("--t7-ranks", default="2,4,8")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--lat-iters", type=int, default=2000)
    ap.add_argument("--out", default="torch.json")
    a = ap.parse_args()
    size, rsize, arsize, lat, t7size = (parse_size(x) for x in (a.size, a.reduce_size, a.ar_size, a.lat, a.t7_size))
    res = {"errors": []}

    def log(msg):
        print("[torch_peer %6.1fs] %s" % (time.time() - t_start, msg), file=sys.stderr, flush=True)

    def section(name, fn):
        try:
            fn()
        except Exception as e:  # keep going: every other figure is still worth having
            res["errors"].append("torch %s: %s: %s" % (name, type(e).__name__, e))
            traceback.print_exc()
        try:
            torch.cuda.empty_cache()
        except Exception:
            pass

    def write():
        with open(a.out, "w") as f:
            json.dump(res, f, indent=2)

    t_start = time.time()
    try:
        import torch
    except Exception as e:
        res["errors"].append("import torch: %s" % e)
        write()
        return 1
    if not torch.cuda.is_available():
        res["errors"].append("torch: CUDA is not available")
        write()
        return 1
    dev = torch.device("cuda:0")
    res["device"] = torch.cuda.get_device_name(0)
    res["torch"] = torch.__version__
    res["cuda"] = torch.version.cuda
    try:
        res["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                       capture_output=True, text=True, timeout=30).stdout.strip().splitlines()[0]
    except Exception as e:
        res["driver"] = "unknown (%s)" % e
    log("device %s, torch %s, CUDA %s, driver %s" % (res["device"], res["torch"], res["cuda"], res["driver"]))
    sync = torch.cuda.synchronize

    def events_time(fn, reps, warm=2):
        """median seconds of fn() between CUDA events"""
        ts = []
        for i in range(warm + reps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            if i >= warm:
                ts.append(s.elapsed_time(e) / 1e3)
        return statistics.median(ts)

    def wall_time(fn, reps, warm=1):
        ts = []
        for i in range(warm + reps):
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            if i >= warm:
                ts.append(time.perf_counter() - t0)
        return statistics.median(ts)

    def scale():
        for dt, key in ((torch.float32, "scale_f32_GBps"), (torch.float64, "scale_f64_GBps")):
            x = torch.ones(size // (4 if dt == torch.float32 else 8), dtype=dt, device=dev)
            nbytes = x.numel() * x.element_size()

            def run():
                for i in range(a.batch):
                    x.mul_(2.0 if i % 2 == 0 else 0.5)
            t = events_time(run, a.reps)
            res[key] = 2 * nbytes * a.batch / t / 1e9
            log("mul_ in place %s: %.1f GB/s" % (dt, res[key]))
            del x

    def copies():
        n = size // 4
        g = torch.empty(n, dtype=torch.float32, device=dev)
        for pinned in (True, False):
            h = torch.ones(n, dtype=torch.float32, pin_memory=pinned)
            kind = "pinned" if pinned else "pageable"
            t = wall_time(lambda: g.copy_(h, non_blocking=pinned), a.reps)
            res["h2d_%s_GBps" % kind] = n * 4 / t / 1e9
            t = wall_time(lambda: h.copy_(g, non_blocking=pinned), a.reps)
            res["d2h_%s_GBps" % kind] = n * 4 / t / 1e9
            log("%s H2D %.1f GB/s, D2H %.1f GB/s" % (kind, res["h2d_%s_GBps" % kind], res["d2h_%s_GBps" % kind]))
            del h
        # Both directions at once: H2D on one stream, D2H on another (pinned).
        h_in = torch.ones(n, dtype=torch.float32, pin_memory=True)
        h_out = torch.empty(n, dtype=torch.float32, pin_memory=True)
        g2 = torch.ones(n, dtype=torch.float32, device=dev)
        s_up, s_down = torch.cuda.Stream(), torch.cuda.Stream()

        def duplex():
            with torch.cuda.stream(s_up):
                g.copy_(h_in, non_blocking=True)
            with torch.cuda.stream(s_down):
                h_out.copy_(g2, non_blocking=True)
        t = wall_time(duplex, a.reps)
        res["duplex_pinned_GBps"] = 2 * n * 4 / t / 1e9
        log("pinned H2D and D2H at once on two streams: %.1f GB/s both directions" % res["duplex_pinned_GBps"])
        del h_in, h_out, g2
        del g

    def latency():
        x = torch.zeros(1, device=dev)
        ts = []
        for i in range(100 + a.lat_iters):
            t0 = time.perf_counter_ns()
            x.add_(1)
            sync()
            if i >= 100:
                ts.append((time.perf_counter_ns() - t0) / 1e3)
        res["launch_sync_us"] = {"median": statistics.median(ts), "p99": pct(ts, 0.99)}
        n = lat // 4
        hin = torch.ones(n, dtype=torch.float32, pin_memory=True)
        hout = torch.empty(n, dtype=torch.float32, pin_memory=True)
        g = torch.empty(n, dtype=torch.float32, device=dev)
        ts = []
        for i in range(100 + a.lat_iters):
            t0 = time.perf_counter_ns()
            g.copy_(hin, non_blocking=True)
            g.add_(1)
            hout.copy_(g, non_blocking=True)
            sync()
            if i >= 100:
                ts.append((time.perf_counter_ns() - t0) / 1e3)
        res["roundtrip_pinned_us"] = {"median": statistics.median(ts), "p99": pct(ts, 0.99)}
        res["roundtrip_bytes"] = n * 4
        log("launch+sync %.1f us; %d B pinned round trip median %.1f us p99 %.1f us" % (
            res["launch_sync_us"]["median"], n * 4, res["roundtrip_pinned_us"]["median"], res["roundtrip_pinned_us"]["p99"]))

    def reduce():
        res["reduce"] = []
        for dt in (torch.float32, torch.float64):
            es = 4 if dt == torch.float32 else 8
            for k in (2, 8):
                xs = [torch.full((rsize // es,), float(i + 1), dtype=dt, device=dev) for i in range(k)]
                out = torch.empty_like(xs[0])
                if k == 2:
                    how = "torch.add(out=)"

                    def run():
                        for _ in range(a.batch):
                            torch.add(xs[0], xs[1], out=out)
                else:
                    st = torch.stack(xs)  # one [k, n] tensor: sum over dim 0 is one kernel
                    how = "stack().sum(0, out=) (stack not timed)"

                    def run():
                        for _ in range(a.batch):
                            torch.sum(st, 0, out=out)
                t = events_time(run, a.reps)
                gbps = (k + 1) * rsize * a.batch / t / 1e9
                res["reduce"].append({"dtype": str(dt).replace("torch.", ""), "inputs": k, "GBps": gbps, "how": how})
                log("reduce %d x %d MiB %s: %.1f GB/s (%s)" % (k, rsize >> 20, dt, gbps, how))
                del xs, out
                if k != 2:
                    del st

    def allreduce():
        n = arsize // 4
        res["allreduce_bytes"] = n * 4
        ga = torch.empty(n, dtype=torch.float32, device=dev)
        gb = torch.empty_like(ga)
        for pinned in (False, True):
            ha = torch.ones(n, dtype=torch.float32, pin_memory=pinned)
            hb = torch.ones(n, dtype=torch.float32, pin_memory=pinned)

            def run():
                ga.copy_(ha, non_blocking=pinned)
                gb.copy_(hb, non_blocking=pinned)
                ga.add_(gb)
                ha.copy_(ga, non_blocking=pinned)
                hb.copy_(ga, non_blocking=pinned)
            t = wall_time(run, max(3, a.reps))
            key = "allreduce_pinned_s" if pinned else "allreduce_pageable_s"
            res[key] = t
            log("same work as the 2-rank all-reduce, %d MiB each, %s: %.2f ms/op" % (n * 4 >> 20, "pinned" if pinned else "pageable", t * 1e3))
            if pinned:
                # The same work pipelined over two streams: chunk k+1 uploads
                # (stream up) while chunk k is summed and downloaded (stream
                # down), so both PCIe directions are busy.
                chunks = 16
                s_up, s_down = torch.cuda.Stream(), torch.cuda.Stream()
                bounds = [(n * k // chunks, n * (k + 1) // chunks) for k in range(chunks)]
                evs = [torch.cuda.Event() for _ in range(chunks)]

                def run2():
                    for k, (lo, hi) in enumerate(bounds):
                        with torch.cuda.stream(s_up):
                            ga[lo:hi].copy_(ha[lo:hi], non_blocking=True)
                            gb[lo:hi].copy_(hb[lo:hi], non_blocking=True)
                            evs[k].record(s_up)
                        with torch.cuda.stream(s_down):
                            s_down.wait_event(evs[k])
                            ga[lo:hi].add_(gb[lo:hi])
                            ha[lo:hi].copy_(ga[lo:hi], non_blocking=True)
                            hb[lo:hi].copy_(ga[lo:hi], non_blocking=True)
                t = wall_time(run2, max(3, a.reps))
                res["allreduce_pinned_2stream_s"] = t
                log("the same, pinned, pipelined in %d chunks over two streams: %.2f ms/op" % (chunks, t * 1e3))
            del ha, hb
        del ga, gb

    def t7():
        # gocoll's T7 peer: N pinned inputs of t7size bytes, N uploads, one
        # sum, N downloads, pipelined in chunks over two streams (uploads on
        # one, the sum and the downloads on the other).
        res["t7_pinned_2stream_s"] = {}
        n = t7size // 4
        chunks = 8
        bounds = [(n * k // chunks, n * (k + 1) // chunks) for k in range(chunks)]
        s_up, s_down = torch.cuda.Stream(), torch.cuda.Stream()
        for ranks in (int(x) for x in a.t7_ranks.split(",")):
            hs = [torch.full((n,), float(r + 1), dtype=torch.float32, pin_memory=True) for r in range(ranks)]
            gs = [torch.empty(n, dtype=torch.float32, device=dev) for _ in range(ranks)]
            evs = [torch.cuda.Event() for _ in range(chunks)]

            def run():
                for k, (lo, hi) in enumerate(bounds):
                    with torch.cuda.stream(s_up):
                        for h, g in zip(hs, gs):
                            g[lo:hi].copy_(h[lo:hi], non_blocking=True)
                        evs[k].record(s_up)
                    with torch.cuda.stream(s_down):
                        s_down.wait_event(evs[k])
                        acc = gs[0][lo:hi]
                        for g in gs[1:]:
                            acc.add_(g[lo:hi])
                        for h in hs:
                            h[lo:hi].copy_(acc, non_blocking=True)
            t = wall_time(run, max(3, a.reps))
            res["t7_pinned_2stream_s"][str(ranks)] = t
            log("T7 peer: %d pinned inputs of %d MiB, uploads + sum + downloads over two streams: %.2f ms" % (ranks, n * 4 >> 20, t * 1e3))
            del hs, gs

    for name, fn in (("scale", scale), ("copies", copies), ("latency", latency), ("reduce", reduce), ("allreduce", allreduce), ("t7", t7)):
        section(name, fn)
        write()
    log("done, %d error(s)" % len(res["errors"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
