#!/usr/bin/env python3
"""Summarise an `ncu --page source --csv --print-source sass` export: warp-stall samples per SASS instruction.

usage: ncu_top.py SASS.csv [N]   -> the N instructions with the most samples (address, samples, the SASS, the top
stall reasons where the export has per-reason columns), then samples per opcode and per stretch of code between
barriers (BAR / WARPSYNC / HGMMA waits), so that a producer / consumer phase's share of the stalls can be read off.
"""
import csv
import sys
from collections import Counter


def num(x):
    try:
        return float(str(x).replace(",", ""))
    except ValueError:
        return 0.0


def main():
    path, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 60
    rows = list(csv.reader(open(path, newline="", errors="replace")))
    hi = next(i for i, r in enumerate(rows) if any("Address" in c for c in r) and any("Source" in c for c in r))
    head = rows[hi]
    col = {h: i for i, h in enumerate(head)}
    a_i = next(i for h, i in col.items() if "Address" in h)
    s_i = next(i for h, i in col.items() if h.strip() == "Source")
    all_i = next((i for h, i in col.items() if "Sampling (All" in h), None)
    if all_i is None:
        all_i = next(i for h, i in col.items() if "Sampl" in h)
    reasons = [(h, i) for h, i in col.items() if h.startswith("stall_") or ("Stall" in h and "Sampling" not in h)]
    body = [r for r in rows[hi + 1:] if len(r) == len(head)]
    tot = sum(num(r[all_i]) for r in body)
    print(f"{len(body)} SASS rows, {tot:.0f} samples; columns: {head[all_i]!r}, {len(reasons)} reason columns")
    top = sorted(body, key=lambda r: -num(r[all_i]))[:n]
    for r in top:
        rs = sorted(((num(r[i]), h) for h, i in reasons), reverse=True)[:3]
        why = ", ".join(f"{h.replace('stall_', '')} {v:.0f}" for v, h in rs if v > 0)
        print(f"{r[a_i]:>8} {num(r[all_i]):7.0f} {100 * num(r[all_i]) / max(tot, 1):5.1f}%  {r[s_i][:70]:70s} {why}")
    ops = Counter()
    for r in body:
        op = r[s_i].split()[0] if r[s_i].split() else "?"
        if op.startswith("@"):
            op = r[s_i].split()[1] if len(r[s_i].split()) > 1 else op
        ops[op.split(".")[0]] += num(r[all_i])
    print("\nsamples per opcode:")
    for op, v in ops.most_common(25):
        print(f"  {op:12s} {v:8.0f} {100 * v / max(tot, 1):5.1f}%")
    print("\nstretches between barriers (start address .. end, samples, share, opcodes of note):")
    seg, segs, start = 0.0, [], body[0][a_i] if body else "?"
    notes = Counter()
    for r in body:
        seg += num(r[all_i])
        op = r[s_i].split()[0] if r[s_i].split() else ""
        for key in ("MUFU", "HGMMA", "HMMA", "LDSM", "STS", "LDS", "LDGSTS", "STSM"):
            if key in r[s_i]:
                notes[key] += 1
        if any(k in r[s_i] for k in ("BAR.SYNC", "BAR.ARV", "BAR.RED", "WARPGROUP.DEPBAR")):
            segs.append((start, r[a_i], seg, dict(notes)))
            seg, start, notes = 0.0, r[a_i], Counter()
    segs.append((start, "end", seg, dict(notes)))
    for s0, s1, v, nt in segs:
        if v >= 0.005 * tot:
            print(f"  {s0:>8} .. {s1:>8} {v:8.0f} {100 * v / max(tot, 1):5.1f}%  {nt}")


if __name__ == "__main__":
    main()
