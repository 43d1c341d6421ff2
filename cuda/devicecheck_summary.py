#!/usr/bin/env python3
"""Merges the device check's step records into one JSON summary.

cuda/devicerun.sh runs each step with its own timeout and appends a record
to WORK/steps.jsonl (name, kind, status, rc, seconds, log). This reads
those records and the steps' logs, and writes:

  - correctness: per step, the counts of passing, failing and skipped
    tests (`go test -test.v` lines) or golden cases (`gozoo golden` lines),
    with the names of the failures;
  - speed: gozoo's `bench --json` objects against torch_bench.py's, as a
    table of tokens/s with the ratios gozoo/torch (torch: the faster of
    eager and SDPA) and the decode bandwidth as a fraction of the card's;
  - the targets of the H100 issue and whether each holds.

Standard library only: it runs with any python3.
"""

import argparse
import json
import os
import re
import sys

# The issue's figure for an H100's read bandwidth (bytes read per second).
NOMINAL_GB_S = 3000.0

MODELS = ("qwen3-0.6b", "smollm2-135m")
# figure -> (gozoo bench key, gozoo batch, torch key)
FIGURES = {
    "decode_1seq": ("decode_tok_s", "b1", "decode_tok_s"),
    "prefill_512": ("prefill_tok_s", "b1", "prefill_tok_s"),
    "decode_64seq": ("decode_tok_s", "b64", "batch_decode_tok_s"),
}
# Targets of the H100 issue, for Qwen3-0.6B BF16: figure -> (min ratio, min tok/s).
TARGETS = {"decode_1seq": (3.0, 1000.0), "prefill_512": (1.0, 0.0), "decode_64seq": (1.5, 0.0)}

TEST_LINE = re.compile(r"^\s*--- (PASS|FAIL|SKIP): (\S+)")
GOLDEN_LINE = re.compile(r"^(PASS|FAIL) (\S+)(.*)$")


def read_text(path, limit=64 << 20):
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


def last_json(text):
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None


def count_tests(text):
    c = {"pass": 0, "fail": 0, "skip": 0, "failed": [], "skip_reasons": []}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = TEST_LINE.match(line)
        if not m:
            continue
        kind = m.group(1).lower()
        c[kind] += 1
        if kind == "fail" and len(c["failed"]) < 40:
            c["failed"].append(m.group(2))
        if kind == "skip" and len(c["skip_reasons"]) < 5 and i + 1 < len(lines):
            c["skip_reasons"].append(m.group(2) + ": " + lines[i + 1].strip()[:200])
    if "panic:" in text:
        c["panic"] = True
    if "no tests to run" in text:
        c["no_tests"] = True
    return c


def count_golden(text):
    c = {"pass": 0, "fail": 0, "failed": []}
    for line in text.splitlines():
        m = GOLDEN_LINE.match(line)
        if not m:
            continue
        kind = m.group(1).lower()
        c[kind] += 1
        if kind == "fail" and len(c["failed"]) < 40:
            c["failed"].append((m.group(2) + m.group(3))[:300])
    return c


def gist(text):
    """The lines of a failed step's log that say why: its first two and
    last three, or its lines that name an error or panic where it has any."""
    lines = [ln.rstrip() for ln in text.strip().splitlines() if ln.strip()]
    hits = [ln for ln in lines if re.search(r"(?i)error|panic|flag provided|cannot|not defined|no such", ln)]
    if hits:
        lines = hits[:3] + (["..."] + hits[-2:] if len(hits) > 5 else hits[3:5])
    elif len(lines) > 5:
        lines = lines[:2] + ["..."] + lines[-3:]
    return "\n".join(lines)[-600:]


def ratio(a, b):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b > 0:
        return round(a / b, 3)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True, help="the run's work folder (steps.jsonl, logs)")
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--meta", default="", help="file of run facts to include, KEY<tab>VALUE a line (device, commit, timings)")
    args = ap.parse_args()

    steps = []
    try:
        with open(os.path.join(args.work, "steps.jsonl")) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        steps.append(json.loads(line))
                    except ValueError:
                        pass
    except OSError:
        pass

    summary = {}
    if args.meta:
        try:
            with open(args.meta) as f:
                for line in f:
                    key, sep, value = line.rstrip("\n").partition("\t")
                    if sep and key:
                        summary[key] = value
        except OSError as e:
            summary["meta_error"] = repr(e)

    correctness, bench, torch = {}, {}, {}
    totals = {"pass": 0, "fail": 0, "skip": 0}
    golden_required = {"pass": 0, "fail": 0}
    for s in steps:
        text = read_text(s.get("log", "")) if s.get("log") else ""
        kind = s.get("kind")
        entry = {k: s.get(k) for k in ("status", "rc", "seconds")}
        if kind == "gotest":
            entry.update(count_tests(text))
        elif kind in ("golden", "golden-info"):
            entry.update(count_golden(text))
            if kind == "golden":
                for k in golden_required:
                    golden_required[k] += entry[k]
        elif kind == "bench":
            obj = last_json(text)
            if obj is not None:
                bench[s["name"]] = obj
            else:
                entry["error"] = gist(text)
        elif kind == "torch":
            obj = None
            if s.get("result"):
                try:
                    with open(s["result"]) as f:
                        obj = json.load(f)
                except (OSError, ValueError):
                    obj = None
            if obj is None:
                obj = last_json(text)
            if obj is not None:
                torch[s["name"].split(".", 1)[1]] = obj
                if obj.get("errors"):
                    entry["error"] = "; ".join(obj["errors"])[-600:]
            else:
                entry["error"] = gist(text)
        if kind in ("gotest", "golden"):
            for k in ("pass", "fail", "skip"):
                totals[k] += entry.get(k, 0)
        if kind in ("gotest", "golden", "golden-info") and s.get("status") != "ok" and entry.get("pass", 0) + entry.get("fail", 0) == 0:
            entry["error"] = gist(text)
        if kind in ("gotest", "golden", "golden-info") or s.get("status") != "ok":
            correctness[s["name"]] = entry
    summary["correctness"] = correctness
    summary["correctness_totals"] = totals
    summary["golden_required"] = golden_required
    summary["steps"] = [{k: s.get(k) for k in ("name", "kind", "status", "rc", "seconds")} for s in steps]

    copy_gb_s = None
    for t in torch.values():
        if isinstance(t.get("copy_gb_s"), (int, float)):
            copy_gb_s = t["copy_gb_s"]
    summary["copy_gb_s"] = copy_gb_s
    summary["nominal_gb_s"] = NOMINAL_GB_S

    speed, bandwidth = [], []
    for model in MODELS:
        t = torch.get(model, {})
        for fig, (gkey, gb, tkey) in FIGURES.items():
            row = {"model": model, "figure": fig}
            for w in ("bf16", "q4_k_m"):
                b = bench.get("bench.%s.%s.%s" % (model, w, gb), {})
                row["gozoo_" + w] = b.get(gkey)
            for attn in ("eager", "sdpa"):
                row["torch_" + attn] = (t.get(attn) or {}).get(tkey)
            row["torch_best"] = (t.get("best") or {}).get(tkey)
            row["ratio_bf16"] = ratio(row["gozoo_bf16"], row["torch_best"])
            row["ratio_q4_k_m"] = ratio(row["gozoo_q4_k_m"], row["torch_best"])
            speed.append(row)
        for w in ("bf16", "q4_k_m"):
            for gb in ("b1", "b64"):
                b = bench.get("bench.%s.%s.%s" % (model, w, gb))
                if not b:
                    continue
                gbs = b.get("decode_gb_s")
                row = {"model": model, "weights": w, "batch": gb, "decode_tok_s": b.get("decode_tok_s"),
                       "decode_gb_s": gbs,
                       "fraction_of_nominal": ratio(gbs, NOMINAL_GB_S),
                       "fraction_of_copy": ratio(gbs, copy_gb_s)}
                if isinstance(gbs, (int, float)) and gbs > 0 and b.get("decode_tok_s"):
                    step_gb = gbs / b["decode_tok_s"] * (64 if gb == "b64" else 1)
                    row["step_gb"] = round(step_gb, 4)
                    row["bound_tok_s_nominal"] = round(NOMINAL_GB_S / step_gb * (64 if gb == "b64" else 1), 1)
                bandwidth.append(row)
    summary["speed"] = speed
    summary["bandwidth"] = bandwidth

    targets = {}
    for row in speed:
        if row["model"] != "qwen3-0.6b" or row["figure"] not in TARGETS:
            continue
        min_ratio, min_tok = TARGETS[row["figure"]]
        ok = row["ratio_bf16"] is not None and row["ratio_bf16"] >= min_ratio and (row["gozoo_bf16"] or 0) >= min_tok
        targets[row["figure"]] = {"gozoo_bf16": row["gozoo_bf16"], "torch_best": row["torch_best"],
                                  "ratio": row["ratio_bf16"], "min_ratio": min_ratio, "min_tok_s": min_tok, "holds": ok}
    targets["golden_all_pass"] = {"pass": golden_required["pass"], "fail": golden_required["fail"],
                                  "holds": golden_required["fail"] == 0 and golden_required["pass"] > 0}
    summary["targets"] = targets
    summary["bench"] = bench
    summary["torch"] = torch

    with open(args.out, "w") as f:
        json.dump(summary, f, indent=1)

    # A short table, printed last so the device tool's output tail holds it.
    print("== device check summary (%s) ==" % summary.get("device", "?"))
    for name, e in correctness.items():
        if "pass" in e:
            extra = " failed: " + ", ".join(e.get("failed", [])[:8]) if e.get("failed") else ""
            if e.get("no_tests"):
                extra += " (no tests matched)"
            if e.get("error"):
                extra += " " + e["error"].replace("\n", " | ")[:200]
            print("%-30s %-8s pass %4d fail %3d skip %3d%s" % (name, e.get("status"), e.get("pass", 0), e.get("fail", 0), e.get("skip", 0), extra))
        else:
            print("%-30s %-8s rc=%s %s" % (name, e.get("status"), e.get("rc"), (e.get("error") or "").replace("\n", " | ")[:200]))

    def fmt(v):
        return "-" if v is None else ("%.3g" % v if isinstance(v, float) and v < 10 else "%.0f" % v if isinstance(v, (int, float)) else str(v))
    print("%-13s %-13s %9s %9s %9s %9s %7s %7s" % ("model", "figure", "gozoo", "gozoo_q4", "eager", "sdpa", "x_bf16", "x_q4"))
    for r in speed:
        print("%-13s %-13s %9s %9s %9s %9s %7s %7s" % (r["model"], r["figure"], fmt(r["gozoo_bf16"]), fmt(r["gozoo_q4_k_m"]),
              fmt(r["torch_eager"]), fmt(r["torch_sdpa"]), fmt(r["ratio_bf16"]), fmt(r["ratio_q4_k_m"])))
    for r in bandwidth:
        print("bandwidth %-13s %-6s %-3s %8s GB/s  %s of %g GB/s  %s of copy (%s GB/s)" % (
            r["model"], r["weights"], r["batch"], fmt(r["decode_gb_s"]), fmt(r["fraction_of_nominal"]), NOMINAL_GB_S,
            fmt(r["fraction_of_copy"]), fmt(copy_gb_s)))
    for k, v in targets.items():
        print("target %-16s %s %s" % (k, "HOLDS" if v["holds"] else "misses", json.dumps({a: b for a, b in v.items() if a != "holds"})))
    return 0


if __name__ == "__main__":
    sys.exit(main())
