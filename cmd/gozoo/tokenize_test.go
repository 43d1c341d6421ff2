package main

import (
	"github.com/gozoo/gozoo/internal/testfiles"

	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type tokCase struct {
	Text               string `json:"text"`
	IDs                []int  `json:"ids"`
	IDsWithSpecial     []int  `json:"ids_with_special"`
	Decoded            string `json:"decoded"`
	DecodedSkipSpecial string `json:"decoded_skip_special"`
}

// tokRefDir finds a reference tokenizer (see testfiles.Fixture).
func tokRefDir(t *testing.T, name string) string {
	t.Helper()
	dir := testfiles.Fixture(t, "tokenizers", name)
	testfiles.Require(t, filepath.Join(dir, "cases.jsonl"))
	return dir
}

func readTokCases(t *testing.T, dir string) ([]byte, []tokCase) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "cases.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []tokCase
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var c tokCase
		if err := json.Unmarshal(line, &c); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, c)
	}
	return data, cases
}

// runCmd runs a subcommand with in-memory streams.
func runCmd(name string, args []string, stdin string) (status int, stdout, stderr string) {
	var out, errb bytes.Buffer
	status = commands[name].run(args, strings.NewReader(stdin), &out, &errb)
	return status, out.String(), errb.String()
}

func outputLines(t *testing.T, out string) []map[string]json.RawMessage {
	t.Helper()
	var lines []map[string]json.RawMessage
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("output line %q is not a JSON object: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	return lines
}

// TestEncodeDecodeCommands runs encode and decode over reference cases:
// byte-level BPE (qwen3, cohere, smol-synthetic) and SentencePiece-style
// BPE with a BOS (mistral). The tokenizer package checks all six shared
// tokenizers' cases; gemma3's and llama3's large vocabularies only made
// this command-level check slow.
func TestEncodeDecodeCommands(t *testing.T) {
	for _, name := range []string{"qwen3", "mistral", "cohere", "smol-synthetic"} {
		t.Run(name, func(t *testing.T) {
			dir := tokRefDir(t, name)
			input, cases := readTokCases(t, dir)
			var pass [4]int

			// encode reads the cases file itself: extra fields are ignored.
			for k, special := range []bool{false, true} {
				args := []string{"--tokenizer", dir}
				if special {
					args = append(args, "--special")
				}
				status, out, errs := runCmd("encode", args, string(input))
				if status != 0 {
					t.Fatalf("encode %v: status %d: %s", args, status, errs)
				}
				lines := outputLines(t, out)
				if len(lines) != len(cases) {
					t.Fatalf("encode: %d output lines for %d inputs", len(lines), len(cases))
				}
				for i, c := range cases {
					var got []int
					if err := json.Unmarshal(lines[i]["ids"], &got); err != nil || got == nil {
						t.Errorf("case %d: bad output %v", i, lines[i])
						continue
					}
					want := c.IDs
					if special {
						want = c.IDsWithSpecial
					}
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Errorf("case %d special=%v: got %v, want %v", i, special, got, want)
						continue
					}
					pass[k]++
				}
			}

			for k, skip := range []bool{false, true} {
				var in strings.Builder
				for _, c := range cases {
					ids := c.IDs
					if skip {
						ids = c.IDsWithSpecial
					}
					b, _ := json.Marshal(map[string][]int{"ids": ids})
					in.Write(b)
					in.WriteByte('\n')
				}
				args := []string{"--tokenizer", dir}
				if skip {
					args = append(args, "--skip-special")
				}
				status, out, errs := runCmd("decode", args, in.String())
				if status != 0 {
					t.Fatalf("decode %v: status %d: %s", args, status, errs)
				}
				lines := outputLines(t, out)
				if len(lines) != len(cases) {
					t.Fatalf("decode: %d output lines for %d inputs", len(lines), len(cases))
				}
				for i, c := range cases {
					var got string
					if err := json.Unmarshal(lines[i]["text"], &got); err != nil {
						t.Errorf("case %d: bad output %v", i, lines[i])
						continue
					}
					want := c.Decoded
					if skip {
						want = c.DecodedSkipSpecial
					}
					if got != want {
						t.Errorf("case %d skip=%v: got %q, want %q", i, skip, got, want)
						continue
					}
					pass[2+k]++
				}
			}
			n := len(cases)
			t.Logf("%s via gozoo encode/decode: ids %d/%d, ids_with_special %d/%d, decoded %d/%d, decoded_skip_special %d/%d",
				name, pass[0], n, pass[1], n, pass[2], n, pass[3], n)
		})
	}
}

func TestEncodeDecodeBadLines(t *testing.T) {
	dir := tokRefDir(t, "qwen3")
	tests := []struct {
		cmd, input string
		args       []string
		want       []string // per output line: the key it must hold, or "error:<text it must contain>"
	}{
		{
			cmd:   "encode",
			input: "{\"text\":\"Hello\"}\nnot json\n\n{\"text\": 5}\n{\"txt\":\"x\"}\n{\"text\":\" world\"}",
			want:  []string{"ids", "error:line 2: invalid JSON", "error:line 4: \"text\" must be a string", "error:line 5:", "ids"},
		},
		{
			cmd:   "decode",
			input: "{\"ids\":[9707]}\n{\"ids\":[-1]}\n{\"ids\":[151669]}\n{\"ids\":\"x\"}\n[1]\n{\"ids\":[]}\n",
			want:  []string{"text", "error:line 2: tokenizer: decode: id -1", "error:line 3: tokenizer: decode: id 151669", "error:line 4: \"ids\" must be", "error:line 5:", "text"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.cmd, func(t *testing.T) {
			status, out, errs := runCmd(tc.cmd, append([]string{"--tokenizer", dir}, tc.args...), tc.input)
			if status != 1 {
				t.Errorf("status %d, want 1", status)
			}
			lines := outputLines(t, out)
			if len(lines) != len(tc.want) {
				t.Fatalf("%d output lines, want %d:\n%s", len(lines), len(tc.want), out)
			}
			for i, w := range tc.want {
				if msg, ok := strings.CutPrefix(w, "error:"); ok {
					var e string
					if json.Unmarshal(lines[i]["error"], &e) != nil || !strings.Contains(e, msg) {
						t.Errorf("line %d: got %v, want an error containing %q", i+1, lines[i], msg)
					}
					if !strings.Contains(errs, msg) {
						t.Errorf("stderr %q lacks %q", errs, msg)
					}
					continue
				}
				if _, ok := lines[i][w]; !ok {
					t.Errorf("line %d: got %v, want %q", i+1, lines[i], w)
				}
			}
		})
	}
}

func TestTokenizerCommandErrors(t *testing.T) {
	tmp := t.TempDir()
	write := func(sub, content string) string {
		d := filepath.Join(tmp, sub)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if content != "" {
			if err := os.WriteFile(filepath.Join(d, "tokenizer.json"), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	missing := write("missing", "")
	malformed := write("malformed", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [`)
	unknown := write("unknown", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "Foo"}}`)
	badConfig := write("badconfig", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}`)
	if err := os.WriteFile(filepath.Join(badConfig, "tokenizer_config.json"), []byte(`{"bos_token": `), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		status int
		want   []string
	}{
		{"missing file", []string{"--tokenizer", missing}, 1, []string{filepath.Join(missing, "tokenizer.json")}},
		{"malformed file", []string{"--tokenizer", malformed}, 1, []string{filepath.Join(malformed, "tokenizer.json"), "invalid JSON"}},
		{"unknown component", []string{"--tokenizer", unknown}, 1, []string{filepath.Join(unknown, "tokenizer.json"), `pre_tokenizer: unknown type "Foo"`}},
		{"malformed config", []string{"--tokenizer", badConfig}, 1, []string{filepath.Join(badConfig, "tokenizer_config.json")}},
		{"no --tokenizer", nil, 2, []string{"--tokenizer DIR is required"}},
		{"stray argument", []string{"--tokenizer", missing, "extra"}, 2, []string{`unexpected argument "extra"`}},
	}
	for _, tc := range tests {
		for _, cmd := range []string{"encode", "decode"} {
			t.Run(cmd+"/"+tc.name, func(t *testing.T) {
				status, out, errs := runCmd(cmd, tc.args, `{"text":"a","ids":[0]}`+"\n")
				if status != tc.status {
					t.Errorf("status %d, want %d (stderr %q)", status, tc.status, errs)
				}
				if out != "" {
					t.Errorf("unexpected output %q", out)
				}
				for _, w := range tc.want {
					if !strings.Contains(errs, w) {
						t.Errorf("stderr %q lacks %q", errs, w)
					}
				}
			})
		}
	}
}
