package tokenizer

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func readProse(tb testing.TB) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "prose.txt"))
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// BenchmarkEncodeQwen3Prose encodes 100 KB of English prose with Qwen3's
// tokenizer and reports tokens per second. Run it on one core with
//
//	go test -run '^$' -bench EncodeQwen3Prose -cpu 1 ./tokenizer/
func BenchmarkEncodeQwen3Prose(b *testing.B) {
	b.ReportAllocs()
	benchEncode(b, loadRef(b, "qwen3"), false)
}

// BenchmarkEncodeQwen3ProseCold is the same with an empty word cache on
// every iteration: the cost of BPE merging itself.
func BenchmarkEncodeQwen3ProseCold(b *testing.B) { benchEncode(b, loadRef(b, "qwen3"), true) }

// BenchmarkEncodeQwen3ProseRegexp2 is BenchmarkEncodeQwen3Prose with the
// split done by regexp2 instead of the hand-written scanner.
func BenchmarkEncodeQwen3ProseRegexp2(b *testing.B) { benchEncode(b, qwen3ViaRegexp2(b), false) }

// benchEncode encodes the prose b.N times and reports tokens per second;
// cold empties the word cache before each run.
func benchEncode(b *testing.B, tok *Tokenizer, cold bool) {
	text := readProse(b)
	ids, err := tok.Encode(text, false)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if cold {
			b.StopTimer()
			tok.model.cache = newWordCache()
			b.StartTimer()
		}
		if _, err := tok.Encode(text, false); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(ids))*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}

func BenchmarkDecodeQwen3Prose(b *testing.B) {
	tok := loadRef(b, "qwen3")
	ids, err := tok.Encode(readProse(b), false)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := tok.Decode(ids, false); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(ids))*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkLoadGemma3 loads the 33 MB Gemma3 tokenizer.json.
func BenchmarkLoadGemma3(b *testing.B) {
	dir := tokenizerDir(b, "gemma3")
	for i := 0; i < b.N; i++ {
		if _, err := Load(dir); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLoadGemma3Allocs loads the 33 MB Gemma3 file, whose speed
// BenchmarkLoadGemma3 measures (the goal is under a second), and checks
// what a machine's load does not change: the allocations. The loader reads
// the vocabulary and merges with its own JSON scanner, about one object
// per vocabulary entry and 4.4 bytes per byte of file (6.8 under -race);
// a generic decoder (or a copy per merge) takes several times either.
func TestLoadGemma3Allocs(t *testing.T) {
	dir := tokenizerDir(t, "gemma3")
	info, err := os.Stat(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tok *Tokenizer
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if tok, err = Load(dir); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	objects, bytes := after.Mallocs-before.Mallocs, after.TotalAlloc-before.TotalAlloc
	vocab := uint64(tok.VocabSize())
	t.Logf("Gemma3 tokenizer.json (%d MiB, %d tokens): %d objects (%.2f per token), %d MiB allocated (%.1f per byte of file)",
		info.Size()>>20, vocab, objects, float64(objects)/float64(vocab), bytes>>20, float64(bytes)/float64(info.Size()))
	if objects > 2*vocab {
		t.Errorf("loading allocated %d objects, more than 2 per token (%d tokens)", objects, vocab)
	}
	if bytes > 12*uint64(info.Size()) {
		t.Errorf("loading allocated %d MiB, more than 12 bytes per byte of the %d MiB file", bytes>>20, info.Size()>>20)
	}
}
