package main

import (
	"flag"
	"fmt"

	"github.com/gozoo/gozoo/graphs"
)

// kvCacheFlags are --kv-cache TYPE and its older alias --kv-f16.
type kvCacheFlags struct {
	name string
	f16  *bool
}

// kvCacheFlag declares --kv-cache on fs; f16 is the command's --kv-f16
// (nil where it has none).
func kvCacheFlag(fs *flag.FlagSet, f16 *bool) *kvCacheFlags {
	k := &kvCacheFlags{f16: f16}
	fs.StringVar(&k.name, "kv-cache", "f32", "store the KV cache as `TYPE`: f32, f16 (as --kv-f16), or llama.cpp's q8_0 or q4_0 blocks (CPU only; attention then computes as llama.cpp's flash attention on that cache)")
	return k
}

// kvUsage is the usage text of the flags.
const kvUsage = "[--kv-cache f32|f16|q8_0|q4_0]"

// typ is the cache type asked for; --kv-f16 with another --kv-cache is an
// error naming both.
func (k *kvCacheFlags) typ() (graphs.KVCacheType, error) {
	t, err := graphs.ParseKVCacheType(k.name)
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
