package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// byteTokenizer writes a tokenizer.json for a byte-level BPE with no
// merges (every byte its own token, ids 0..255, GPT-2's byte-to-character
// mapping) plus SmolVLM's chat and image tokens as added tokens from id
// 256. It stands in for SmolVLM's tokenizer, whose licence-free copies
// are not to be had; the pipeline around it is the same.
func byteTokenizer(t *testing.T, dir string) map[string]int {
	t.Helper()
	vocab := map[string]int{}
	var printable []int
	for b := 0; b < 256; b++ {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE {
			printable = append(printable, b)
		}
	}
	isPrintable := map[int]bool{}
	for _, b := range printable {
		isPrintable[b] = true
		vocab[string(rune(b))] = b
	}
	n := 0
	for b := 0; b < 256; b++ {
		if !isPrintable[b] {
			vocab[string(rune(256+n))] = b
			n++
		}
	}
	specials := []string{"<|endoftext|>", "<|im_start|>", "<fake_token_around_image>", "<image>", "<end_of_utterance>"}
	ids := map[string]int{}
	var added []map[string]any
	for i, s := range specials {
		ids[s] = 256 + i
		added = append(added, map[string]any{"id": 256 + i, "content": s, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true})
	}
	tok := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": added, "normalizer": nil,
		"pre_tokenizer":  map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		"post_processor": map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model":          map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil, "end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "vocab": vocab, "merges": []string{}},
	}
	b, err := json.Marshal(tok)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return ids
}

// smolVLMFolder writes a random SmolVLM checkpoint folder with `gozoo
// random` (the tiny config of the smolvlm-full golden case, with the
// image token moved to the tokenizer's), the byte tokenizer and the
// chat template.
func smolVLMFolder(t *testing.T) string {
	t.Helper()
	work := t.TempDir()
	model := filepath.Join(work, "model")
	if err := os.MkdirAll(model, 0o755); err != nil {
		t.Fatal(err)
	}
	ids := byteTokenizer(t, model)
	src := filepath.Join("..", "..", "testdata", "golden", "smolvlm-full")
	var cfg map[string]any
	b, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["image_token_id"] = ids["<image>"]
	cfg["text_config"].(map[string]any)["eos_token_id"] = ids["<end_of_utterance>"]
	b, _ = json.Marshal(cfg)
	cfgPath := filepath.Join(work, "config.json")
	for name, data := range map[string][]byte{"config.json": b} {
		if err := os.WriteFile(filepath.Join(work, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"preprocessor_config.json", "processor_config.json"} {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tmpl, err := os.ReadFile(filepath.Join("..", "..", "testdata", "chat_templates", "smolvlm", "template.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tc, _ := json.Marshal(map[string]any{"chat_template": string(tmpl)})
	if err := os.WriteFile(filepath.Join(model, "tokenizer_config.json"), tc, 0o644); err != nil {
		t.Fatal(err)
	}
	out, errb, status := gozoo(t, "", "random", "--config", cfgPath, "--out", model, "--dtype", "bf16", "--seed", "3")
	if status != 0 || !strings.Contains(out, "preprocessor_config.json") || !strings.Contains(out, "processor_config.json") {
		t.Fatalf("gozoo random: status %d, %q %q", status, out, errb)
	}
	return model
}

// TestRunImage drives `gozoo run --image` on a random SmolVLM checkpoint:
// it streams text, with and without the chat template, and counts the
// expanded prompt's tokens as the processor makes them.
func TestRunImage(t *testing.T) {
	model := smolVLMFolder(t)
	img := filepath.Join("..", "..", "testdata", "golden", "smolvlm-preprocess", "image.png")
	out, errb, status := gozoo(t, "", "run", "--model", model, "--image", img, "--prompt", "Describe.", "--max-tokens", "5", "--temperature", "0")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errb)
	}
	if !strings.Contains(errb, "5 generated") || out == "" {
		t.Fatalf("no generation: %q %q", out, errb)
	}
	// The golden image splits 2x3 + global: 7 tiles of 4 image tokens, 7
	// <fake_token_around_image> plus the closing one; the row tags,
	// <global-img>, three newlines and the text are bytes.
	tags := 6*len("<row_1_col_1>") + len("<global-img>") + len("\n")*3 + len("Describe.")
	want := fmt.Sprintf("[%d prompt tokens", 7*4+8+tags)
	if !strings.Contains(errb, want) {
		t.Errorf("want %q in %q", want, errb)
	}
	_, errb, status = gozoo(t, "", "run", "--model", model, "--image", img, "--chat", "--prompt", "Describe.", "--max-tokens", "3", "--seed", "1")
	if status != 0 || !strings.Contains(errb, "3 generated") {
		t.Fatalf("--chat: status %d, %q", status, errb)
	}
}

// TestRunImageErrors: bad images and image counts get named errors.
func TestRunImageErrors(t *testing.T) {
	model := smolVLMFolder(t)
	img := filepath.Join("..", "..", "testdata", "golden", "smolvlm-preprocess", "image.png")
	notImage := filepath.Join(t.TempDir(), "notes.png")
	if err := os.WriteFile(notImage, []byte("not an image at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "empty.jpg")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--image", "/nonexistent/cat.png", "--prompt", "x"}, "cat.png"},
		{[]string{"--image", notImage, "--prompt", "x"}, "notes.png"},
		{[]string{"--image", empty, "--prompt", "x"}, "empty.jpg"},
		{[]string{"--image", img, "--image", img, "--prompt", "<image> only one"}, "1 <image> tokens but 2 images"},
		// 2048 positions: the expanded image and 2000 bytes of text do not fit.
		{[]string{"--image", img, "--prompt", strings.Repeat("x", 2000)}, "no room in the model's 2048 positions"},
	} {
		_, errb, status := gozoo(t, "", append([]string{"run", "--model", model, "--max-tokens", "2"}, tc.args...)...)
		if status != 1 || !strings.Contains(errb, tc.want) {
			t.Errorf("%v: status %d, want an error naming %q, got %q", tc.args, status, tc.want, errb)
		}
	}
	// A text model takes no images.
	t.Chdir("../..")
	_, errb, status := gozoo(t, "", "run", "--image", "testdata/golden/smolvlm-preprocess/image.png", "--prompt", "x")
	if status != 1 || !strings.Contains(errb, "takes no images") {
		t.Errorf("text model with an image: status %d, %q", status, errb)
	}
}

// TestPreprocessCommand prints the grid, the pixel_values shape and the
// expanded prompt of the golden image.
func TestPreprocessCommand(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "golden", "smolvlm-preprocess")
	out, errb, status := gozoo(t, "", "preprocess", "--model", dir, "--image", filepath.Join(dir, "image.png"), "--json")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errb)
	}
	var rep preprocessReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Images) != 1 || rep.Images[0].Rows != 2 || rep.Images[0].Cols != 3 || fmt.Sprint(rep.PixelValues) != "[1 7 3 84 84]" ||
		strings.Count(rep.ExpandedPrompt, "<image>") != 28 || !strings.HasSuffix(rep.ExpandedPrompt, "<global-img><image><image><image><image><fake_token_around_image>") {
		t.Errorf("report: %+v", rep)
	}
	if _, errb, status := gozoo(t, "", "preprocess", "--model", dir, "--image", "/nonexistent.png"); status != 1 || !strings.Contains(errb, "nonexistent.png") {
		t.Errorf("missing image: status %d, %q", status, errb)
	}
}
