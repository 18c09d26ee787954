#!/usr/bin/env python3
"""Side-by-side baseline: fla 0.6.0 (Triton) and torch SDPA flash on the GPU host.

Measures (bf16, layout [B, T, H, D]):
  copy        device-to-device copy bandwidth (1 GiB torch copy; bytes read + bytes written / time)
  sdpa        torch SDPA, FLASH_ATTENTION backend, causal, q/k/v as [B, H, T, D] contiguous
  acc         fla's error vs an f64 recurrence on small shapes, and a raw dump of one case's inputs/outputs
  gla_fwd     fla.ops.gla.chunk_gla forward, per-key gate g = logsigmoid(randn)/16, [B,T,H,D]
  simple_fwd  fla.ops.simple_gla.chunk_simple_gla forward, scalar gate g = -softplus(randn), [B,T,H]
  acc_bwd     fla's gradient error (dq, dk, dv, dg) vs autograd through an f64 recurrence, at the accuracy shapes
  gla_fwdbwd  chunk_gla forward + backward (torch.autograd.grad w.r.t. q, k, v, g)
  simple_fwdbwd  chunk_simple_gla forward + backward (the scalar gate g = -softplus(randn), grads w.r.t. q, k, v, g)

Timing: the first call (Triton autotuning: 70-250 s per new shape family) is timed by wall clock and stored as
`first_call_s`; then 3 untimed warm calls; then `--reps` timed calls, each with fresh random inputs (regenerated in
place, never zeros), a 256 MB L2 flush and a ~1 ms GPU sleep (so the host enqueues the whole op before the start
event fires; fla's Python launch overhead is thereby excluded), timed with CUDA events; the median is `ms`.
Each family's warm-ups run first, then that family's timings. The JSON file is rewritten atomically after every
measurement, so a run killed by a time limit keeps everything it finished. `--budget-s` is a soft wall-clock budget:
no new warm-up or measurement starts after it is spent (a first call in progress is not interrupted).

CPU self-test: `--dry-run` runs the same code paths on tiny shapes on the CPU, with fla's naive (pure torch)
recurrences standing in for the Triton ops (their call arguments are checked against the real ops' signatures).

Output JSON (schema "fla_bench/1"):
  {"schema", "meta": {...}, "copy": {"bytes", "ms", "gbps", "ms_all"},
   "records": [{"impl", "gate", "pass", "shape": [B,T,H,D], "dtype", "gate_dtype", "status": "ok"|"error"|
                "skipped_budget", "ms", "ms_min", "ms_p10", "ms_p90", "ms_all", "reps", "first_call_s", "error"}],
   "accuracy": [{"impl", "gate", "shape", "gate_dtype", "rel_rms", "max_abs_err", "ref_rms",
                 "naive_f32_rel_rms" (fla's naive recurrence vs our f64 one: checks the reference), "status"}],
   "dump": {"dir", "header"}}
impl is "fla.chunk_gla", "fla.chunk_simple_gla" or "torch.sdpa_flash" (gate null); pass is "fwd" or "fwd_bwd".
"""
from __future__ import annotations

import argparse
import datetime
import inspect
import json
import math
import os
import platform
import signal
import sys
import time
import traceback

import torch
import torch.nn.functional as F

DEFAULT_SHAPES = [(8, 4096, 16, 128), (8, 4096, 32, 64), (8, 4096, 8, 256), (2, 16384, 16, 128),
                  (32, 1024, 16, 128), (8, 4096, 4, 512)]
DEFAULT_FWDBWD_SHAPES = DEFAULT_SHAPES[:3]
ACC_SHAPES = [(2, 1024, 4, 128), (1, 4096, 4, 64)]
DUMP_SHAPE = (2, 1024, 4, 128)

# --dry-run (CPU) stand-ins: small enough for fla's naive python-loop recurrences.
TINY_SHAPES = [(2, 64, 2, 32), (1, 128, 2, 16), (4, 32, 2, 64)]
TINY_FWDBWD_SHAPES = TINY_SHAPES[:2]
TINY_ACC_SHAPES = [(2, 48, 2, 32), (1, 96, 2, 16)]
TINY_DUMP_SHAPE = (2, 48, 2, 32)

ALL_CASES = ["copy", "sdpa", "acc", "acc_bwd", "gla_fwd", "simple_fwd", "gla_fwdbwd", "simple_fwdbwd"]
DTYPES = {"bf16": torch.bfloat16, "f32": torch.float32, "f16": torch.float16}


def log(msg: str) -> None:
    print(f"[fla_bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def parse_shapes(s: str, default):
    if s in ("default", ""):
        return list(default)
    if s == "tiny":
        return list(TINY_SHAPES)
    out = []
    for part in s.split(";"):
        part = part.strip()
        if part:
            b, t, h, d = (int(x) for x in part.split(","))
            out.append((b, t, h, d))
    return out


# --------------------------------------------------------------------------------------------- gates and inputs
# The per-key gate strengths of the benchmark: label -> log alpha as a torch expression of the f32 logits x
# (x ~ N(0,1)) and gamma (hgrn2's per-head parameter, drawn in (0.01, 0.99) like ours). The same labels and
# formulas as tests/src/strengths.rs (a Rust test checks that every formula there appears here verbatim).
STRENGTHS = {
    "const-1e-6": "torch.full_like(x, -1e-6)",
    "gla/16": "F.logsigmoid(x) / 16",
    "hgrn2": "torch.log(gamma + (1 - gamma) * torch.sigmoid(x))",
    "fla": "torch.clamp(F.logsigmoid(x), min=-5)",
    "gla/1": "F.logsigmoid(x)",
    "rwkv6": "-torch.exp(x)",
    "gla/0.1": "F.logsigmoid(x) * 10",
    "const-60": "torch.full_like(x, -60.0)",
}


def gate_from_logits(x: torch.Tensor, gate: str, gamma=None) -> torch.Tensor:
    """log alpha from raw logits x, computed in f32. gla: logsigmoid(x)/16; mamba2: -softplus(x); a label of
    STRENGTHS: its formula (gamma: [H] per-head parameter for hgrn2)."""
    xf = x.float()
    if gate == "gla":
        return F.logsigmoid(xf) / 16.0
    if gate == "mamba2":
        return -F.softplus(xf)
    if gate in STRENGTHS:
        g = None if gamma is None else gamma.view(1, 1, -1, 1).to(xf)
        return eval(STRENGTHS[gate], {"torch": torch, "F": F}, {"x": xf, "gamma": g})  # noqa: S307 (our table)
    raise ValueError(gate)


def gate_shape(shape, gate):
    b, t, h, d = shape
    return (b, t, h) if gate == "mamba2" else (b, t, h, d)


class Inputs:
    """Preallocated q, k, v, g (and do) refilled in place with fresh random values."""

    def __init__(self, shape, gate, dtype, gate_dtype, device, requires_grad=False, with_do=False):
        b, t, h, d = shape
        self.gate = gate
        self.q = torch.empty(b, t, h, d, dtype=dtype, device=device)
        self.k = torch.empty_like(self.q)
        self.v = torch.empty_like(self.q)
        self.g = torch.empty(gate_shape(shape, gate), dtype=gate_dtype, device=device)
        self._x = torch.empty(self.g.shape, dtype=torch.float32, device=device)
        # hgrn2's per-head parameter, fixed for the case (like ours: uniform in (0.01, 0.99))
        self.gamma = torch.rand(h, device=device) * 0.98 + 0.01
        self.do = torch.empty_like(self.v) if with_do else None
        self.regen()
        if requires_grad:
            for t_ in (self.q, self.k, self.v, self.g):
                t_.requires_grad_(True)

    @torch.no_grad()
    def regen(self):
        self.q.normal_()
        self.k.normal_()
        self.v.normal_()
        self._x.normal_()
        self.g.copy_(gate_from_logits(self._x, self.gate, self.gamma))
        if self.do is not None:
            self.do.normal_()


# --------------------------------------------------------------------------------------------- ops
class Ops:
    """The measured operations; in dry-run mode fla's naive recurrences stand in for the Triton kernels."""

    def __init__(self, dry_run: bool):
        self.dry_run = dry_run
        self.fla_version = None
        self.fla_error = None
        try:
            import fla  # noqa: F401
            from fla.ops.gla import chunk_gla
            from fla.ops.gla.naive import naive_recurrent_gla
            from fla.ops.simple_gla import chunk_simple_gla
            from fla.ops.simple_gla.naive import naive_recurrent_simple_gla
            self.chunk_gla = chunk_gla
            self.chunk_simple_gla = chunk_simple_gla
            self.naive_gla = naive_recurrent_gla
            self.naive_simple = naive_recurrent_simple_gla
            self.fla_version = getattr(fla, "__version__", "?")
        except Exception as e:  # reported in the JSON; fla cases then fail individually
            self.fla_error = f"{type(e).__name__}: {e}"
            self.chunk_gla = self.chunk_simple_gla = self.naive_gla = self.naive_simple = None

    def _need_fla(self):
        if self.chunk_gla is None:
            raise RuntimeError(f"fla is not importable: {self.fla_error}")

    def gla(self, q, k, v, g, scale):
        """fla.ops.gla.chunk_gla(q, k, v, g, scale=..., initial_state=None, output_final_state=False) -> (o, None)"""
        self._need_fla()
        kwargs = dict(scale=scale, initial_state=None, output_final_state=False)
        if self.dry_run:
            inspect.signature(self.chunk_gla).bind(q, k, v, g, **kwargs)  # the real call's arguments
            o, _ = self.naive_gla(q, k, v, g)  # naive uses scale = K**-0.5 (== ours)
            return o
        o, ht = self.chunk_gla(q, k, v, g, **kwargs)
        assert ht is None
        return o

    def simple_gla(self, q, k, v, g, scale):
        """chunk_simple_gla(q, k, v, g=g, scale=...): NB its 5th positional parameter is g_gamma, so pass scale by
        keyword."""
        self._need_fla()
        kwargs = dict(g=g, scale=scale, initial_state=None, output_final_state=False)
        if self.dry_run:
            inspect.signature(self.chunk_simple_gla).bind(q, k, v, **kwargs)
            o, _ = self.naive_simple(q, k, v, g, scale=scale, output_final_state=False)
            return o
        o, ht = self.chunk_simple_gla(q, k, v, **kwargs)
        assert ht is None
        return o


def sdpa_flash(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


# --------------------------------------------------------------------------------------------- timing
class Timer:
    def __init__(self, device: str, flush_mb: int, sleep_cycles: int):
        self.device = device
        self.cuda = device.startswith("cuda")
        self.flush_buf = torch.empty(flush_mb * (1 << 20), dtype=torch.uint8, device=device)
        self.sleep_cycles = sleep_cycles

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def flush(self):
        self.flush_buf.fill_(1)  # a 256 MB write evicts the 60 MB L2

    def first_call(self, fn) -> float:
        self.sync()
        t0 = time.perf_counter()
        fn()
        self.sync()
        return time.perf_counter() - t0

    def measure(self, fn, regen, reps: int):
        """Per rep: fresh inputs, L2 flush, GPU sleep, [start] fn [end]. Returns a list of ms."""
        if not self.cuda:
            out = []
            for _ in range(reps):
                regen()
                self.flush()
                t0 = time.perf_counter()
                fn()
                out.append((time.perf_counter() - t0) * 1e3)
            return out
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        self.sync()
        for i in range(reps):
            regen()
            self.flush()
            if self.sleep_cycles > 0:
                torch.cuda._sleep(self.sleep_cycles)
            starts[i].record()
            fn()
            ends[i].record()
        self.sync()
        return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def stats(ms):
    xs = sorted(ms)
    n = len(xs)

    def pct(p):
        return xs[min(n - 1, max(0, int(round(p * (n - 1)))))]

    med = xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])
    return {"ms": med, "ms_min": xs[0], "ms_p10": pct(0.1), "ms_p90": pct(0.9), "reps": n,
            "ms_all": [round(x, 5) for x in ms]}


# --------------------------------------------------------------------------------------------- results file
class Results:
    def __init__(self, path: str, meta: dict):
        self.path = path
        self.data = {"schema": "fla_bench/1", "meta": meta, "copy": None, "records": [], "accuracy": [],
                     "dump": None}
        self.write()

    def write(self):
        self.data["meta"]["written_at"] = datetime.datetime.now().isoformat(timespec="seconds")
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f, indent=1)
        os.replace(tmp, self.path)

    def upsert(self, rec: dict):
        def key_of(r):
            return r["impl"], r["gate"], r.get("strength"), r["pass"], tuple(r["shape"])
        key = key_of(rec)
        recs = self.data["records"]
        for i, r in enumerate(recs):
            if key_of(r) == key:
                merged = dict(r)
                merged.update(rec)
                recs[i] = merged
                break
        else:
            recs.append(rec)
        self.write()


# --------------------------------------------------------------------------------------------- f64 reference
def ref_recurrence_f64(q, k, v, g, scale):
    """o_t = (scale q_t)^T S_t, S_t = diag(exp g_t) S_{t-1} + k_t v_t^T in float64; [B,T,H,D] in/out.
    g is [B,T,H,D] (per-key) or [B,T,H] (scalar). Vectorised over B, H; loops over T on q's device."""
    qd, kd, vd, gd = (x.detach().to(torch.float64).transpose(1, 2) for x in (q, k, v, g))  # [B,H,T,...]
    b, h, t, dk = qd.shape
    dv = vd.shape[-1]
    per_key = gd.dim() == 4
    a = gd.exp()
    s = torch.zeros(b, h, dk, dv, dtype=torch.float64, device=qd.device)
    o = torch.empty(b, h, t, dv, dtype=torch.float64, device=qd.device)
    qs = qd * scale
    for i in range(t):
        ai = a[:, :, i]
        s.mul_(ai[..., None] if per_key else ai[..., None, None])
        s.add_(kd[:, :, i, :, None] * vd[:, :, i, None, :])
        o[:, :, i] = torch.einsum("bhk,bhkv->bhv", qs[:, :, i], s)
    return o.transpose(1, 2)  # [B,T,H,Dv]


def ref_grads_f64(q, k, v, g, do, scale):
    """(dq, dk, dv, dg) of sum(o * do) through the f64 recurrence of ref_recurrence_f64, by torch autograd
    (out-of-place, so every S_t is kept: B·H·T·dk·dv·8 bytes)."""
    leaves = [x.detach().to(torch.float64).transpose(1, 2).requires_grad_(True) for x in (q, k, v, g)]
    qd, kd, vd, gd = leaves
    b, h, t, dk = qd.shape
    per_key = gd.dim() == 4
    a = gd.exp()
    s = torch.zeros(b, h, dk, vd.shape[-1], dtype=torch.float64, device=qd.device)
    outs = []
    for i in range(t):
        ai = a[:, :, i]
        s = s * (ai[..., None] if per_key else ai[..., None, None]) + kd[:, :, i, :, None] * vd[:, :, i, None, :]
        outs.append(torch.einsum("bhk,bhkv->bhv", qd[:, :, i] * scale, s))
    o = torch.stack(outs, dim=2)
    grads = torch.autograd.grad(o, leaves, do.detach().to(torch.float64).transpose(1, 2))
    return [gr.transpose(1, 2) for gr in grads]


def rel_rms(o, ref):
    o = o.detach().to(torch.float64)
    ref = ref.to(torch.float64)
    return math.sqrt(((o - ref) ** 2).sum().item() / (ref ** 2).sum().item())


def write_f32(path, t):
    t.detach().to("cpu", torch.float32).contiguous().numpy().astype("<f4").tofile(path)


def dump_case(dump_dir, shape, x, q, k, v, g, o_fla, o_ref, scale, gate_desc, err, args):
    os.makedirs(dump_dir, exist_ok=True)
    tensors = {}
    for name, t, src in (("q", q, "bf16"), ("k", k, "bf16"), ("v", v, "bf16"), ("g", g, str(g.dtype)),
                         ("o_fla", o_fla, str(o_fla.dtype)), ("o_ref", o_ref, "float64")):
        fn = f"{name}.bin"
        write_f32(os.path.join(dump_dir, fn), t)
        tensors[name] = {"file": fn, "shape": list(t.shape), "layout": "B,T,H,D", "stored_as": "f32",
                         "source_dtype": src.replace("torch.", "")}
    # The raw logits x (bf16) are not stored (the device tool returns at most 8 files); they are recoverable from g:
    # x = bf16(y - log(-expm1(y))) with y = 16 g. Check that here.
    y = g.detach().to(torch.float64) * 16.0
    x_rec = (y - torch.log(-torch.expm1(y))).to(torch.bfloat16)
    mism = int((x_rec != x).sum().item())
    header = {
        "format": "raw little-endian float32, C order (row-major), one file per tensor",
        "shape_BTHD": list(shape),
        "gate": "gla (per-key)",
        "gate_fn": gate_desc,
        "scale": scale,
        "recurrence": "S_t = diag(exp g_t) S_{t-1} + k_t v_t^T (S: D_k x D_v, S_0 = 0); o_t = S_t^T (scale * q_t)",
        "fla_call": "fla.ops.gla.chunk_gla(q, k, v, g, scale=scale) with q,k,v bf16 and g f32; o_fla is its bf16 "
                    "output",
        "o_ref": "f64 recurrence on the same (bf16-valued q,k,v; f32 g) inputs, rounded to f32",
        "rel_rms_fla_vs_ref": err,
        "x_from_g": "x = round_to_bf16(y - log(-expm1(y))), y = 16*g (in f64)",
        "x_from_g_mismatches": mism,
        "seed": args.seed,
        "tensors": tensors,
    }
    with open(os.path.join(dump_dir, "header.json"), "w") as f:
        json.dump(header, f, indent=1)
    return header


# --------------------------------------------------------------------------------------------- main
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="results JSON (rewritten after every measurement)")
    ap.add_argument("--shapes", default="default",
                    help="'default', 'tiny' or 'B,T,H,D;B,T,H,D;...' for the forward cases and SDPA")
    ap.add_argument("--fwdbwd-shapes", default="default", help="shapes for gla_fwdbwd (default: first three)")
    ap.add_argument("--cases", default=",".join(ALL_CASES), help=f"comma list from {ALL_CASES}")
    ap.add_argument("--strengths", default="gla/16",
                    help=f"gla_fwd's per-key gates: 'all' or a comma list of {list(STRENGTHS)} (record field 'strength')")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--budget-s", type=float, default=float("inf"),
                    help="soft wall-clock budget: start no new warm-up/measurement after it")
    ap.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    ap.add_argument("--gate-dtype", default="bf16", choices=sorted(DTYPES), help="dtype of g in the timed cases")
    ap.add_argument("--acc-gate-dtypes", default="f32,bf16", help="g dtypes for the accuracy cases")
    ap.add_argument("--acc-shapes", default="default", help="'B,T,H,D;...' for the accuracy cases (default: "
                    + ";".join(",".join(map(str, s)) for s in ACC_SHAPES) + ")")
    ap.add_argument("--dump-dir", default=None, help="raw dump of one accuracy case (default: <out dir>/fla_dump)")
    ap.add_argument("--dump-shape", default="default", help="'B,T,H,D' of the dumped accuracy case (default "
                    f"{DUMP_SHAPE}; must be one of the accuracy shapes)")
    ap.add_argument("--no-dump", action="store_true")
    ap.add_argument("--flush-mb", type=int, default=256)
    ap.add_argument("--sleep-cycles", type=int, default=2_000_000, help="GPU sleep before each timed call (~1 ms)")
    ap.add_argument("--copy-gib", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--autotune-cache-in", default=None,
                    help="comma list of tar.gz files of Triton *.autotune.json from earlier runs: extracted into Triton's cache "
                         "dir first, so first calls skip autotuning (kernels are still compiled once)")
    ap.add_argument("--autotune-cache-out", default=None,
                    help="write a tar.gz of Triton's *.autotune.json files after every family (small, portable to "
                         "another machine with the same GPU, triton, fla and env)")
    ap.add_argument("--dry-run", action="store_true",
                    help="CPU self-test: tiny shapes, fla's naive recurrences instead of Triton kernels")
    args = ap.parse_args(argv)

    if args.dry_run:
        args.device = "cpu"
        if args.shapes == "default":
            args.shapes = "tiny"
        args.reps = min(args.reps, 3)
        args.flush_mb = min(args.flush_mb, 8)
        args.copy_gib = min(args.copy_gib, 1 / 64)
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device (use --dry-run for the CPU self-test)")
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    strengths = list(STRENGTHS) if args.strengths == "all" else [s for s in args.strengths.split(",") if s]
    unknown = [s for s in strengths if s not in STRENGTHS]
    if unknown:
        sys.exit(f"unknown strengths {unknown}; choose from {list(STRENGTHS)}")
    bad = [c for c in cases if c not in ALL_CASES]
    if bad:
        sys.exit(f"unknown cases {bad}; choose from {ALL_CASES}")

    shapes = parse_shapes(args.shapes, DEFAULT_SHAPES)
    fb_default = TINY_FWDBWD_SHAPES if args.dry_run else DEFAULT_FWDBWD_SHAPES
    fwdbwd_shapes = parse_shapes(args.fwdbwd_shapes, fb_default)
    acc_shapes = TINY_ACC_SHAPES if args.dry_run else ACC_SHAPES
    if args.acc_shapes != "default":
        acc_shapes = [tuple(int(x) for x in s.split(",")) for s in args.acc_shapes.split(";") if s.strip()]
    dump_shape = TINY_DUMP_SHAPE if args.dry_run else DUMP_SHAPE
    if args.dump_shape != "default":
        dump_shape = tuple(int(x) for x in args.dump_shape.split(","))
    dtype = DTYPES[args.dtype]
    gdtype = DTYPES[args.gate_dtype]
    dev = args.device
    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    dump_dir = args.dump_dir or os.path.join(out_dir, "fla_dump")

    t_start = time.perf_counter()

    def budget_left():
        return args.budget_s - (time.perf_counter() - t_start)

    for path in filter(None, (args.autotune_cache_in or "").split(",")):
        n = autotune_cache_import(path)
        log(f"autotune cache: {n} entries from {path} -> {_triton_cache_dir()}")
    ops = Ops(args.dry_run)
    meta = {
        "argv": sys.argv if argv is None else ["fla_bench.py", *argv],
        "host": platform.node(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": _version("triton"),
        "fla": ops.fla_version,
        "fla_import_error": ops.fla_error,
        "device": torch.cuda.get_device_name(0) if dev == "cuda" else "cpu",
        "cuda_runtime": torch.version.cuda,
        "dry_run": args.dry_run,
        "dtype": args.dtype,
        "gate_dtype": args.gate_dtype,
        "gates": {"gla": "g = logsigmoid(x)/16, x ~ N(0,1), shape [B,T,H,D]",
                  "mamba2": "g = -softplus(x), x ~ N(0,1), shape [B,T,H]",
                  **{f"strength {k}": f"g = {v}, x ~ N(0,1) f32, shape [B,T,H,D]" for k, v in STRENGTHS.items()}},
        "timing": f"median of --reps CUDA-event timings; fresh inputs, {args.flush_mb} MB L2 flush and "
                  f"{args.sleep_cycles}-cycle GPU sleep before each call",
        "reps": args.reps,
        "seed": args.seed,
        "started_at": datetime.datetime.now().isoformat(timespec="seconds"),
    }
    if dev == "cuda":
        p = torch.cuda.get_device_properties(0)
        meta.update(sm_count=p.multi_processor_count, total_mem_gib=round(p.total_memory / 2**30, 1),
                    capability=f"{p.major}.{p.minor}")
    res = Results(args.out, meta)
    log(f"device={meta['device']} torch={torch.__version__} triton={meta['triton']} fla={ops.fla_version} "
        f"cases={cases} out={args.out}")
    if ops.fla_error:
        log(f"WARNING fla import failed: {ops.fla_error}")

    torch.manual_seed(args.seed)
    timer = Timer(dev, args.flush_mb, args.sleep_cycles if dev == "cuda" else 0)

    def on_term(signum, frame):
        log(f"signal {signum}: results so far are in {args.out}")
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)

    # ---------------------------------------------------------------- copy bandwidth
    if "copy" in cases:
        try:
            n = int(args.copy_gib * (1 << 30))
            src = torch.empty(n // 2, dtype=torch.bfloat16, device=dev).normal_()
            dst = torch.empty_like(src)
            fn = lambda: dst.copy_(src)  # noqa: E731
            for _ in range(3):
                fn()
            ms = timer.measure(fn, lambda: None, max(20, min(args.reps, 50)) if not args.dry_run else 3)
            st = stats(ms)
            gbps = 2 * src.numel() * src.element_size() / (st["ms"] * 1e-3) / 1e9
            res.data["copy"] = {"bytes": src.numel() * src.element_size(), "ms": st["ms"], "gbps": gbps,
                                "note": "torch dst.copy_(src); gbps = (bytes read + bytes written) / median time",
                                "ms_all": st["ms_all"]}
            res.write()
            log(f"copy {src.numel() * 2 / 2**30:.3f} GiB: {st['ms']:.3f} ms -> {gbps:.0f} GB/s (read+write)")
            del src, dst
        except Exception as e:
            log(f"copy failed: {e}")
            res.data["copy"] = {"status": "error", "error": repr(e)}
            res.write()

    # ---------------------------------------------------------------- families
    def run_family(name, impl, gate, pss, fam_shapes, make_case, strength=None):
        """make_case(shape) -> (fn, regen, cleanup). Warm up every shape, then time every shape."""
        prepared = []
        for shape in fam_shapes:
            base = {"impl": impl, "gate": gate, "pass": pss, "shape": list(shape), "dtype": args.dtype,
                    "gate_dtype": args.gate_dtype if gate else None}
            if strength is not None:
                b_, t_, h_, d_ = shape
                base.update(strength=strength, formula=STRENGTHS[strength], B=b_, T=t_, H=h_, D=d_,
                            distribution="x ~ N(0,1) f32")
            if budget_left() <= 0:
                res.upsert({**base, "status": "skipped_budget"})
                log(f"{name} {shape}: skipped (budget)")
                continue
            try:
                fn, regen, cleanup = make_case(shape)
                log(f"{name} {shape}: first call (may autotune for minutes) ...")
                fc = timer.first_call(fn)
                for _ in range(3):
                    fn()
                timer.sync()
                res.upsert({**base, "status": "warm", "first_call_s": round(fc, 3)})
                log(f"{name} {shape}: first call {fc:.1f} s")
                prepared.append((shape, base, fn, regen, cleanup))
            except Exception as e:
                res.upsert({**base, "status": "error", "error": f"{type(e).__name__}: {e}"})
                log(f"{name} {shape}: ERROR {type(e).__name__}: {e}")
                traceback.print_exc()
                _free(dev)
            # keep only what timing needs: inputs of warm cases stay allocated (a few GB at most)
        for shape, base, fn, regen, cleanup in prepared:
            if budget_left() <= 0:
                res.upsert({**base, "status": "skipped_budget"})
                log(f"{name} {shape}: timing skipped (budget)")
                cleanup()
                continue
            try:
                st = stats(timer.measure(fn, regen, args.reps))
                res.upsert({**base, "status": "ok", **st})
                log(f"{name} {shape}: median {st['ms']:.4f} ms (p10 {st['ms_p10']:.4f}, p90 {st['ms_p90']:.4f})")
            except Exception as e:
                res.upsert({**base, "status": "error", "error": f"{type(e).__name__}: {e}"})
                log(f"{name} {shape}: ERROR {type(e).__name__}: {e}")
                traceback.print_exc()
            cleanup()
        prepared.clear()
        _free(dev)
        save_autotune()

    def save_autotune():
        if args.autotune_cache_out:
            try:
                n = autotune_cache_export(args.autotune_cache_out)
                log(f"autotune cache: {n} entries -> {args.autotune_cache_out}")
            except Exception as e:
                log(f"autotune cache export failed: {e}")

    def fwd_case(gate, opname):
        def make(shape):
            d = shape[3]
            inp = Inputs(shape, gate, dtype, gdtype, dev)
            op = getattr(ops, opname)

            def fn():
                with torch.no_grad():
                    return op(inp.q, inp.k, inp.v, inp.g, d ** -0.5)

            return fn, inp.regen, lambda: None
        return make

    def fwdbwd_case_of(gate, opname):
        def make(shape):
            d = shape[3]
            inp = Inputs(shape, gate, dtype, gdtype, dev, requires_grad=True, with_do=True)
            op = getattr(ops, opname)
            if dev == "cuda":
                # Activation memory: what the forward keeps for the backward (the autograd graph's saved tensors),
                # beyond its inputs and its output o.
                torch.cuda.synchronize()
                before = torch.cuda.memory_allocated()
                with torch.enable_grad():
                    o_ = op(inp.q, inp.k, inp.v, inp.g, d ** -0.5)
                torch.cuda.synchronize()
                kept = torch.cuda.memory_allocated() - before - o_.numel() * o_.element_size()
                res.data.setdefault("activation_memory", []).append(
                    {"impl": f"fla.{'chunk_gla' if opname == 'gla' else 'chunk_simple_gla'}", "gate": gate,
                     "shape": list(shape), "dtype": args.dtype, "bytes_kept": kept,
                     "note": "torch.cuda.memory_allocated() after the forward with grad enabled, minus before, "
                             "minus o"})
                res.write()
                log(f"{opname} {shape}: forward keeps {kept / 2**20:.1f} MiB for the backward (beyond inputs and o)")
                del o_

            def fn():
                with torch.enable_grad():
                    o = op(inp.q, inp.k, inp.v, inp.g, d ** -0.5)
                    grads = torch.autograd.grad(o, (inp.q, inp.k, inp.v, inp.g), inp.do)
                return grads

            return fn, inp.regen, lambda: None
        return make

    fwdbwd_case = fwdbwd_case_of("gla", "gla")

    def sdpa_case(shape):
        b, t, h, d = shape
        qs = [torch.empty(b, t, h, d, dtype=dtype, device=dev).transpose(1, 2).contiguous() for _ in range(3)]

        @torch.no_grad()
        def regen():
            for x in qs:
                x.normal_()

        regen()
        from torch.nn.attention import SDPBackend, sdpa_kernel

        def fn():
            with torch.no_grad(), sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                return sdpa_flash(*qs)

        return fn, regen, lambda: None

    if "sdpa" in cases:
        run_family("sdpa", "torch.sdpa_flash", None, "fwd", shapes, sdpa_case)

    # ---------------------------------------------------------------- accuracy (+ dump)
    if "acc" in cases:
        acc_gdtypes = [s.strip() for s in args.acc_gate_dtypes.split(",") if s.strip()]
        for shape in acc_shapes:
            for gate in ("gla", "mamba2"):
                for gds in acc_gdtypes:
                    impl = "fla.chunk_gla" if gate == "gla" else "fla.chunk_simple_gla"
                    rec = {"impl": impl, "gate": gate, "shape": list(shape), "dtype": args.dtype, "gate_dtype": gds,
                           "ref": "f64 recurrence (torch, on device)", "metric": "sqrt(sum((o-ref)^2)/sum(ref^2))"}
                    if budget_left() <= 0:
                        res.data["accuracy"].append({**rec, "status": "skipped_budget"})
                        res.write()
                        continue
                    try:
                        b, t, h, d = shape
                        scale = d ** -0.5
                        gen = torch.Generator(device="cpu").manual_seed(args.seed + 1000 * len(res.data["accuracy"]))
                        mk = lambda *s: torch.randn(*s, generator=gen).to(dtype).to(dev)  # noqa: E731
                        q, k, v = mk(b, t, h, d), mk(b, t, h, d), mk(b, t, h, d)
                        x = mk(*gate_shape(shape, gate))  # raw logits, rounded to the input dtype
                        g = gate_from_logits(x, gate).to(DTYPES[gds])
                        t0 = time.perf_counter()
                        with torch.no_grad():
                            o = ops.gla(q, k, v, g, scale) if gate == "gla" else ops.simple_gla(q, k, v, g, scale)
                        timer.sync()
                        t_fla = time.perf_counter() - t0
                        ref = ref_recurrence_f64(q, k, v, g, scale)
                        err = rel_rms(o, ref)
                        finite = bool(torch.isfinite(o).all().item())
                        # cross-check our f64 reference against fla's own naive (f32) recurrence
                        with torch.no_grad():
                            if gate == "gla":
                                on, _ = ops.naive_gla(q.float(), k.float(), v.float(), g.float())
                            else:
                                on, _ = ops.naive_simple(q.float(), k.float(), v.float(), g.float(), scale=scale,
                                                         output_final_state=False)
                        nerr = rel_rms(on, ref)
                        r = {**rec, "status": "ok", "rel_rms": err, "finite": finite,
                             "max_abs_err": (o.double() - ref).abs().max().item(),
                             "ref_rms": ref.pow(2).mean().sqrt().item(), "naive_f32_rel_rms": nerr,
                             "first_call_s": round(t_fla, 3), "o_dtype": str(o.dtype).replace("torch.", "")}
                        res.data["accuracy"].append(r)
                        res.write()
                        log(f"acc {impl} {gate} g:{gds} {shape}: rel_rms {err:.3e} (fla naive f32 vs f64 ref "
                            f"{nerr:.2e}; finite={finite})")
                        if nerr > 1e-4:
                            log("WARNING: fla's naive recurrence disagrees with the f64 reference: check the reference")
                        if (not args.no_dump and gate == "gla" and gds == "f32" and tuple(shape) == dump_shape):
                            hdr = dump_case(dump_dir, shape, x, q, k, v, g, o, ref, scale,
                                            "g = logsigmoid(x)/16 computed in f32 by torch from bf16 x ~ N(0,1) "
                                            "(torch.nn.functional.logsigmoid(x.float()) / 16)", err, args)
                            res.data["dump"] = {"dir": dump_dir, "header": "header.json",
                                                "x_from_g_mismatches": hdr["x_from_g_mismatches"]}
                            res.write()
                            log(f"dumped inputs/outputs to {dump_dir} (x-from-g mismatches: "
                                f"{hdr['x_from_g_mismatches']})")
                        del q, k, v, x, g, o, ref, on
                    except Exception as e:
                        res.data["accuracy"].append({**rec, "status": "error", "error": f"{type(e).__name__}: {e}"})
                        res.write()
                        log(f"acc {impl} {gate} {shape}: ERROR {type(e).__name__}: {e}")
                        traceback.print_exc()
                    _free(dev)

        save_autotune()

    if "gla_fwd" in cases:
        for st in strengths:
            run_family(f"gla_fwd[{st}]", "fla.chunk_gla", "gla", "fwd", shapes, fwd_case(st, "gla"), strength=st)
    if "simple_fwd" in cases:
        run_family("simple_fwd", "fla.chunk_simple_gla", "mamba2", "fwd", shapes, fwd_case("mamba2", "simple_gla"))
    if "gla_fwdbwd" in cases:
        run_family("gla_fwdbwd", "fla.chunk_gla", "gla", "fwd_bwd", fwdbwd_shapes, fwdbwd_case)
    if "simple_fwdbwd" in cases:
        run_family("simple_fwdbwd", "fla.chunk_simple_gla", "mamba2", "fwd_bwd", fwdbwd_shapes,
                   fwdbwd_case_of("mamba2", "simple_gla"))

    # ---------------------------------------------------------------- gradient accuracy (after the timed cases:
    # fla autotunes per head shape on its first call, so the timing runs tune at the benchmark shapes)
    if "acc_bwd" in cases:
        for shape in acc_shapes:
            for gate in ("gla", "mamba2"):
                impl = "fla.chunk_gla" if gate == "gla" else "fla.chunk_simple_gla"
                rec = {"impl": impl, "gate": gate, "pass": "bwd", "shape": list(shape), "dtype": args.dtype,
                       "gate_dtype": "f32", "ref": "torch autograd through an f64 recurrence (on device)",
                       "metric": "sqrt(sum((x-ref)^2)/sum(ref^2)) per gradient; dg = d(log alpha)",
                       "distribution": "q, k, v, dO, x ~ N(0,1) (q, k, v, dO rounded to dtype); g = gate(x) f32"}
                if budget_left() <= 0:
                    res.data["accuracy"].append({**rec, "status": "skipped_budget"})
                    res.write()
                    continue
                try:
                    b, t, h, d = shape
                    scale = d ** -0.5
                    gen = torch.Generator(device="cpu").manual_seed(args.seed + 7000 + len(res.data["accuracy"]))
                    mk = lambda *s_: torch.randn(*s_, generator=gen).to(dtype).to(dev)  # noqa: E731
                    q, k, v, do = mk(b, t, h, d), mk(b, t, h, d), mk(b, t, h, d), mk(b, t, h, d)
                    x = torch.randn(*gate_shape(shape, gate), generator=gen).to(dev)
                    g = gate_from_logits(x, gate)
                    leaves = [y.clone().requires_grad_(True) for y in (q, k, v, g)]
                    with torch.enable_grad():
                        op = ops.gla if gate == "gla" else ops.simple_gla
                        o = op(*leaves, scale)
                        got = torch.autograd.grad(o, leaves, do)
                    ref = ref_grads_f64(q, k, v, g, do, scale)
                    errs = {f"rel_rms_{n}": rel_rms(a_, r_) for n, a_, r_ in zip(("dq", "dk", "dv", "dg"), got, ref)}
                    res.data["accuracy"].append({**rec, "status": "ok", **errs})
                    res.write()
                    log(f"acc_bwd {impl} {gate} {shape}: " + ", ".join(f"{n} {e:.3e}" for n, e in errs.items()))
                    del q, k, v, do, x, g, leaves, o, got, ref
                except Exception as e:
                    res.data["accuracy"].append({**rec, "status": "error", "error": f"{type(e).__name__}: {e}"})
                    res.write()
                    log(f"acc_bwd {impl} {gate} {shape}: ERROR {type(e).__name__}: {e}")
                    traceback.print_exc()
                _free(dev)
        save_autotune()

    res.data["meta"]["elapsed_s"] = round(time.perf_counter() - t_start, 1)
    res.write()
    print_summary(res.data)
    return res.data


def _triton_cache_dir():
    try:
        import triton
        return triton.knobs.cache.dir
    except Exception:
        return os.environ.get("TRITON_CACHE_DIR") or os.path.expanduser("~/.triton/cache")


def autotune_cache_export(path):
    """tar.gz of every *.autotune.json under Triton's cache dir (paths relative to it)."""
    import tarfile
    root = _triton_cache_dir()
    files = []
    for dirpath, _, names in os.walk(root):
        files += [os.path.join(dirpath, n) for n in names if n.endswith(".autotune.json")]
    tmp = path + ".tmp"
    with tarfile.open(tmp, "w:gz") as tf:
        for f in sorted(files):
            tf.add(f, arcname=os.path.relpath(f, root))
    os.replace(tmp, path)
    return len(files)


def autotune_cache_import(path):
    import tarfile
    if not os.path.exists(path):
        log(f"autotune cache {path} not found; autotuning from scratch")
        return 0
    root = _triton_cache_dir()
    os.makedirs(root, exist_ok=True)
    n = 0
    with tarfile.open(path, "r:gz") as tf:
        for m in tf.getmembers():
            if m.isfile() and m.name.endswith(".autotune.json") and not m.name.startswith(("/", "..")) \
                    and ".." not in m.name.split("/"):
                tf.extract(m, root)
                n += 1
    return n


def _version(mod):
    try:
        return __import__(mod).__version__
    except Exception:
        return None


def _free(dev):
    import gc
    gc.collect()
    if dev == "cuda":
        torch.cuda.empty_cache()


def print_summary(data):
    print("\n== summary ==", flush=True)
    c = data.get("copy") or {}
    if c.get("gbps"):
        print(f"copy: {c['gbps']:.0f} GB/s (read+write)")
    print(f"{'impl':22} {'gate':7} {'pass':8} {'shape':20} {'ms':>9} {'first_s':>8} status")
    for r in data["records"]:
        ms = f"{r['ms']:.4f}" if r.get("ms") is not None else "-"
        fc = f"{r['first_call_s']:.1f}" if r.get("first_call_s") is not None else "-"
        print(f"{r['impl']:22} {str(r['gate']):7} {r['pass']:8} {str(tuple(r['shape'])):20} {ms:>9} {fc:>8} "
              f"{r['status']}")
    for a in data["accuracy"]:
        e = f"{a['rel_rms']:.3e}" if a.get("rel_rms") is not None else "-"
        print(f"acc {a['impl']:22} {a['gate']:7} g:{a['gate_dtype']:5} {str(tuple(a['shape'])):20} rel_rms {e} "
              f"{a['status']}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
