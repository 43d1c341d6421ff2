package main

import (
	"flag"
	"fmt"

	"github.com/gozoo/gozoo/graphs"
)

// kvCacheFlags are --kv-cache TYPE and its older alias --kv-f16.
type kvCacheFlags struct {
	name    string
	f16     *bool
	fastF16 bool // with --fast and no --kv-cache, F16
}

// kvCacheFlag declares --kv-cache on fs; f16 is the command's --kv-f16
// (nil where it has none). Unset, the cache is F32, or with fastF16 F16
// under --fast: fast mode takes llama.cpp's default as it takes its
// arithmetic (golden keeps F32, its references' cache).
func kvCacheFlag(fs *flag.FlagSet, f16 *bool, fastF16 bool) *kvCacheFlags {
	k := &kvCacheFlags{f16: f16, fastF16: fastF16}
	def := "f32"
	if fastF16 {
		def = "f32, or f16 with --fast as llama.cpp's default"
	}
	fs.StringVar(&k.name, "kv-cache", "", "store the KV cache as `TYPE`: f32, f16 (as --kv-f16), or llama.cpp's q8_0 or q4_0 blocks (CPU only; attention then computes as llama.cpp's flash attention on that cache); default "+def)
	return k
}

// kvUsage is the usage text of the flags.
const kvUsage = "[--kv-cache f32|f16|q8_0|q4_0]"

// typ is the cache type asked for (fast: under --fast); --kv-f16 with
// another --kv-cache is an error naming both.
func (k *kvCacheFlags) typ(fast bool) (graphs.KVCacheType, error) {
	name := k.name
	if name == "" {
		name = "f32"
		if fast && k.fastF16 {
			name = "f16"
		}
	}
	t, err := graphs.ParseKVCacheType(name)
	if err != nil {
		return 0, fmt.Errorf("--kv-cache: %w", err)
	}
	if k.f16 != nil && *k.f16 {
		if t != graphs.KVF32 && t != graphs.KVF16 {
			return 0, fmt.Errorf("--kv-f16 asks for an f16 KV cache and --kv-cache for %s", t)
		}
		t = graphs.KVF16
	}
	return t, nil
}
