package layers

import (
	"fmt"
	"unsafe"

	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/cuda"
	"github.com/gozoo/gozoo/ops"
)

// Attention on CUDA (cuda/kernels/attention.cu). A cached attention's
// launches are fixed by the program's shapes; every row's position and
// block table come from the layer's DeviceKV, so a captured step replays:
//
//   - kv_store writes the rows' keys and values into their blocks;
//   - attn_rows attends a row's query heads of one kv head, over a split
//     of its keys when few rows leave the card idle (a decode);
//   - attn_tile attends 32 rows of one query head at once when they are of
//     one sequence (a prefill), each key chunk loaded once for them all;
//     attn_rows leaves those rows to it (both decide from the rows table);
//   - attn_combine merges attn_rows's splits;
//   - with a sink, attn_probs turns the scores the kernels stored into
//     probabilities, and a host step takes them down to the sink.

// Sizes shared with attention.cu.
const (
	attnThreads  = 128 // NT
	cudaTileRows = 32  // TQ: rows of an attn_tile block
	attnTileMin  = 4   // TILE_MIN: fewer rows than this are never a tile
	attnRowChunk = 32  // keys attn_rows takes at once
	attnMaxHead  = 256 // MAXD: the widest head
	// attnMaxShared is the most shared memory a block may take on the
	// smallest card gozoo targets (an A100: 163 KiB).
	attnMaxShared = 163 << 10
	// maxGridY is the most blocks a grid has along y or z.
	maxGridY = 65535
)

// Splitting attn_rows over keys: when its (row, kv head) blocks are fewer
// than attnSplitBlocks (about 8 an SM of an H100, for a kernel that waits
// on memory), each row's keys are split to make about that many, no split
// planned for fewer than attnSplitKeys of a sequence's capacity. A split
// past a row's keys ends at once; attn_combine reads S partial rows a
// head, a few hundred KiB at most.
const (
	attnSplitBlocks = 1024
	attnSplitKeys   = 128
	attnMaxSplits   = 128
)

// attnSplits is the number of key splits of attn_rows's grid, fixed by the
// program's shapes and the pool's capacity.
func attnSplits(T, Hkv, capacity int) int {
	blocks := T * Hkv
	if blocks >= attnSplitBlocks || capacity <= attnSplitKeys {
		return 1
	}
	return max(1, min(cuda.Blocks(attnSplitBlocks, blocks), cuda.Blocks(capacity, attnSplitKeys), attnMaxSplits))
}

// tileChunk is the keys a tile kernel loads at once for heads of dk and
// dv, and its dynamic shared memory (tile_attend's).
func tileChunk(dk, dv int) (chunk, shared int) {
	chunk = 64
	if dk > 128 || dv > 128 {
		chunk = 32
	}
	return chunk, 4 * (cudaTileRows*dk + chunk*(dk+1) + chunk*dv + cudaTileRows*chunk)
}

// attnInputs checks that in are float32 tensors of the shapes that give
// out's shape under shape, but for those listed in ints (int32).
func attnInputs(out cuda.Tensor, in []cuda.Tensor, n int, shape func([]tensor.Shape) (tensor.Shape, error), ints ...int) error {
	if len(in) != n {
		return fmt.Errorf("%d inputs, want %d", len(in), n)
	}
	shapes := make([]tensor.Shape, n)
	for i, x := range in {
		shapes[i] = tensor.Shape(x.Shape)
		want := cuda.F32
		for _, j := range ints {
			if i == j {
				want = cuda.I32
			}
		}
		if x.Type != want {
			return fmt.Errorf("input %d is %s, want %s", i, x.Type, want)
		}
	}
	s, err := shape(shapes)
	if err != nil {
		return err
	}
	if out.Type != cuda.F32 || !s.Eq(tensor.Shape(out.Shape)) {
		return fmt.Errorf("output %s %v, want f32 %v", out.Type, out.Shape, s)
	}
	return nil
}

// CUDA returns cachedAttention's launches (see above). The positions input
// is not read: the rows' positions are DeviceKV.Rows's.
func (k cachedAttention) CUDA(ws cuda.Workspace, out cuda.Tensor, in []cuda.Tensor) ([]cuda.Call, error) {
	if err := attnInputs(out, in, 4, k.Shape, 3); err != nil {
		return nil, err
	}
	kv, err := k.kv.Device()
	if err != nil {
		return nil, err
	}
	T, Hq, Dk := in[0].Shape[0], in[0].Shape[1], in[0].Shape[2]
	Hkv, Dv := in[1].Shape[1], in[2].Shape[2]
	switch {
	case T == 0 || T > maxGridY:
		return nil, fmt.Errorf("%d rows: the kernels take 1 to %d", T, maxGridY)
	case Dk > attnMaxHead || Dv > attnMaxHead:
		return nil, fmt.Errorf("heads of %d and %d: the kernels take at most %d", Dk, Dv, attnMaxHead)
	case kv.BlockTokens <= 0 || kv.SlabBlocks <= 0:
		return nil, fmt.Errorf("a device pool of %d-position blocks in slabs of %d", kv.BlockTokens, kv.SlabBlocks)
	case k.sink != nil && kv.Capacity <= 0:
		return nil, fmt.Errorf("captured probabilities need the pool's capacity, got %d", kv.Capacity)
	}
	f16 := 0
	if kv.F16 {
		f16 = 1
	}
	B, SB, capacity, G := kv.BlockTokens, kv.SlabBlocks, kv.Capacity, Hq/Hkv
	calls := []cuda.Call{{
		K: cuda.KVStore, Grid: cuda.Dim3{X: Hkv, Y: T, Z: 1}, Block: cuda.D1(attnThreads),
		Args: []any{kv.KSlabs, kv.VSlabs, kv.Rows, kv.Blocks, in[1].Ptr, in[2].Ptr, Hkv, Dk, Dv, B, SB, f16},
	}}

	var probs, stats, partO, partML cuda.Ptr
	if k.sink != nil {
		if probs, err = ws.Scratch(1, 4*T*Hq*capacity); err != nil {
			return nil, err
		}
		if stats, err = ws.Scratch(2, 16*T*Hq); err != nil {
			return nil, err
		}
	}
	S := attnSplits(T, Hkv, capacity)
	if S > 1 {
		// part_ml [T, Hq, S, 2] doubles, then part_o [T, Hq, S, Dv].
		buf, err := ws.Scratch(0, T*Hq*S*(16+4*Dv))
		if err != nil {
			return nil, err
		}
		partML, partO = buf, buf.Add(16*T*Hq*S)
	}
	tiled := 0
	if T >= attnTileMin {
		tiled = 1
	}
	KC := attnRowChunk
	rowShared := 8*G + 4*(2*G+G*Dk+G*KC+G*Dv+KC*Dk+KC*Dv)
	if rowShared > attnMaxShared {
		return nil, fmt.Errorf("%d query heads a kv head of %d and %d take %d bytes of shared memory, more than %d", G, Dk, Dv, rowShared, attnMaxShared)
	}
	calls = append(calls, cuda.Call{
		K: cuda.AttnRows, Grid: cuda.Dim3{X: Hkv, Y: T, Z: S}, Block: cuda.D1(attnThreads), Shared: rowShared,
		Args: []any{out.Ptr, in[0].Ptr, kv.KSlabs, kv.VSlabs, kv.Rows, kv.Blocks, probs, stats, partO, partML,
			T, Hq, Hkv, Dk, Dv, B, SB, f16, k.window, capacity, S, KC, tiled, k.scale},
	})
	if tiled == 1 {
		chunk, shared := tileChunk(Dk, Dv)
		calls = append(calls, cuda.Call{
			K: cuda.AttnTile, Grid: cuda.Dim3{X: Hq, Y: cuda.Blocks(T, cudaTileRows), Z: 1}, Block: cuda.D1(attnThreads), Shared: shared,
			Args: []any{out.Ptr, in[0].Ptr, kv.KSlabs, kv.VSlabs, kv.Rows, kv.Blocks, probs, stats,
				T, Hq, Hkv, Dk, Dv, B, SB, f16, k.window, capacity, chunk, k.scale},
		})
	}
	if S > 1 {
		calls = append(calls, cuda.Call{
			K: cuda.AttnCombine, Grid: cuda.Dim3{X: Hq, Y: T, Z: 1}, Block: cuda.D1(attnThreads),
			Args: []any{out.Ptr, partO, partML, stats, kv.Rows, T, Hq, Dv, S, tiled},
		})
	}
	if k.sink == nil {
		return calls, nil
	}
	calls = append(calls, cuda.Call{
		K: cuda.AttnProbs, Grid: cuda.Dim3{X: cuda.Blocks(capacity, 256), Y: Hq, Z: T}, Block: cuda.D1(256),
		Args: []any{probs, stats, kv.Rows, Hq, capacity, k.window},
	}, cuda.Call{After: k.downloadProbs(probs, T, Hq, capacity)})
	return calls, nil
}

// downloadProbs is the host step that stores the probabilities attn_probs
// left at probs [T, Hq, capacity] in the sink as the CPU kernel does:
// [T, Hq, keys], keys the longest sequence after the forward (known on the
// host once the step is planned).
func (k cachedAttention) downloadProbs(probs cuda.Ptr, T, Hq, capacity int) func(cuda.Downloader) error {
	var host []float32
	return func(d cuda.Downloader) error {
		keys := k.kv.Keys()
		for _, r := range k.kv.Runs() {
			keys = max(keys, r.Pos+r.Len)
		}
		if keys > capacity {
			return fmt.Errorf("probabilities over %d keys: the device holds %d", keys, capacity)
		}
		rows := T * Hq
		p := make([]float32, rows*keys)
		switch {
		case keys == capacity:
			if err := d.Download(unsafe.Pointer(unsafe.SliceData(p)), probs, 4*len(p)); err != nil {
				return err
			}
		case keys > 0:
			// Down to the last row's last key, then each row's first keys.
			n := (rows-1)*capacity + keys
			host = grow(host, n)
			if err := d.Download(unsafe.Pointer(unsafe.SliceData(host)), probs, 4*n); err != nil {
				return err
			}
			for i := range rows {
				copy(p[i*keys:(i+1)*keys], host[i*capacity:])
			}
		}
		k.sink.StoreKeyed(ops.NewF32(p, T, Hq, keys))
		return nil
	}
}

// CUDA returns blockAttention's launch: block_attn, a block per (head,
// tile of 32 rows, image), each key chunk loaded once for the tile.
func (k blockAttention) CUDA(ws cuda.Workspace, out cuda.Tensor, in []cuda.Tensor) ([]cuda.Call, error) {
	if err := attnInputs(out, in, 3, k.Shape); err != nil {
		return nil, err
	}
	R, H, Dh := in[0].Shape[0], in[0].Shape[1], in[0].Shape[2]
	switch {
	case R == 0 || R/k.block > maxGridY:
		return nil, fmt.Errorf("%d rows in blocks of %d: the kernel takes 1 to %d blocks", R, k.block, maxGridY)
	case Dh > attnMaxHead:
		return nil, fmt.Errorf("heads of %d: the kernel takes at most %d", Dh, attnMaxHead)
	}
	chunk, shared := tileChunk(Dh, Dh)
	return []cuda.Call{{
		K: cuda.BlockAttn, Grid: cuda.Dim3{X: H, Y: cuda.Blocks(k.block, cudaTileRows), Z: R / k.block}, Block: cuda.D1(attnThreads), Shared: shared,
		Args: []any{out.Ptr, in[0].Ptr, in[1].Ptr, in[2].Ptr, k.block, H, Dh, chunk, k.scale},
	}}, nil
}
