package serve

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOpenAINodeClient drives the server with the official openai npm
// client (serve/clienttest: openai 6.x pinned by its package-lock.json,
// installed by `npm ci` there). It skips when node or the installed
// client is missing, except under CI=true.
func TestOpenAINodeClient(t *testing.T) {
	dir := filepath.Join("clienttest")
	node, err := exec.LookPath("node")
	_, missing := os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json"))
	if err != nil || missing != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("node (%v) or serve/clienttest/node_modules (%v) missing: run npm ci in serve/clienttest", err, missing)
		}
		t.Skip("node or serve/clienttest/node_modules missing: run `npm ci` in serve/clienttest")
	}
	m := load(t, qwen3Tiny)
	gr := &forcing{t: t, g: m.g, text: func(c Constraint) string {
		if c.Field == "tool_choice" {
			return "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
		}
		return `{"answer": 42}`
	}}
	_, hs := newServer(t, qwen3Tiny, Options{APIKey: "test-key", Parallel: 8, Grammar: gr, EmbedNormalize: true})
	_, busy := newServer(t, qwen3Tiny, Options{APIKey: "test-key", Parallel: 1, MaxQueue: -1})
	cmd := exec.Command(node, "--test", "--test-concurrency=1", "client.test.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "OPENAI_BASE_URL="+hs.URL+"/v1", "OPENAI_API_KEY=test-key", "GOZOO_MODEL=qwen3-tiny", "GOZOO_BUSY_URL="+busy.URL+"/v1")
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "# fail 0") {
		t.Fatalf("node --test:\n%s", out)
	}
	t.Logf("%s", out)
}
