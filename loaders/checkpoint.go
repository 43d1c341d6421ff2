package loaders

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
)

// Checkpoint is a Hugging Face model folder: model.safetensors, or shards
// listed in model.safetensors.index.json.
type Checkpoint struct {
	Dir   string
	files []*SafetensorsFile
	where map[string]*SafetensorsFile
}

// OpenCheckpoint opens the safetensors files of a model folder.
func OpenCheckpoint(dir string) (*Checkpoint, error) {
	c := &Checkpoint{Dir: dir, where: map[string]*SafetensorsFile{}}
	index := filepath.Join(dir, "model.safetensors.index.json")
	if b, err := readLimited(index, MaxConfigFileBytes); err == nil {
		var idx struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(b, &idx); err != nil {
			return nil, fmt.Errorf("%s: %w", index, err)
		}
		if len(idx.WeightMap) == 0 {
			return nil, fmt.Errorf("%s: empty weight_map", index)
		}
		shards := map[string]*SafetensorsFile{}
		names := make([]string, 0, len(idx.WeightMap))
		for name := range idx.WeightMap {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			shard := idx.WeightMap[name]
			if filepath.Base(shard) != shard {
				c.Close()
				return nil, fmt.Errorf("%s: tensor %q: shard %q must be a file name in %s", index, name, shard, dir)
			}
			f, ok := shards[shard]
			if !ok {
				var err error
				if f, err = OpenSafetensors(filepath.Join(dir, shard)); err != nil {
					c.Close()
					return nil, fmt.Errorf("shard listed in %s: %w", index, err)
				}
				shards[shard] = f
				c.files = append(c.files, f)
			}
			if !f.Has(name) {
				c.Close()
				return nil, fmt.Errorf("%s: tensor %q is listed in %s but missing from the shard", f.Path, name, index)
			}
			c.where[name] = f
		}
		return c, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	f, err := OpenSafetensors(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		return nil, err
	}
	c.files = []*SafetensorsFile{f}
	for _, name := range f.Names() {
		c.where[name] = f
	}
	return c, nil
}

// Holds says whether b lies in the mapping of one of the checkpoint's
// files: read-only bytes of a file, which tensors are views of.
func (c *Checkpoint) Holds(b []byte) bool {
	for _, f := range c.files {
		if f.Holds(b) {
			return true
		}
	}
	return false
}

// Close releases every file of the checkpoint.
func (c *Checkpoint) Close() error {
	var errs []error
	for _, f := range c.files {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}

// Has reports whether the checkpoint holds a tensor called name.
func (c *Checkpoint) Has(name string) bool { _, ok := c.where[name]; return ok }

// Names lists every tensor of the checkpoint, sorted.
func (c *Checkpoint) Names() []string {
	out := make([]string, 0, len(c.where))
	for n := range c.where {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Len is the number of tensors in the checkpoint.
func (c *Checkpoint) Len() int { return len(c.where) }

// Info returns a tensor's dtype and shape, as stored.
func (c *Checkpoint) Info(name string) (dtype string, shape []int, err error) {
	f, ok := c.where[name]
	if !ok {
		return "", nil, fmt.Errorf("%s: missing tensor %q", c.FileOf(name), name)
	}
	return f.Info(name)
}

// FileOf names the file holding a tensor, for error messages.
func (c *Checkpoint) FileOf(name string) string {
	if f, ok := c.where[name]; ok {
		return f.Path
	}
	if len(c.files) == 1 {
		return c.files[0].Path
	}
	return c.Dir
}

// Tensor returns one tensor's dtype and bytes, inside the checkpoint's
// memory mapping (read-only, valid until Close). want is the shape
// config.json implies, in the checkpoint's (PyTorch) layout; a missing
// tensor or a different shape is an error naming both.
func (c *Checkpoint) Tensor(name string, want []int) (dtype string, data []byte, err error) {
	f, ok := c.where[name]
	if !ok {
		return "", nil, fmt.Errorf("%s: missing tensor %q", c.FileOf(name), name)
	}
	dtype, shape, data, err := f.Raw(name)
	if err != nil {
		return "", nil, err
	}
	if !slices.Equal(shape, want) {
		return "", nil, fmt.Errorf("%s: tensor %q has shape %v, config.json implies %v", f.Path, name, shape, want)
	}
	return dtype, data, nil
}

// ReadFloat32 converts a tensor to float32 into dst (F32, BF16 or F16).
func (c *Checkpoint) ReadFloat32(name string, dst []float32) error {
	f, ok := c.where[name]
	if !ok {
		return fmt.Errorf("%s: missing tensor %q", c.FileOf(name), name)
	}
	return f.ReadFloat32(name, dst)
}
