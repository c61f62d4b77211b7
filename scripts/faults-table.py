#!/usr/bin/env python3
"""Tables for docs/safety.md from fault-run directories (scripts/faults.sh --out DIR).

    scripts/faults-table.py DIR [DIR ...]

Per directory (one nemesis family per directory, each with run-N/report.json): runs, seconds,
client ops ok/fail/info, faults injected, anomalies by kind, the longest unavailability per run
(median and max); then, per fault variant over every directory, how often it struck and the
median and max longest time without an acknowledged write while it lasted.
"""
import glob
import json
import os
import statistics
import sys
from collections import defaultdict


def load(d):
    reps = []
    for p in sorted(glob.glob(os.path.join(d, "run-*", "report.json"))):
        with open(p) as f:
            reps.append(json.load(f))
    return reps


def main(dirs):
    print("| nemeses | runs | seconds | ops ok / fail / info | faults | safety anomalies | longest unavailable per run: median / max |")
    print("|---|---|---|---|---|---|---|")
    per_variant = defaultdict(list)
    for d in dirs:
        reps = load(d)
        if not reps:
            continue
        secs = sum(r["duration_ns"] for r in reps) / 1e9
        ok = sum(r["total"]["ok"] for r in reps)
        fail = sum(r["total"]["fail"] for r in reps)
        info = sum(r["total"]["info"] for r in reps)
        faults = sum(len(r.get("faults") or []) for r in reps)
        anomalies = defaultdict(int)
        invalid = 0
        for r in reps:
            if not r.get("valid"):
                invalid += 1
            for a in (r.get("verdict") or {}).get("anomalies", []):
                if a.get("safety") and a.get("count"):
                    anomalies[a["kind"]] += a["count"]
            windows = {w["index"]: w for w in (r.get("verdict") or {}).get("faults", [])}
            byvalue = {w["value"]: w for w in windows.values()}
            for f in r.get("faults") or []:
                w = byvalue.get(f["value"])
                if w is not None and not f.get("error"):
                    per_variant[(f["family"], f["variant"])].append(w["longest_unavailable_s"])
        longest = [r["max_unavailable_ns"] / 1e9 for r in reps]
        an = ", ".join(f"{k} {v}" for k, v in sorted(anomalies.items())) or "0"
        if invalid:
            an += f" ({invalid} runs invalid)"
        nem = ",".join(reps[0].get("nemeses") or [])
        print(f"| {nem} | {len(reps)} | {secs:.0f} | {ok} / {fail} / {info} | {faults} | {an} | "
              f"{statistics.median(longest):.1f} s / {max(longest):.1f} s |")
    print()
    print("| fault | struck | longest unavailable while it lasted: median / max |")
    print("|---|---|---|")
    for (fam, var), xs in sorted(per_variant.items()):
        print(f"| {fam} / {var} | {len(xs)} | {statistics.median(xs):.1f} s / {max(xs):.1f} s |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
