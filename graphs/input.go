package graphs

import (
	"errors"
	"fmt"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/ops"
)

// Input is what one step feeds the model, in one of three forms:
//
//   - token ids: IDs set, Embeds nil;
//   - input embeddings: IDs nil, Embeds holding [rows, hidden] row-major;
//   - the multimodal merge: IDs set, and Embeds holding one row of
//     embeddings for each entry of Replace, which lists the rows of IDs
//     whose embedding is replaced (a vision-language model's image tokens).
type Input struct {
	IDs     []int
	Embeds  []float32
	Replace []int
}

// IDs is the simple form of Input.
func IDs(ids ...int) Input { return Input{IDs: ids} }

// Embeddings is an input of embedding rows [rows, hidden], row-major.
func Embeddings(rows []float32) Input { return Input{Embeds: rows} }

// Len is the number of rows (tokens) of the input, given the model's
// hidden size.
func (in Input) Len(hidden int) int {
	if in.IDs != nil {
		return len(in.IDs)
	}
	if hidden <= 0 {
		return 0
	}
	return len(in.Embeds) / hidden
}

func (in Input) kind() inputKind {
	switch {
	case in.IDs == nil:
		return fromEmbeds
	case len(in.Replace) > 0:
		return fromMerge
	}
	return fromIDs
}

// check validates the input against a model's vocabulary and hidden size,
// naming the token or row at fault.
func (in Input) check(vocab, hidden int) error {
	if in.IDs == nil {
		if len(in.Embeds) == 0 {
			return errors.New("no tokens to run")
		}
		if len(in.Embeds)%hidden != 0 {
			return fmt.Errorf("%d embedding values do not split into rows of the hidden size %d", len(in.Embeds), hidden)
		}
		if len(in.Replace) > 0 {
			return errors.New("Replace needs IDs: it names rows of IDs whose embeddings are replaced")
		}
		return nil
	}
	if len(in.IDs) == 0 {
		return errors.New("no tokens to run")
	}
	for i, id := range in.IDs {
		if id < 0 || id >= vocab {
			return fmt.Errorf("token %d at index %d is outside the vocabulary [0, %d)", id, i, vocab)
		}
	}
	if len(in.Embeds) != len(in.Replace)*hidden {
		return fmt.Errorf("%d embedding values for %d replaced rows of hidden size %d", len(in.Embeds), len(in.Replace), hidden)
	}
	seen := map[int]bool{}
	for _, r := range in.Replace {
		if r < 0 || r >= len(in.IDs) {
			return fmt.Errorf("replaced row %d is outside the %d input rows", r, len(in.IDs))
		}
		if seen[r] {
			return fmt.Errorf("row %d is replaced twice", r)
		}
		seen[r] = true
	}
	return nil
}

// Slice returns rows [from, to) of the input.
func (in Input) Slice(from, to, hidden int) Input {
	if in.IDs == nil {
		return Input{Embeds: in.Embeds[from*hidden : to*hidden]}
	}
	out := Input{IDs: in.IDs[from:to]}
	for k, r := range in.Replace {
		if r >= from && r < to {
			out.Replace = append(out.Replace, r-from)
			out.Embeds = append(out.Embeds, in.Embeds[k*hidden:(k+1)*hidden]...)
		}
	}
	return out
}

// replaceRows merges given embeddings into embedded ids: out row t is
// embeds[t] where mask[t] is 1, else h[t].
type replaceRows struct{}

func (replaceRows) Name() string   { return "replace rows" }
func (replaceRows) String() string { return "ReplaceRows" }
func (replaceRows) Signature() []hm.Type {
	return []hm.Type{ops.T(2, nil), ops.T(2, nil), ops.T(1, tensor.Int), ops.T(2, nil)}
}
func (replaceRows) Shape(in []tensor.Shape) (tensor.Shape, error) {
	if !in[0].Eq(in[1]) || len(in[2]) != 1 || in[2][0] != in[0][0] {
		return nil, fmt.Errorf("rows %v, embeddings %v and mask %v differ", in[0], in[1], in[2])
	}
	return in[0].Clone(), nil
}
func (replaceRows) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	h, e, err := ops.Float32Pair(in)
	if err != nil {
		return nil, err
	}
	mask, err := ops.Ints(in[2])
	if err != nil {
		return nil, err
	}
	out := o.Float32s(len(h))
	copy(out, h)
	D := len(h) / len(mask)
	for t, m := range mask {
		if m != 0 {
			copy(out[t*D:(t+1)*D], e[t*D:(t+1)*D])
		}
	}
	return o.Tensor(out, in[0].Shape()...), nil
}
