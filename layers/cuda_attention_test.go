package layers

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"

	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/cuda"
	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/cudatest"
	"github.com/gozoo/gozoo/ops"
)

// cudaAttnShape is a model's attention heads.
type cudaAttnShape struct {
	name         string
	hq, hkv, dh  int
	scale        float32
	windowBlocks int
}

var cudaAttnShapes = []cudaAttnShape{
	{name: "qwen3-0.6b", hq: 16, hkv: 8, dh: 128, scale: 1 / float32(math.Sqrt(128))},
	{name: "smollm2-135m", hq: 9, hkv: 3, dh: 64, scale: 0.125},
}

// cudaAttnForward is one forward's sequences: each {pos, n} runs n rows
// from position pos, after pos positions already in the pool.
type cudaAttnForward struct {
	name string
	T    int
	seqs [][2]int
}

var cudaAttnForwards = []cudaAttnForward{
	{"decode", 1, [][2]int{{300, 1}}},
	{"decode at 0", 1, [][2]int{{0, 1}}},
	{"prefill", 7, [][2]int{{0, 7}}},
	{"chunk after a prefix", 7, [][2]int{{40, 7}}},
	{"decodes and a chunk", 7, [][2]int{{100, 1}, {20, 5}, {3, 1}}},
	{"padded long prefill", 70, [][2]int{{50, 67}}},
}

const (
	cudaAttnBlock    = 16   // positions a block
	cudaAttnCapacity = 2048 // positions a sequence may hold
	cudaAttnWindow   = 24
)

// cudaAttnCase is a cached attention forward with its inputs: a fixture
// whose sequences hold their earlier keys and values (when filled), the
// op's inputs and a kernel over the fixture (sink set when captured).
type cudaAttnCase struct {
	f      *graphs.KVFixture
	in     []G.Value
	kernel cachedAttention
	T, hq  int
}

func newCUDAAttnCase(t testing.TB, s cudaAttnShape, fw cudaAttnForward, window int, f16, sink, fill bool) *cudaAttnCase {
	r := rand.New(rand.NewPCG(uint64(s.hq), uint64(fw.T*1000+window)))
	f := attnFixture(t, s.hkv, s.dh, window, cudaAttnBlock, f16)
	positions := make([]int, fw.T)
	for i := range positions {
		positions[i] = -1
	}
	var runs []graphs.FixtureRun
	row := 0
	for i, sq := range fw.seqs {
		if fill {
			for p := 0; p < sq[0]; p++ {
				for g := 0; g < s.hkv; g++ {
					if err := f.Store(i, p, g, randVals(r, s.dh, 1), randVals(r, s.dh, 1)); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		for j := 0; j < sq[1]; j++ {
			positions[row+j] = sq[0] + j
		}
		runs = append(runs, graphs.FixtureRun{Seq: i, Row: row, Len: sq[1], Pos: sq[0]})
		row += sq[1]
	}
	if err := f.Plan(runs...); err != nil {
		t.Fatal(err)
	}
	c := &cudaAttnCase{f: f, T: fw.T, hq: s.hq, in: []G.Value{
		ops.NewF32(randVals(r, fw.T*s.hq*s.dh, 1), fw.T, s.hq, s.dh),
		ops.NewF32(randVals(r, fw.T*s.hkv*s.dh, 1), fw.T, s.hkv, s.dh),
		ops.NewF32(randVals(r, fw.T*s.hkv*s.dh, 1), fw.T, s.hkv, s.dh),
		tensor.New(tensor.WithShape(fw.T), tensor.WithBacking(positions)),
	}}
	c.kernel = cachedAttention{name: "layers.0", scale: s.scale, window: window, kv: f.KV}
	if sink {
		c.kernel.sink = &graphs.Sink{}
	}
	return c
}

// eachCUDAAttnCase runs fn over every shape, forward, window, cache type
// and capture.
func eachCUDAAttnCase(t *testing.T, fn func(t *testing.T, s cudaAttnShape, fw cudaAttnForward, window int, f16, sink bool)) {
	for _, s := range cudaAttnShapes {
		for _, fw := range cudaAttnForwards {
			for _, window := range []int{0, cudaAttnWindow} {
				for _, f16 := range []bool{false, true} {
					for _, sink := range []bool{false, true} {
						name := fmt.Sprintf("%s/%s/window=%d/f16=%v/sink=%v", s.name, fw.name, window, f16, sink)
						t.Run(name, func(t *testing.T) { fn(t, s, fw, window, f16, sink) })
					}
				}
			}
		}
	}
}

// fakeDownloads fills what is downloaded with each element's index in the
// buffer at base.
type fakeDownloads struct{ base cuda.Ptr }

func (f fakeDownloads) Download(dst unsafe.Pointer, src cuda.Ptr, n int) error {
	out := unsafe.Slice((*float32)(dst), n/4)
	off := int(src-f.base) / 4
	for i := range out {
		out[i] = float32(off + i)
	}
	return nil
}

// TestAttentionCUDACalls checks cached attention's launches on the host:
// every call against its kernel's declaration, the kernels a forward
// takes (tiles from attnTileMin rows, a combine when keys are split, the
// probabilities and their host step when captured), their shared memory,
// and the host step's cut of the probabilities to the forward's keys.
func TestAttentionCUDACalls(t *testing.T) {
	eachCUDAAttnCase(t, func(t *testing.T, s cudaAttnShape, fw cudaAttnForward, window int, f16, sink bool) {
		c := newCUDAAttnCase(t, s, fw, window, f16, sink, false)
		graphs.FakeDeviceKV(c.f.KV, &graphs.DeviceKV{KSlabs: 0x1000, VSlabs: 0x2000, Rows: 0x3000, Blocks: 0x4000,
			BlockTokens: cudaAttnBlock, SlabBlocks: 16, F16: f16, Capacity: cudaAttnCapacity})
		calls, err := cudatest.Check(c.kernel, c.in...)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		var after func(cuda.Downloader) error
		var probs cuda.Ptr
		for _, call := range calls {
			if call.K == nil {
				names = append(names, "after")
				after = call.After
				continue
			}
			names = append(names, call.K.Name)
			if call.Shared > attnMaxShared {
				t.Errorf("%s takes %d bytes of shared memory", call.K.Name, call.Shared)
			}
			if call.K == cuda.AttnProbs {
				probs = call.Args[0].(cuda.Ptr)
			}
		}
		want := []string{"kv_store", "attn_rows"}
		if fw.T >= attnTileMin {
			want = append(want, "attn_tile")
		}
		if attnSplits(fw.T, s.hkv, cudaAttnCapacity) > 1 {
			want = append(want, "attn_combine")
		}
		if sink {
			want = append(want, "attn_probs", "after")
		}
		if !slices.Equal(names, want) {
			t.Fatalf("calls %v, want %v", names, want)
		}
		if !sink {
			return
		}
		if err := after(fakeDownloads{base: probs}); err != nil {
			t.Fatal(err)
		}
		p := graphs.SinkValue(c.kernel.sink)
		keys := c.f.KV.Keys()
		if !p.Shape().Eq(tensor.Shape{fw.T, s.hq, keys}) {
			t.Fatalf("probabilities %v, want [%d %d %d]", p.Shape(), fw.T, s.hq, keys)
		}
		for i, x := range p.Float32s() {
			if want := float32(i/keys*cudaAttnCapacity + i%keys); x != want {
				t.Fatalf("probability %d came from element %g, want %g", i, x, want)
			}
		}
	})
}

// TestAttentionCUDASplits: a decode is split over keys to fill the card,
// a prefill is not.
func TestAttentionCUDASplits(t *testing.T) {
	for _, c := range []struct{ T, hkv, capacity, want int }{
		{1, 8, 4096, 32},
		{1, 8, 32768, 128},
		{1, 1, 1 << 20, attnMaxSplits},
		{7, 3, 2048, 16},
		{7, 8, 2048, 16},
		{7, 8, 32768, 19},
		{1, 8, 128, 1},
		{128, 8, 4096, 1},
		{512, 8, 4096, 1},
	} {
		if got := attnSplits(c.T, c.hkv, c.capacity); got != c.want {
			t.Errorf("attnSplits(%d, %d, %d) = %d, want %d", c.T, c.hkv, c.capacity, got, c.want)
		}
	}
}

// TestAttentionCUDAErrors: shapes that do not fit, a pool in host memory
// and heads wider than the kernels take are errors, not launches.
func TestAttentionCUDAErrors(t *testing.T) {
	s := cudaAttnShapes[0]
	c := newCUDAAttnCase(t, s, cudaAttnForwards[2], 0, false, false, false)
	if _, err := cudatest.Check(c.kernel, c.in...); !errors.Is(err, graphs.ErrHostKV) {
		t.Errorf("a host pool gave %v", err)
	}
	graphs.FakeDeviceKV(c.f.KV, &graphs.DeviceKV{KSlabs: 1, VSlabs: 2, Rows: 3, Blocks: 4, BlockTokens: cudaAttnBlock, SlabBlocks: 16, Capacity: cudaAttnCapacity})
	out := cuda.Tensor{Ptr: 0x7000, Shape: []int{7, s.hq * s.dh}, Type: cuda.F32}
	good := cudatest.Tensors(c.in...)
	bad := func(edit func([]cuda.Tensor) []cuda.Tensor) []cuda.Tensor {
		in := slices.Clone(good)
		for i := range in {
			in[i].Shape = slices.Clone(in[i].Shape)
		}
		return edit(in)
	}
	for name, in := range map[string][]cuda.Tensor{
		"three inputs":       good[:3],
		"q of 6 rows":        bad(func(in []cuda.Tensor) []cuda.Tensor { in[0].Shape[0] = 6; return in }),
		"keys of 4 heads":    bad(func(in []cuda.Tensor) []cuda.Tensor { in[1].Shape[1] = 4; return in }),
		"values of 64":       bad(func(in []cuda.Tensor) []cuda.Tensor { in[2].Shape[2] = 64; return in }),
		"float positions":    bad(func(in []cuda.Tensor) []cuda.Tensor { in[3].Type = cuda.F32; return in }),
		"half queries":       bad(func(in []cuda.Tensor) []cuda.Tensor { in[0].Type = cuda.U16; return in }),
		"positions of 2 dim": bad(func(in []cuda.Tensor) []cuda.Tensor { in[3].Shape = []int{7, 1}; return in }),
	} {
		if _, err := ops.New(c.kernel).CUDA(&cudatest.Fake{}, out, in); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := ops.New(c.kernel).CUDA(&cudatest.Fake{}, cuda.Tensor{Ptr: 0x7000, Shape: []int{7, 5}, Type: cuda.F32}, good); err == nil {
		t.Error("an output of the wrong shape: no error")
	}
	if _, err := ops.New(c.kernel).CUDA(&cudatest.Fake{}, out, good); err != nil {
		t.Errorf("the good inputs: %v", err)
	}

	wide := newCUDAAttnCase(t, cudaAttnShape{name: "wide", hq: 2, hkv: 1, dh: 288, scale: 1}, cudaAttnForwards[0], 0, false, false, false)
	graphs.FakeDeviceKV(wide.f.KV, &graphs.DeviceKV{KSlabs: 1, VSlabs: 2, Rows: 3, Blocks: 4, BlockTokens: cudaAttnBlock, SlabBlocks: 16, Capacity: cudaAttnCapacity})
	if _, err := cudatest.Check(wide.kernel, wide.in...); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("heads of 288 gave %v", err)
	}
}

// cudaBlockAttnCases are SigLIP's encoder (12 heads of 64, 1024 patches
// an image at 512 pixels, 729 at 384: a last tile of 25 rows).
var cudaBlockAttnCases = []struct {
	name        string
	images, P   int
	heads, dh   int
	wantTileRow int
}{
	{"siglip-512px", 2, 1024, 12, 64, 32},
	{"siglip-384px", 1, 729, 12, 64, 23},
	{"small", 3, 5, 2, 8, 1},
}

func blockAttnInputs(r *rand.Rand, images, P, H, Dh int) []G.Value {
	R := images * P
	return []G.Value{
		ops.NewF32(randVals(r, R*H*Dh, 1), R, H, Dh),
		ops.NewF32(randVals(r, R*H*Dh, 1), R, H, Dh),
		ops.NewF32(randVals(r, R*H*Dh, 1), R, H, Dh),
	}
}

// TestBlockAttentionCUDACalls checks block_attn's launch on the host: its
// parameters, a block per (head, tile, image), and shape errors.
func TestBlockAttentionCUDACalls(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range cudaBlockAttnCases {
		t.Run(c.name, func(t *testing.T) {
			k := blockAttention{block: c.P, scale: 1 / float32(math.Sqrt(float64(c.dh)))}
			calls, err := cudatest.Check(k, blockAttnInputs(r, c.images, c.P, c.heads, c.dh)...)
			if err != nil {
				t.Fatal(err)
			}
			if len(calls) != 1 || calls[0].K != cuda.BlockAttn {
				t.Fatalf("calls %+v", calls)
			}
			if g := calls[0].Grid; g != (cuda.Dim3{X: c.heads, Y: c.wantTileRow, Z: c.images}) {
				t.Errorf("grid %v", g)
			}
			if calls[0].Shared > attnMaxShared {
				t.Errorf("%d bytes of shared memory", calls[0].Shared)
			}
		})
	}
	k := blockAttention{block: 5, scale: 1}
	in := blockAttnInputs(r, 1, 7, 2, 8) // 7 rows are no blocks of 5
	if _, err := cudatest.Check(k, in...); err == nil {
		t.Error("7 rows in blocks of 5: no error")
	}
	in = blockAttnInputs(r, 2, 5, 2, 8)
	in[2] = ops.NewF32(make([]float32, 10*2*4), 10, 2, 4)
	if _, err := cudatest.Check(k, in...); err == nil {
		t.Error("values of another width: no error")
	}
}

// closeRel fails unless got is want within tol·max(1, |want|), value by
// value.
func closeRel(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		w := float64(want[i])
		if d := math.Abs(float64(got[i]) - w); !(d <= tol*max(1, math.Abs(w))) {
			t.Fatalf("%s[%d] = %g, want %g (diff %g)", what, i, got[i], want[i], d)
		}
	}
}

// devicePool is a copy of a fixture's blocks on the device, laid out as
// cuda/kernels/README.md says (in slabs of devSlabBlocks blocks, fewer
// than the host's, so slabs are crossed), with the forward's rows and
// block tables: the DeviceKV a device-backed pool would give.
type devicePool struct {
	dev            deviceMem
	kv             graphs.DeviceKV
	kslabs, vslabs []cuda.Ptr
	kStride        int // bytes a block
	vStride        int
	blocks         int
	held           []cuda.Ptr
}

const devSlabBlocks = 4

// deviceMem is the device memory devicePool takes: a *cuda.Device.
type deviceMem interface {
	sync.Locker
	Alloc(n int) (cuda.Ptr, error)
	Free(p cuda.Ptr)
	Upload(dst cuda.Ptr, src unsafe.Pointer, n int) error
	Download(dst unsafe.Pointer, src cuda.Ptr, n int) error
}

// uploadPool copies the blocks of f's planned runs to the device and makes
// them f's DeviceKV.
func uploadPool(t *testing.T, dev deviceMem, f *graphs.KVFixture, T, capacity int) *devicePool {
	t.Helper()
	dev.Lock()
	defer dev.Unlock()
	c, B := f.KV.Cache, f.KV.BlockTokens()
	elem := 4
	if f.KV.F16() {
		elem = 2
	}
	d := &devicePool{dev: dev, kStride: c.KVHeads * B * c.KeyDim * elem, vStride: c.KVHeads * B * c.ValueDim * elem}
	alloc := func(n int) cuda.Ptr {
		p, err := dev.Alloc(max(n, 4))
		if err != nil {
			t.Fatal(err)
		}
		d.held = append(d.held, p)
		return p
	}
	upload := func(p cuda.Ptr, src unsafe.Pointer, n int) {
		if err := dev.Upload(p, src, n); err != nil {
			t.Fatal(err)
		}
	}
	rows := make([]int32, 2*T)
	for i := range T {
		rows[2*i] = -1
	}
	var tables []int32
	for _, r := range f.KV.Runs() {
		for i := range r.Len {
			rows[2*(r.Row+i)], rows[2*(r.Row+i)+1] = int32(r.Pos+i), int32(len(tables))
		}
		tables = append(tables, r.Blocks...)
		for _, b := range r.Blocks {
			d.blocks = max(d.blocks, int(b)+1)
		}
	}
	var kptrs, vptrs []uint64
	for s := 0; s*devSlabBlocks < d.blocks; s++ {
		d.kslabs = append(d.kslabs, alloc(devSlabBlocks*d.kStride))
		d.vslabs = append(d.vslabs, alloc(devSlabBlocks*d.vStride))
		kptrs, vptrs = append(kptrs, uint64(d.kslabs[s])), append(vptrs, uint64(d.vslabs[s]))
	}
	for b := range d.blocks {
		k, v := hostBlock(f, int32(b))
		kp, vp := d.at(b)
		upload(kp, unsafe.Pointer(unsafe.SliceData(k)), len(k))
		upload(vp, unsafe.Pointer(unsafe.SliceData(v)), len(v))
	}
	d.kv = graphs.DeviceKV{BlockTokens: B, SlabBlocks: devSlabBlocks, F16: f.KV.F16(), Capacity: capacity}
	d.kv.KSlabs, d.kv.VSlabs = alloc(8*len(kptrs)), alloc(8*len(vptrs))
	upload(d.kv.KSlabs, unsafe.Pointer(unsafe.SliceData(kptrs)), 8*len(kptrs))
	upload(d.kv.VSlabs, unsafe.Pointer(unsafe.SliceData(vptrs)), 8*len(vptrs))
	d.kv.Rows, d.kv.Blocks = alloc(4*len(rows)), alloc(4*len(tables))
	upload(d.kv.Rows, unsafe.Pointer(unsafe.SliceData(rows)), 4*len(rows))
	upload(d.kv.Blocks, unsafe.Pointer(unsafe.SliceData(tables)), 4*len(tables))
	graphs.FakeDeviceKV(f.KV, &d.kv)
	t.Cleanup(func() {
		dev.Lock()
		defer dev.Unlock()
		for _, p := range d.held {
			dev.Free(p)
		}
	})
	return d
}

// at is where block b's keys and values start.
func (d *devicePool) at(b int) (k, v cuda.Ptr) {
	return d.kslabs[b/devSlabBlocks].Add(b % devSlabBlocks * d.kStride), d.vslabs[b/devSlabBlocks].Add(b % devSlabBlocks * d.vStride)
}

// hostBlock is block b of the fixture's pool, keys and values, as bytes.
func hostBlock(f *graphs.KVFixture, b int32) (k, v []byte) {
	bytes := func(f32 []float32, f16 []uint16) []byte {
		if f16 != nil {
			return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(f16))), 2*len(f16))
		}
		return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(f32))), 4*len(f32))
	}
	return bytes(f.KV.KeyBlock(b)), bytes(f.KV.ValueBlock(b))
}

// checkBlocks holds the device's blocks to the host pool's, bit for bit.
func (d *devicePool) checkBlocks(t *testing.T, f *graphs.KVFixture) {
	t.Helper()
	d.dev.Lock()
	defer d.dev.Unlock()
	for b := range d.blocks {
		k, v := hostBlock(f, int32(b))
		kp, vp := d.at(b)
		gk, gv := make([]byte, len(k)), make([]byte, len(v))
		if err := d.dev.Download(unsafe.Pointer(unsafe.SliceData(gk)), kp, len(gk)); err != nil {
			t.Fatal(err)
		}
		if err := d.dev.Download(unsafe.Pointer(unsafe.SliceData(gv)), vp, len(gv)); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(gk, k) || !slices.Equal(gv, v) {
			t.Fatalf("block %d differs from the host pool's after the forward", b)
		}
	}
}

// TestCUDACachedAttention runs cached attention on the device over a copy
// of the fixture's pool and holds it to the CPU kernel: outputs and
// captured probabilities within 1e-5 (float32 summation order), the pool
// after the forward bit for bit (F16 rounded alike).
func TestCUDACachedAttention(t *testing.T) {
	dev := cudatest.Device(t)
	eachCUDAAttnCase(t, func(t *testing.T, s cudaAttnShape, fw cudaAttnForward, window int, f16, sink bool) {
		c := newCUDAAttnCase(t, s, fw, window, f16, sink, true)
		pool := uploadPool(t, dev, c.f, fw.T, cudaAttnCapacity)
		got, err := cudatest.Run(dev, c.kernel, c.in...)
		if err != nil {
			t.Fatal(err)
		}
		cpu := c.kernel
		if sink {
			cpu.sink = &graphs.Sink{}
		}
		want, err := ops.New(cpu).Do(c.in...)
		if err != nil {
			t.Fatal(err)
		}
		w, _ := ops.Float32s(want)
		closeRel(t, "output", got.Float32s(), w, 1e-5)
		pool.checkBlocks(t, c.f)
		if sink {
			gp, wp := graphs.SinkValue(c.kernel.sink), graphs.SinkValue(cpu.sink)
			if !gp.Shape().Eq(wp.Shape()) {
				t.Fatalf("probabilities %v, want %v", gp.Shape(), wp.Shape())
			}
			closeRel(t, "probabilities", gp.Float32s(), wp.Float32s(), 1e-5)
		}
	})
}

// TestCUDABlockAttention holds block_attn to the CPU kernel at SigLIP's
// shapes.
func TestCUDABlockAttention(t *testing.T) {
	dev := cudatest.Device(t)
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range cudaBlockAttnCases {
		t.Run(c.name, func(t *testing.T) {
			k := blockAttention{block: c.P, scale: 1 / float32(math.Sqrt(float64(c.dh)))}
			in := blockAttnInputs(r, c.images, c.P, c.heads, c.dh)
			got, err := cudatest.Run(dev, k, in...)
			if err != nil {
				t.Fatal(err)
			}
			want, err := ops.New(k).Do(in...)
			if err != nil {
				t.Fatal(err)
			}
			w, _ := ops.Float32s(want)
			closeRel(t, "output", got.Float32s(), w, 1e-5)
		})
	}
}
