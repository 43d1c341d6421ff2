package layers

import (
	"fmt"
	"math"

	"github.com/chewxy/hm"
	G "gorgonia.org/gorgonia"
	"gorgonia.org/tensor"

	"github.com/gozoo/gozoo/ops"
)

// CrossEntropy is the mean next-token loss of logits [T, V] against
// targets [T] (Go ints): the mean over the rows whose target is not
// negative of -log softmax(logits[t])[targets[t]], natural log, a float32
// scalar (log-sum-exp accumulated in float64). It is what Hugging Face's
// model(input_ids, labels=input_ids).loss computes when targets[t] =
// input_ids[t+1] and the last row's target is -1 (ignored).
func CrossEntropy(logits, targets *G.Node) *G.Node {
	return ops.Apply(crossEntropy{}, logits, targets)
}

type crossEntropy struct{}

func (crossEntropy) Name() string   { return "cross entropy" }
func (crossEntropy) String() string { return "CrossEntropy" }
func (crossEntropy) Signature() []hm.Type {
	return []hm.Type{ops.T(2, nil), ops.T(1, tensor.Int), hm.TypeVariable('a')}
}
func (crossEntropy) Shape(in []tensor.Shape) (tensor.Shape, error) {
	if len(in[0]) != 2 || len(in[1]) != 1 || in[1][0] != in[0][0] {
		return nil, fmt.Errorf("logits %v and targets %v: want [T, V] and [T]", in[0], in[1])
	}
	return tensor.ScalarShape(), nil
}

// targetRows checks the targets against the vocabulary and counts the
// rows that enter the mean.
func targetRows(targets []int, V int) (int, error) {
	n := 0
	for t, id := range targets {
		if id >= V {
			return 0, fmt.Errorf("target %d at row %d is outside the vocabulary [0, %d)", id, t, V)
		}
		if id >= 0 {
			n++
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("no row has a target: the loss is a mean over none")
	}
	return n, nil
}

// logSumExp is log Σ exp(row), in float64, and the row's max.
func logSumExp(row []float32) (lse, m float64) {
	m = math.Inf(-1)
	for _, v := range row {
		m = max(m, float64(v))
	}
	var s float64
	for _, v := range row {
		s += math.Exp(float64(v) - m)
	}
	return m + math.Log(s), m
}

func (crossEntropy) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	logits, err := ops.Float32s(in[0])
	if err != nil {
		return nil, err
	}
	targets, err := ops.Ints(in[1])
	if err != nil {
		return nil, err
	}
	V := in[0].Shape()[1]
	n, err := targetRows(targets, V)
	if err != nil {
		return nil, err
	}
	var sum float64
	for t, id := range targets {
		if id < 0 {
			continue
		}
		row := logits[t*V : (t+1)*V]
		lse, _ := logSumExp(row)
		sum += lse - float64(row[id])
	}
	return G.NewF32(float32(sum / float64(n))), nil
}

func (crossEntropy) Grad(in G.Nodes, out, grad *G.Node) (G.Nodes, error) {
	return nodes(func() (*G.Node, error) { return node(crossEntropyGrad{}, in[0], in[1], grad) }, nil)
}

// crossEntropyGrad is the loss's gradient with respect to the logits:
// (softmax(logits[t]) - onehot(targets[t])) · g / n on the counted rows,
// zero on the others.
type crossEntropyGrad struct{}

func (crossEntropyGrad) Name() string   { return "cross entropy gradient" }
func (crossEntropyGrad) String() string { return "CrossEntropyGrad" }
func (crossEntropyGrad) Signature() []hm.Type {
	return []hm.Type{ops.T(2, nil), ops.T(1, tensor.Int), hm.TypeVariable('a'), ops.T(2, nil)}
}
func (crossEntropyGrad) Shape(in []tensor.Shape) (tensor.Shape, error) { return in[0].Clone(), nil }
func (crossEntropyGrad) CPU(o *ops.Out, in []G.Value) (G.Value, error) {
	logits, err := ops.Float32s(in[0])
	if err != nil {
		return nil, err
	}
	targets, err := ops.Ints(in[1])
	if err != nil {
		return nil, err
	}
	g, err := scalar(in[2])
	if err != nil {
		return nil, err
	}
	V := in[0].Shape()[1]
	n, err := targetRows(targets, V)
	if err != nil {
		return nil, err
	}
	out := o.Float32s(len(logits))
	scale := g / float64(n)
	for t, id := range targets {
		if id < 0 {
			continue
		}
		row, d := logits[t*V:(t+1)*V], out[t*V:(t+1)*V]
		lse, _ := logSumExp(row)
		for j, v := range row {
			d[j] = float32(math.Exp(float64(v)-lse) * scale)
		}
		d[id] = float32((math.Exp(float64(row[id])-lse) - 1) * scale)
	}
	return o.Tensor(out, in[0].Shape()...), nil
}

// scalar reads a scalar value (the seed gradient of a loss).
func scalar(v G.Value) (float64, error) {
	switch s := v.(type) {
	case *G.F32:
		return float64(*s), nil
	case *G.F64:
		return float64(*s), nil
	case *tensor.Dense:
		if s.Shape().TotalSize() == 1 {
			switch d := s.Data().(type) {
			case float32:
				return float64(d), nil
			case []float32:
				return float64(d[0]), nil
			}
		}
	}
	return 0, fmt.Errorf("expected a float scalar, got %T", v)
}
