package qwen3_test

import (
	"encoding/json"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/internal/procstat"
	"github.com/gozoo/gozoo/zoo"
)

// TestWeightsStayInTheFile checks the loader's memory promise: matrices are
// used where the memory-mapped checkpoint holds them, so loading costs
// next to nothing, and running the model costs about the file's size in
// resident memory, not a widened or transposed copy.
func TestWeightsStayInTheFile(t *testing.T) {
	if _, ok := procstat.KB("VmHWM"); !ok || !procstat.ResetPeak() {
		t.Skip("needs Linux /proc to measure peak RSS")
	}
	cfg := map[string]any{
		"model_type": "qwen3", "vocab_size": 16000, "hidden_size": 640, "intermediate_size": 1792,
		"num_hidden_layers": 2, "num_attention_heads": 10, "num_key_value_heads": 2, "head_dim": 64,
		"tie_word_embeddings": false, "eos_token_id": 2, "max_position_embeddings": 256,
	}
	b, _ := json.Marshal(cfg)
	for _, dtype := range []string{"f32", "bf16"} {
		t.Run(dtype, func(t *testing.T) {
			dir := t.TempDir()
			if err := zoo.WriteRandomCheckpoint(b, dir, dtype, 1); err != nil {
				t.Fatal(err)
			}
			runtime.GC()
			debug.FreeOSMemory()
			procstat.ResetPeak()
			before, _ := procstat.KB("VmRSS")
			m, err := zoo.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			loaded, _ := procstat.KB("VmHWM")
			file := float64(m.Params().Bytes()) / 1024
			const slack = 24 * 1024 // runtime and test overhead
			t.Logf("%s weights %.0f MB; loading grew the peak RSS by %.0f MB", dtype, file/1024, (loaded-before)/1024)
			if loaded-before > file/4+slack {
				t.Errorf("loading grew RSS by %.0f MB for %.0f MB of weights: the loader copies them", (loaded-before)/1024, file/1024)
			}
			s, err := graphs.NewSession(m, graphs.Options{Capacity: 64})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Append([]int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}); err != nil {
				t.Fatal(err)
			}
			ran, _ := procstat.KB("VmHWM")
			t.Logf("after a prefill the peak RSS grew by %.0f MB", (ran-before)/1024)
			if ran-before > 1.15*file+slack {
				t.Errorf("running grew RSS by %.0f MB for %.0f MB of weights", (ran-before)/1024, file/1024)
			}
			s.Close()
			runtime.KeepAlive(m)
		})
	}
}
