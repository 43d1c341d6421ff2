#!/usr/bin/env python3
"""PyTorch + transformers anchor for the device check (cuda/devicerun.sh).

Loads a checkpoint folder as `gozoo random` writes it (config.json +
model.safetensors) with transformers in BF16 on CUDA, once per attention
implementation (eager, sdpa), and times:

  decode_tok_s        one sequence, greedy generate of --gen-tokens new
                      tokens after a --prompt-tokens prompt, minus the same
                      generate of one new token (the prefill), so only the
                      decode steps count: (N-1) / (t_N - t_1)
  prefill_tok_s       one forward of the --prompt-tokens prompt (logits of
                      the last row only, as generate and gozoo compute them)
  batch_decode_tok_s  --batch sequences of --batch-prompt-tokens each,
                      aggregate: batch * (M-1) / (t_M - t_1)

Warm-up first; every time is the best of a few runs, between
torch.cuda.synchronize() calls. With --copy-bw it also measures the card's
device-to-device copy bandwidth (bytes read plus written), the ceiling the
decode figures are held against.

The result is one JSON object, printed last; with --out it is also written
to that file after every stage, so a run stopped by its timeout still
leaves what it measured.
"""

import argparse
import json
import sys
import time
import traceback


def prompt_ids(seqs, n, vocab):
    # The ids `gozoo bench --batch` gives its sequences.
    return [[(i * 7919 + 13 + s * 104729) % vocab for i in range(n)] for s in range(seqs)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="checkpoint folder (config.json + safetensors)")
    ap.add_argument("--attn", default="eager,sdpa", help="attention implementations, comma-separated")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--gen-tokens", type=int, default=128)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--batch-prompt-tokens", type=int, default=128)
    ap.add_argument("--batch-gen-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2, help="timed runs of each generate (best kept)")
    ap.add_argument("--copy-bw", action="store_true", help="also measure device-to-device copy bandwidth")
    ap.add_argument("--budget-s", type=float, default=0, help="skip later stages once this many seconds have passed (0: no limit)")
    ap.add_argument("--out", default="", help="also write the JSON object here after every stage")
    args = ap.parse_args()

    t_start = time.perf_counter()
    res = {"model": args.model, "errors": [], "settings": {
        "dtype": "bfloat16",
        "prompt_tokens": args.prompt_tokens, "gen_tokens": args.gen_tokens,
        "batch": args.batch, "batch_prompt_tokens": args.batch_prompt_tokens,
        "batch_gen_tokens": args.batch_gen_tokens, "repeats": args.repeats,
        "prefill": "forward with logits_to_keep=1, use_cache=True",
        "decode": "generate do_sample=False min_new_tokens=max_new_tokens; (N-1)/(t_N - t_1)",
    }}

    def save():
        res["elapsed_s"] = round(time.perf_counter() - t_start, 2)
        if args.out:
            with open(args.out, "w") as f:
                json.dump(res, f, indent=1)

    def over_budget():
        return args.budget_s > 0 and time.perf_counter() - t_start > args.budget_s

    try:
        import torch
        import transformers
        from transformers import AutoConfig, AutoModelForCausalLM
    except Exception as e:  # noqa: BLE001
        res["errors"].append("import: %r" % (e,))
        save()
        print(json.dumps(res))
        return 1

    res["torch"] = torch.__version__
    res["transformers"] = transformers.__version__
    if not torch.cuda.is_available():
        res["errors"].append("torch.cuda.is_available() is False")
        save()
        print(json.dumps(res))
        return 1
    props = torch.cuda.get_device_properties(0)
    res["device"] = torch.cuda.get_device_name(0)
    res["multiprocessors"] = props.multi_processor_count
    res["device_memory_gib"] = round(props.total_memory / 2**30, 1)
    dev = torch.device("cuda")

    def sync():
        torch.cuda.synchronize()

    def best_of(fn, reps):
        best = float("inf")
        for _ in range(max(1, reps)):
            sync()
            t0 = time.perf_counter()
            fn()
            sync()
            best = min(best, time.perf_counter() - t0)
        return best

    if args.copy_bw:
        try:
            n = 1 << 30
            x = torch.randint(0, 256, (n,), dtype=torch.uint8, device=dev)
            y = torch.empty_like(x)
            for _ in range(3):
                y.copy_(x)
            reps = 10
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            sync()
            start.record()
            for _ in range(reps):
                y.copy_(x)
            end.record()
            sync()
            s = start.elapsed_time(end) / 1e3
            res["copy_gb_s"] = round(2 * n * reps / s / 1e9, 1)
            del x, y
            torch.cuda.empty_cache()
        except Exception as e:  # noqa: BLE001
            res["errors"].append("copy bandwidth: %r" % (e,))
        save()

    cfg = AutoConfig.from_pretrained(args.model)
    vocab = cfg.vocab_size
    pad = cfg.eos_token_id
    if isinstance(pad, list):
        pad = pad[0]
    if pad is None:
        pad = 0

    major = int(transformers.__version__.split(".")[0])
    dtype_kw = {"dtype": torch.bfloat16} if major >= 5 else {"torch_dtype": torch.bfloat16}

    for attn in [a for a in args.attn.split(",") if a]:
        if over_budget():
            res["errors"].append("%s: skipped, over the %.0f s budget" % (attn, args.budget_s))
            break
        r = res.setdefault(attn, {})
        model = None
        try:
            t0 = time.perf_counter()
            model = AutoModelForCausalLM.from_pretrained(args.model, attn_implementation=attn, **dtype_kw)
            model.to(dev).eval()
            sync()
            r["load_s"] = round(time.perf_counter() - t0, 2)
            r["weight_bytes"] = sum(p.numel() * p.element_size() for p in model.parameters())

            def gen(ids, new):
                out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                     max_new_tokens=new, min_new_tokens=new, pad_token_id=pad)
                if out.shape[1] != ids.shape[1] + new:
                    raise RuntimeError("generate gave %d tokens, want %d" % (out.shape[1] - ids.shape[1], new))
                return out

            with torch.inference_mode():
                one = torch.tensor(prompt_ids(1, args.prompt_tokens, vocab), device=dev)

                # Prefill: a forward of the prompt.
                def fwd():
                    try:
                        return model(input_ids=one, use_cache=True, logits_to_keep=1)
                    except TypeError:
                        return model(input_ids=one, use_cache=True)

                for _ in range(2):
                    fwd()
                t = best_of(fwd, 5)
                r["prefill_s"] = round(t, 5)
                r["prefill_tok_s"] = round(args.prompt_tokens / t, 1)
                save()

                # One sequence's decode.
                gen(one, 4)
                t1 = best_of(lambda: gen(one, 1), 3)
                tn = best_of(lambda: gen(one, args.gen_tokens), args.repeats)
                r["generate_1_s"], r["generate_n_s"] = round(t1, 4), round(tn, 4)
                if tn > t1:
                    r["decode_tok_s"] = round((args.gen_tokens - 1) / (tn - t1), 1)
                r["generate_tok_s"] = round(args.gen_tokens / tn, 1)
                save()

                # Batched decode.
                if args.batch > 1 and not over_budget():
                    many = torch.tensor(prompt_ids(args.batch, args.batch_prompt_tokens, vocab), device=dev)
                    gen(many, 2)
                    t1 = best_of(lambda: gen(many, 1), args.repeats)
                    tm = best_of(lambda: gen(many, args.batch_gen_tokens), args.repeats)
                    r["batch_generate_1_s"], r["batch_generate_n_s"] = round(t1, 4), round(tm, 4)
                    if tm > t1:
                        r["batch_decode_tok_s"] = round(args.batch * (args.batch_gen_tokens - 1) / (tm - t1), 1)
                    r["peak_mem_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
                    save()
        except Exception as e:  # noqa: BLE001
            res["errors"].append("%s: %s" % (attn, "".join(traceback.format_exception_only(type(e), e)).strip()))
            traceback.print_exc()
        finally:
            del model
            torch.cuda.empty_cache()
            save()

    # The faster of eager and SDPA, per figure.
    best = {}
    for key in ("prefill_tok_s", "decode_tok_s", "batch_decode_tok_s"):
        vals = [(res[a][key], a) for a in args.attn.split(",") if isinstance(res.get(a), dict) and key in res[a]]
        if vals:
            v, a = max(vals)
            best[key] = v
            best[key.replace("_tok_s", "_attn")] = a
    res["best"] = best
    save()
    print(json.dumps(res))
    return 0 if not res["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
