package serve

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gozoo/gozoo/zoo"
)

// smolVLM writes a random SmolVLM checkpoint folder: the tiny config of
// the smolvlm-full golden case, a byte-level tokenizer with SmolVLM's
// chat and image tokens (its real tokenizer is not to be had), the
// processor configs and SmolVLM's chat template.
func smolVLM(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "smolvlm")
	src := filepath.Join("..", "testdata", "golden", "smolvlm-full")
	vocab := map[string]int{}
	n := 0
	for b := 0; b < 256; b++ {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE {
			vocab[string(rune(b))] = b
		} else {
			vocab[string(rune(256+n))] = b
			n++
		}
	}
	var added []map[string]any
	ids := map[string]int{}
	for i, s := range []string{"<|endoftext|>", "<|im_start|>", "<fake_token_around_image>", "<image>", "<end_of_utterance>"} {
		ids[s] = 256 + i
		added = append(added, map[string]any{"id": 256 + i, "content": s, "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true})
	}
	tok := map[string]any{
		"version": "1.0", "added_tokens": added, "normalizer": nil,
		"pre_tokenizer":  map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		"post_processor": map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model":          map[string]any{"type": "BPE", "vocab": vocab, "merges": []string{}, "byte_fallback": false, "fuse_unk": false},
	}
	var cfg map[string]any
	b, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(b, &cfg)
	cfg["image_token_id"] = ids["<image>"]
	cfg["text_config"].(map[string]any)["eos_token_id"] = ids["<end_of_utterance>"]
	cb, _ := json.Marshal(cfg)
	if err := zoo.WriteRandomCheckpoint(cb, dir, "bf16", 3); err != nil {
		t.Fatal(err)
	}
	tmpl, err := os.ReadFile(filepath.Join("..", "testdata", "chat_templates", "smolvlm", "template.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tb, _ := json.Marshal(tok)
	tc, _ := json.Marshal(map[string]any{"chat_template": string(tmpl)})
	files := map[string][]byte{"tokenizer.json": tb, "tokenizer_config.json": tc}
	for _, name := range []string{"preprocessor_config.json", "processor_config.json"} {
		if files[name], err = os.ReadFile(filepath.Join(src, name)); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestImages: SmolVLM takes images as data URLs in user messages' content
// parts, expanded by its processor; remote URLs and anything that is not
// an image are refused naming the part.
func TestImages(t *testing.T) {
	dir := smolVLM(t)
	_, hs := newServer(t, dir, Options{Context: 2048})
	png, err := os.ReadFile(filepath.Join("..", "testdata", "golden", "smolvlm-preprocess", "image.png"))
	if err != nil {
		t.Fatal(err)
	}
	url := "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)
	msgs := fmt.Sprintf(`[{"role": "system", "content": "Be brief."}, {"role": "user", "content": [{"type": "image_url", "image_url": {"url": %q, "detail": "auto"}}, {"type": "text", "text": "Describe."}]}]`, url)
	resp, body := post(t, hs, "/v1/chat/completions", fmt.Sprintf(`{"messages": %s, "max_tokens": 3, "temperature": 0}`, msgs))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	c := decode[completionResp](t, body)
	// <|im_start|>System: Be brief.<end_of_utterance>\nUser:<image>Describe.<end_of_utterance>\nAssistant:
	// with the image expanded: 2x3 tiles + the global one, 4 image tokens
	// each, 8 <fake_token_around_image>, the row tags, <global-img> and
	// three newlines as bytes.
	text := len("System: Be brief.") + 1 + len("\nUser:") + len("Describe.") + 1 + len("\nAssistant:")
	image := 7*4 + 8 + 6*len("<row_1_col_1>") + len("<global-img>") + 3
	if want := 1 + text + image; c.Usage.PromptTokens != want || c.Usage.CompletionTokens != 3 {
		t.Errorf("usage %+v, want a prompt of %d tokens", c.Usage, want)
	}
	_, body = post(t, hs, "/v1/chat/completions", fmt.Sprintf(`{"messages": %s, "max_tokens": 3, "temperature": 0, "stream": true}`, msgs))
	if s := collect(t, body); s.content[0] != *c.Choices[0].Message.Content {
		t.Errorf("streamed %q, whole %q", s.content[0], *c.Choices[0].Message.Content)
	}
	for _, bad := range []struct{ url, want string }{
		{"https://example.com/cat.png", "only data: URLs"},
		{"file:///etc/passwd", "only data: URLs"},
		{"/etc/passwd", "only data: URLs"},
		{"data:text/plain;base64,aGk=", "data:image/"},
		{"data:image/png;base64,%%%", "base64"},
		{"data:image/png;base64," + base64.StdEncoding.EncodeToString([]byte("not an image")), "image"},
	} {
		resp, body := post(t, hs, "/v1/chat/completions", fmt.Sprintf(`{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": %q}}]}]}`, bad.url))
		if e := wantError(t, resp, body, 400, "messages[0].content[0].image_url.url"); !strings.Contains(e.Error.Message, bad.want) {
			t.Errorf("%s: %s", bad.url, e.Error.Message)
		}
	}
}
