package graphs

import (
	"errors"

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

// poolDevice is a KV pool's memory on a device.
type poolDevice struct {
	dev *cuda.Device
	kv  map[*kvStore]*DeviceKV
}

func (d *poolDevice) layer(group int, st *kvStore) *DeviceKV { return d.kv[st] }
