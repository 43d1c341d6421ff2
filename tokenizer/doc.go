// Package tokenizer implements Hugging Face tokenizer.json tokenizers in
// pure Go, id for id with Hugging Face's Rust tokenizers library.
//
// Encoding runs the pipeline of the file:
//
//  1. Added tokens with normalized=false (special tokens such as
//     <|im_start|>) are found in the raw text, longest match first, with
//     their lstrip/rstrip/single_word rules; they become ids directly.
//  2. Each text segment between them is normalized (NFC, Replace,
//     Prepend, Strip, ...), then added tokens with normalized=true are
//     found in the normalized text.
//  3. The pre-tokenizer cuts the rest into words: Split with the file's
//     regex, ByteLevel (GPT-2 bytes to printable runes, optionally with the
//     GPT-2 regex), Digits, Metaspace. The regexes of Qwen2/3, Llama-3 and
//     GPT-2 run on hand-written scanners; any other regex runs on
//     github.com/dlclark/regexp2, since Go's regexp has no lookahead.
//  4. The BPE model merges each word by merge rank with a priority queue
//     (byte fallback, unknown token, ignore_merges, both merge formats),
//     with a bounded cache of recent words.
//  5. With addSpecial, the post-processor (TemplateProcessing, ...) adds
//     tokens such as <bos>.
//
// Decoding maps ids to tokens and runs the decoder chain (ByteLevel,
// ByteFallback, Fuse, Strip, Replace, Metaspace). StreamDecoder decodes
// incrementally for streaming generation and never emits half a UTF-8
// character.
//
// Unknown or unsupported component types are load errors that name them,
// e.g. `tokenizer.json: pre_tokenizer: unknown type "Foo"`. The file's
// truncation and padding settings are ignored, as transformers does for a
// plain encode; BPE dropout is ignored (encoding is deterministic).
//
// # Hostile files
//
// A tokenizer file is input like any other. Loading allocates by what the
// file holds, not by the numbers it states (vocabulary ids may leave holes
// up to four times the number of entries, added tokens take the ids the
// Rust library gives them), nesting deeper than 128 levels is refused as
// by serde_json, and the ids a post-processor adds must be tokens; a
// malformed file is an error naming it, never a panic.
//
// The file's own regexes (Split, Replace) run on regexp2, a backtracking
// engine, so each Encode or Decode gives them a time budget:
// DefaultRegexTimeout (see SetRegexTimeout) for up to 100 KB of text, as
// much again per further 100 KB. A pattern that backtracks
// catastrophically, such as `(a+)+$`, makes Encode return a *RegexError
// (matching ErrRegexTimeout) that names the file and the pattern, e.g.
//
//	tokenizer: encode: m/tokenizer.json: pre_tokenizer: Split: regex "(a+)+$": match ran past its time budget of 1s
//
// Good patterns run some sixty times faster than the budget requires. A
// chain of normalizers or decoders may not grow the text past 32 times
// its length plus 1 MiB either. Replace's content is literal, as in the
// Rust library.
//
// # The Rust backend
//
// Built with the tag hftokenizers, the package also provides HFTokenizer,
// which wraps Hugging Face's Rust library through cgo
// (github.com/daulet/tokenizers v1.24.0) behind the same Backend
// interface. It needs that release's static library libtokenizers.a
// (from https://github.com/daulet/tokenizers/releases, or built with
// cargo from its sources) and a C toolchain:
//
//	CGO_ENABLED=1 CGO_LDFLAGS="-L/path/to/dir/with/libtokenizers.a" \
//		go build -tags hftokenizers ./...
//
// The default build needs neither and does not include it.
//
// # GGUF
//
// FromGGUFMetadata builds the same Tokenizer from the tokenizer.ggml.*
// metadata of a GGUF file (byte-level BPE, tokenizer.ggml.model "gpt2"),
// with llama.cpp's semantics: no normalizer, the pre-tokenizer named by
// tokenizer.ggml.pre, control and user-defined tokens matched longest
// first, BOS/EOS per add_bos_token/add_eos_token. GGUFMetadata goes the
// other way, from a tokenizer.json to the metadata llama.cpp's converter
// writes (gozoo quantize).
//
// # Training
//
// TrainBPE learns a byte-level BPE tokenizer from texts, GPT-2's recipe
// (its pre-tokenizer and byte alphabet), and returns its tokenizer.json;
// gozoo train-tokenizer is its command.
package tokenizer
