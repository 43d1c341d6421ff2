package graphs

import "testing"

func TestChunkPlan(t *testing.T) {
	cases := []struct {
		n    int
		plan [][2]int // {take, T}
	}{
		{1, [][2]int{{1, 1}}},
		{5, [][2]int{{5, 8}}},
		{8, [][2]int{{8, 8}}},
		{18, [][2]int{{16, 16}, {2, 8}}},
		{115, [][2]int{{115, 128}}},
		{90, [][2]int{{64, 64}, {26, 32}}},
		{1200, [][2]int{{512, 512}, {512, 512}, {128, 128}, {48, 64}}},
		{1230, [][2]int{{512, 512}, {512, 512}, {206, 256}}},
	}
	for _, c := range cases {
		var got [][2]int
		for rest := c.n; rest > 0; {
			take, T := chunk(DefaultBuckets, rest)
			if take < 1 || take > T {
				t.Fatalf("n=%d: chunk (%d, %d)", c.n, take, T)
			}
			got = append(got, [2]int{take, T})
			rest -= take
		}
		if len(got) != len(c.plan) {
			t.Errorf("n=%d: plan %v, want %v", c.n, got, c.plan)
			continue
		}
		for i := range got {
			if got[i] != c.plan[i] {
				t.Errorf("n=%d: plan %v, want %v", c.n, got, c.plan)
				break
			}
		}
	}
}

// TestCacheDeclarations checks that the caches a model's layers declare
// are the record the session allocates from: by layer, a gap is a layer
// without a cache, and a layer declares one cache at most.
func TestCacheDeclarations(t *testing.T) {
	ps := NewParams()
	root := ps.Root()
	root.Sub("layers", 0).Cache(0, LayerCache{Kind: FullCache, KVHeads: 2, KeyDim: 4, ValueDim: 4})
	root.Sub("layers", 2).Cache(2, LayerCache{Kind: SlidingCache, KVHeads: 1, KeyDim: 8, ValueDim: 6, Window: 3})
	got := ps.Caches()
	if len(got) != 3 || got[0].Kind != FullCache || got[1].Kind != NoCache || got[2].Kind != SlidingCache {
		t.Fatalf("declared caches %v", got)
	}
	p, err := newKVPool(got, 4, KVF32, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if p.layerGroup[1] != -1 || p.layerGroup[0] == p.layerGroup[2] {
		t.Errorf("layer groups %v: want none for layer 1, and full and sliding apart", p.layerGroup)
	}
	full, sliding := p.groups[p.layerGroup[0]], p.groups[p.layerGroup[2]]
	if full.blockBytes != 4*2*4*(4+4) || sliding.blockBytes != 4*1*4*(8+6) || sliding.window != 3 {
		t.Errorf("block bytes %d and %d, window %d", full.blockBytes, sliding.blockBytes, sliding.window)
	}
	for name, declare := range map[string]func(){
		"twice":              func() { root.Cache(0, LayerCache{Kind: FullCache, KVHeads: 2, KeyDim: 4, ValueDim: 4}) },
		"sliding, no window": func() { root.Cache(3, LayerCache{Kind: SlidingCache, KVHeads: 1, KeyDim: 4, ValueDim: 4}) },
		"full with a window": func() { root.Cache(3, LayerCache{Kind: FullCache, KVHeads: 1, KeyDim: 4, ValueDim: 4, Window: 2}) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("declaring a cache %s did not panic", name)
				}
			}()
			declare()
		}()
	}
}
