# Writes tokenizer.json, tokenizer_config.json and generation_config.json of
# this folder: a byte-level BPE with no merges (ids 0..255,
# GPT-2's byte-to-character mapping) and SmolVLM's special tokens at the ids
# the smolvlm-full golden config leaves for them (image_token_id 378).
import json, sys
out = sys.argv[1] if len(sys.argv) > 1 else "."
printable = [b for b in range(256) if ord('!') <= b <= ord('~') or 0xA1 <= b <= 0xAC or b >= 0xAE]
vocab = {}
for b in printable:
    vocab[chr(b)] = b
n = 0
for b in range(256):
    if b not in printable:
        vocab[chr(256 + n)] = b
        n += 1
specials = {"<image>": 378, "<fake_token_around_image>": 379, "<global-img>": 380,
            "<|im_start|>": 381, "<end_of_utterance>": 382, "<|endoftext|>": 383}
# The ids between the bytes and the special tokens: placeholders, so that
# every id the model can emit decodes (BPE without merges never makes them).
for i in range(256, min(specials.values())):
    vocab[f"<unused_{i - 256}>"] = i
vocab.update(specials)  # added tokens take their ids from the vocab, as in HF tokenizers
added = [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}
         for s, i in specials.items()]
tok = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
       "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
       "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
       "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
       "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None, "end_of_word_suffix": None,
                 "fuse_unk": False, "byte_fallback": False, "vocab": dict(sorted(vocab.items(), key=lambda kv: kv[1])), "merges": []}}
json.dump(tok, open(f"{out}/tokenizer.json", "w"), ensure_ascii=False, indent=1)
cfg = {"bos_token": "<|im_start|>", "eos_token": "<end_of_utterance>", "pad_token": "<|endoftext|>",
       "unk_token": "<|endoftext|>", "model_max_length": 2048, "tokenizer_class": "GPT2Tokenizer"}
json.dump(cfg, open(f"{out}/tokenizer_config.json", "w"), indent=1)
json.dump({"eos_token_id": [382], "max_new_tokens": 24}, open(f"{out}/generation_config.json", "w"), indent=1)
