#!/usr/bin/env python3
"""Static instruction counts of one kernel's SASS (`cuobjdump -sass` output), with no GPU.

usage: sass_hist.py KERNEL.sass [--from ADDR] [--to ADDR] [--stretches]

Prints the number of instructions and a histogram by opcode (MUFU, F2FP, LDS/STS, SHFL keep their first modifier:
MUFU.EX2 vs MUFU.LG2), for the whole listing or the address range [--from, --to) (hex, as cuobjdump prints them:
e.g. the straight-line stretch after a branch target). With --stretches, also the stretches of code between
synchronising instructions (BAR, SYNCS, WARPGROUP, DEPBAR, HGMMA with a wait) with their lengths — the producer's
and the consumers' per-chunk stages show up as the long ones. Static counts: a loop body counts once, both sides of
a branch count (benches/NOTES.md 2026-12-02i read the mild-chunk path of gate_decays_vec this way).
"""
import re
import sys
from collections import Counter

INSN = re.compile(r"^\s*/\*([0-9a-f]+)\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)(.*?);")
KEEP_MODIFIER = ("MUFU", "F2FP", "LDS", "STS", "SHFL", "HGMMA", "FMNMX", "SYNCS")
SYNC = ("BAR", "SYNCS", "WARPGROUP", "DEPBAR")


def parse(path):
    out = []
    for line in open(path, errors="replace"):
        m = INSN.match(line)
        if m:
            addr, op, rest = int(m.group(1), 16), m.group(3), m.group(4)
            base = op.split(".")[0]
            key = ".".join(op.split(".")[:2]) if base in KEEP_MODIFIER else base
            out.append((addr, key, op + rest))
    return out


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    path, lo, hi, stretches = argv[0], 0, 1 << 64, "--stretches" in argv
    if "--from" in argv:
        lo = int(argv[argv.index("--from") + 1], 16)
    if "--to" in argv:
        hi = int(argv[argv.index("--to") + 1], 16)
    ins = [i for i in parse(path) if lo <= i[0] < hi]
    if not ins:
        print(f"{path}: no instructions in range", file=sys.stderr)
        return 1
    c = Counter(k for _, k, _ in ins)
    print(f"{len(ins)} instructions, 0x{ins[0][0]:x} .. 0x{ins[-1][0]:x}")
    print(", ".join(f"{k} {n}" for k, n in c.most_common()))
    if stretches:
        start, n = ins[0][0], 0
        for addr, key, text in ins:
            n += 1
            if key.split(".")[0] in SYNC or (key.startswith("HGMMA") and "gsb0" in text):
                if n > 1:
                    print(f"  0x{start:x} .. 0x{addr:x}: {n:5d}  ends at {text.strip()[:60]}")
                start, n = addr, 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
