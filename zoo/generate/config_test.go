package generate

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseGenerationConfig(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	i := func(v int) *int { return &v }
	yes := true
	for _, tc := range []struct {
		name    string
		data    []byte // nil: the file is absent
		want    *GenerationConfig
		wantErr bool
	}{
		{"absent", nil, nil, false},
		{"sampling and an eos list", []byte(`{"do_sample": true, "temperature": 0.6, "top_k": 20, "top_p": 0.95, "eos_token_id": [1, 2]}`),
			&GenerationConfig{DoSample: &yes, Temperature: f(0.6), TopK: i(20), TopP: f(0.95), EOSTokenID: []int{1, 2}}, false},
		{"one eos id and other keys", []byte(`{"eos_token_id": 7, "max_new_tokens": 9, "transformers_version": "4.51"}`),
			&GenerationConfig{EOSTokenID: []int{7}, MaxNewTokens: i(9)}, false},
		{"empty object", []byte(`{}`), &GenerationConfig{}, false},
		{"empty file", []byte{}, nil, true},
		{"not JSON", []byte(`{`), nil, true},
		{"wrong type", []byte(`{"top_k": "20"}`), nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join("ckpt", "generation_config.json")
			got, err := ParseGenerationConfig(tc.data, path)
			if tc.wantErr {
				if err == nil || !strings.HasPrefix(err.Error(), path+": ") {
					t.Fatalf("error %v, want one naming %s", err, path)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}

			// ReadGenerationConfig reads the same file to the same value.
			dir := t.TempDir()
			if tc.data != nil {
				if err := os.WriteFile(filepath.Join(dir, "generation_config.json"), tc.data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			read, err := ReadGenerationConfig(dir)
			if err != nil || !reflect.DeepEqual(read, tc.want) {
				t.Errorf("ReadGenerationConfig: %+v, %v; want %+v", read, err, tc.want)
			}
		})
	}
}
