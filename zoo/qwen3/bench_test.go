package qwen3_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/zoo"
	"github.com/gozoo/gozoo/zoo/generate"
)

// benchModel is the checkpoint in $GOZOO_BENCH_MODEL (for example one
// written by `gozoo random --config ../shared/configs/Qwen3-0.6B.json`), or
// a small random Qwen3 so the benchmarks always run.
func benchModel(b *testing.B) zoo.Model {
	b.Helper()
	if dir := os.Getenv("GOZOO_BENCH_MODEL"); dir != "" {
		m, err := zoo.Load(dir)
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	return randomQwen3(b, 32000, 256, 768, 4, 8, 4, 32)
}

// randomQwen3 is a random-weight Qwen3 of the given sizes.
func randomQwen3(b *testing.B, vocab, hidden, inter, layers, heads, kvHeads, headDim int) zoo.Model {
	b.Helper()
	cfg, _ := json.Marshal(map[string]any{
		"model_type": "qwen3", "vocab_size": vocab, "hidden_size": hidden, "intermediate_size": inter,
		"num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kvHeads, "head_dim": headDim,
		"tie_word_embeddings": true, "eos_token_id": 2, "max_position_embeddings": 4096,
	})
	c, err := zoo.ParseConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	m, err := zoo.NewRandom(c, 1)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

func prompt(n, vocab int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = (i*7919 + 13) % vocab
	}
	return p
}

// BenchmarkPrefill128 measures prompt throughput (tokens/s) for 128 tokens.
func BenchmarkPrefill128(b *testing.B) {
	m := benchModel(b)
	s, err := graphs.NewSession(m, graphs.Options{Capacity: 256})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	p := prompt(128, m.VocabSize())
	if _, err := s.Append(p); err != nil { // build and compile the graphs
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.Reset()
		if _, err := s.Append(p); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(128*b.N)/b.Elapsed().Seconds(), "tok/s")
}

// BenchmarkDecode measures one-token steps (tokens/s) after a 128-token prompt.
func BenchmarkDecode(b *testing.B) {
	m := benchModel(b)
	s, err := graphs.NewSession(m, graphs.Options{Capacity: 128 + 64, ReuseLogits: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	p := prompt(128, m.VocabSize())
	logits, err := s.Append(p)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if s.Pos() == s.Capacity() {
			b.StopTimer()
			s.Reset()
			if logits, err = s.Append(p); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		if logits, err = s.Append([]int{generate.Argmax(logits)}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
}

// BenchmarkBlock runs one decoder layer of Qwen3-0.6B's dimensions (a
// one-layer model with a small vocabulary, so the block dominates):
// prefill of 128 rows and decode steps, reported as GFLOP/s of the
// block's products.
func BenchmarkBlock(b *testing.B) {
	m := randomQwen3(b, 256, 1024, 3072, 1, 16, 8, 128)
	// q, k, v, o and the MLP: 2 flops per weight per row.
	const weights = 1024*(2048+1024+1024) + 2048*1024 + 3*1024*3072
	p := prompt(128, m.VocabSize())
	b.Run("prefill/T=128", func(b *testing.B) {
		s, err := graphs.NewSession(m, graphs.Options{Capacity: 256})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		for i := 0; i <= b.N; i++ {
			if i == 1 {
				b.ResetTimer() // the first run builds the graphs
			}
			s.Reset()
			if _, err := s.Append(p); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(2*weights*128*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
	b.Run("decode/ctx=128", func(b *testing.B) {
		s, err := graphs.NewSession(m, graphs.Options{Capacity: 4096})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Append(p); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if s.Pos() == s.Capacity() {
				b.StopTimer()
				s.Reset()
				s.Append(p)
				b.StartTimer()
			}
			if _, err := s.Append([]int{i % 256}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(4*weights*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
	})
}
