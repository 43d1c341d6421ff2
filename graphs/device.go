package graphs

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/gozoo/gozoo/cuda"
)

// DeviceKV is one layer's keys and values in a KV pool that lives on a
// device, as one forward's attention reads them (cuda/kernels/README.md
// gives the layout). Every pointer stays put from step to step, so a
// captured step replays; what a step changes is the memory they point to.
type DeviceKV struct {
	// KSlabs and VSlabs are device arrays of u64 slab base pointers.
	KSlabs, VSlabs cuda.Ptr
	// Rows is int32 [T][2] {pos, table} of the forward's rows for this
	// layer's group (pos -1: padding); Blocks holds the block tables that
	// table indexes.
	Rows, Blocks cuda.Ptr
	BlockTokens  int
	// SlabBlocks is the number of blocks in a slab.
	SlabBlocks int
	F16        bool
	// Capacity is the most positions a sequence holds: the key axis of
	// captured probabilities on the device.
	Capacity int
}

// ErrHostKV is returned by LayerKV.Device when the pool is in host memory.
var ErrHostKV = errors.New("the KV pool is not on a device")

// Device returns the layer's keys and values on the device the pool
// lives on, or ErrHostKV.
func (l *LayerKV) Device() (*DeviceKV, error) {
	if l.pool.dev == nil {
		return nil, ErrHostKV
	}
	return l.pool.dev.layer(l.group, l.store), nil
}

// devMem is the device memory the runtime plans against: a cuda.Device,
// or fakeMem, which lets a host test plan a model's forward on a device
// without one.
type devMem interface {
	Alloc(n int) (cuda.Ptr, error)
	Free(p cuda.Ptr)
	Zero(p cuda.Ptr, n int) error
	Copy(dst, src cuda.Ptr, n int) error
	Upload(dst cuda.Ptr, src unsafe.Pointer, n int) error
}

// fakeMem hands out distinct addresses and moves no data.
type fakeMem struct{ next cuda.Ptr }

func (f *fakeMem) Alloc(n int) (cuda.Ptr, error) {
	f.next += cuda.Ptr((n + 4095) / 4096 * 4096)
	return f.next, nil
}
func (f *fakeMem) Free(cuda.Ptr)                              {}
func (f *fakeMem) Zero(cuda.Ptr, int) error                   { return nil }
func (f *fakeMem) Copy(cuda.Ptr, cuda.Ptr, int) error         { return nil }
func (f *fakeMem) Upload(cuda.Ptr, unsafe.Pointer, int) error { return nil }

// poolDevice is a KV pool's memory on a device: each layer's slabs, the
// slab tables the attention kernels read, and one group's rows and block
// tables per forward. Grow and copy errors are kept in err and returned by
// the next forward (the pool's own calls cannot fail).
type poolDevice struct {
	dev      devMem
	kv       map[*kvStore]*DeviceKV
	slabs    map[*kvStore]*[2][]cuda.Ptr // keys', values' slabs
	maxSlabs int
	groups   []groupDevice
	owned    []cuda.Ptr
	err      error
	rows     []int32
	blocks   []int32
}

// groupDevice is a group's per-forward tables on the device.
type groupDevice struct {
	rows, blocks       cuda.Ptr
	maxRows, maxBlocks int
}

// onDevice moves the pool's memory to dev, before any block is taken:
// maxRows is the most rows a forward has, capacity the most positions a
// sequence holds.
func (p *KVPool) onDevice(dev devMem, maxRows, capacity int) (err error) {
	d := &poolDevice{dev: dev, kv: map[*kvStore]*DeviceKV{}, slabs: map[*kvStore]*[2][]cuda.Ptr{}}
	defer func() {
		if err != nil {
			d.release()
		}
	}()
	alloc := func(n int) (cuda.Ptr, error) {
		ptr, err := dev.Alloc(n)
		if err == nil {
			d.owned = append(d.owned, ptr)
			err = dev.Zero(ptr, n)
		}
		return ptr, err
	}
	perSeq := (capacity+p.blockTokens-1)/p.blockTokens + 1
	for _, g := range p.groups {
		slabs := int(p.budget/(g.blockBytes*slabBlocks)) + 1
		d.maxSlabs = max(d.maxSlabs, slabs)
		gd := groupDevice{maxRows: maxRows, maxBlocks: maxRows * perSeq}
		if gd.rows, err = alloc(8 * maxRows); err != nil {
			return err
		}
		if gd.blocks, err = alloc(4 * gd.maxBlocks); err != nil {
			return err
		}
		d.groups = append(d.groups, gd)
		for i := range g.stores {
			st := &g.stores[i]
			kv := &DeviceKV{Rows: gd.rows, Blocks: gd.blocks, BlockTokens: p.blockTokens, SlabBlocks: slabBlocks, F16: p.f16, Capacity: capacity}
			if kv.KSlabs, err = alloc(8 * slabs); err != nil {
				return err
			}
			if kv.VSlabs, err = alloc(8 * slabs); err != nil {
				return err
			}
			d.kv[st] = kv
			d.slabs[st] = &[2][]cuda.Ptr{}
		}
	}
	p.dev = d
	return nil
}

func (d *poolDevice) layer(group int, st *kvStore) *DeviceKV { return d.kv[st] }

// grow adds a slab to each of g's layers and enters it in their tables.
func (d *poolDevice) grow(g *kvGroup, f16 bool) {
	if d.err != nil {
		return
	}
	elem := 4
	if f16 {
		elem = 2
	}
	for i := range g.stores {
		st := &g.stores[i]
		sl, kv := d.slabs[st], d.kv[st]
		for side, stride := range [2]int{st.kStride, st.vStride} {
			n := len(sl[side])
			if n >= d.maxSlabs {
				d.err = fmt.Errorf("the KV pool outgrew its %d slabs", d.maxSlabs)
				return
			}
			ptr, err := d.dev.Alloc(slabBlocks * stride * elem)
			if err == nil {
				err = d.dev.Zero(ptr, slabBlocks*stride*elem)
			}
			if err != nil {
				d.err = fmt.Errorf("growing the KV pool: %w", err)
				return
			}
			d.owned = append(d.owned, ptr)
			sl[side] = append(sl[side], ptr)
			table := kv.KSlabs
			if side == 1 {
				table = kv.VSlabs
			}
			entry := uint64(ptr)
			if err := d.dev.Upload(table.Add(8*n), unsafe.Pointer(&entry), 8); err != nil {
				d.err = fmt.Errorf("growing the KV pool: %w", err)
				return
			}
		}
	}
}

// copyBlock copies block src of g's layers into dst.
func (d *poolDevice) copyBlock(g *kvGroup, dst, src int32, f16 bool) {
	if d.err != nil {
		return
	}
	elem := 4
	if f16 {
		elem = 2
	}
	for i := range g.stores {
		st := &g.stores[i]
		sl := d.slabs[st]
		for side, stride := range [2]int{st.kStride, st.vStride} {
			at := func(b int32) cuda.Ptr {
				return sl[side][b/slabBlocks].Add(int(b%slabBlocks) * stride * elem)
			}
			if err := d.dev.Copy(at(dst), at(src), stride*elem); err != nil {
				d.err = fmt.Errorf("copying a KV block: %w", err)
				return
			}
		}
	}
}

// upload writes a forward's rows and block tables of T rows, group by
// group.
func (d *poolDevice) upload(plan *stepPlan, T int) error {
	if d.err != nil {
		return d.err
	}
	for gi, runs := range plan.runs {
		gd := d.groups[gi]
		if T > gd.maxRows {
			return fmt.Errorf("a forward of %d rows; the device's KV tables hold %d", T, gd.maxRows)
		}
		d.rows, d.blocks = d.rows[:0], d.blocks[:0]
		for t := 0; t < T; t++ {
			d.rows = append(d.rows, -1, 0)
		}
		for _, r := range runs {
			table := len(d.blocks)
			d.blocks = append(d.blocks, r.Blocks...)
			for t := 0; t < r.Len; t++ {
				d.rows[2*(r.Row+t)], d.rows[2*(r.Row+t)+1] = int32(r.Pos+t), int32(table)
			}
		}
		if len(d.blocks) > gd.maxBlocks {
			return fmt.Errorf("a forward's block tables take %d entries; the device's hold %d", len(d.blocks), gd.maxBlocks)
		}
		if err := d.dev.Upload(gd.rows, unsafe.Pointer(&d.rows[0]), 4*len(d.rows)); err != nil {
			return err
		}
		if len(d.blocks) > 0 {
			if err := d.dev.Upload(gd.blocks, unsafe.Pointer(&d.blocks[0]), 4*len(d.blocks)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *poolDevice) release() {
	for _, ptr := range d.owned {
		d.dev.Free(ptr)
	}
	d.owned = nil
}
