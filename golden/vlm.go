package golden

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gozoo/gozoo/graphs"
	"github.com/gozoo/gozoo/loaders"
	"github.com/gozoo/gozoo/zoo"
	"github.com/gozoo/gozoo/zoo/idefics3"
)

// The SmolVLM cases (format: ../shared/golden/README-vlm.md) check one
// part each: the vision tower, the connector, the whole model with a
// KV-cached greedy decode, and the image processor.

type vlmMeta struct {
	Case string `json:"case"`
	Tol  struct {
		Atol       float64 `json:"atol"`
		LogitsAtol float64 `json:"logits_atol"`
		HiddenAtol float64 `json:"hidden_atol"`
		PixelAtol  float64 `json:"pixel_values_atol"`
	} `json:"recommended_tolerance"`
}

func runVLM(dir string, r *Result, o Options) error {
	b, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		return err
	}
	var m vlmMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("golden.json: %w", err)
	}
	g, err := loaders.OpenSafetensors(filepath.Join(dir, "golden.safetensors"))
	if err != nil {
		return err
	}
	defer g.Close()
	if m.Case == "smolvlm-preprocess" {
		return runPreprocess(dir, g, m, r)
	}
	loaded, err := zoo.Load(dir)
	if err != nil {
		return err
	}
	model, ok := loaded.(*idefics3.Model)
	if !ok {
		return fmt.Errorf("%s loads as %s, not idefics3", dir, loaded.ModelType())
	}
	model.SetDevice(o.Device)
	switch m.Case {
	case "smolvlm-vision":
		return runVision(model, g, m, r)
	case "smolvlm-connector":
		return runConnector(model, g, m, r)
	case "smolvlm-full":
		return runFull(model, g, m, r, o)
	}
	return fmt.Errorf("unknown SmolVLM case %q", m.Case)
}

// within compares got with the golden tensor name, recording the largest
// difference in *worst.
func within(g *loaders.SafetensorsFile, name string, got []float32, tol float64, worst *float64) error {
	want, shape, err := g.Float32s(name)
	if err != nil {
		return err
	}
	if len(got) != len(want) {
		return fmt.Errorf("%s: %d values, golden %v holds %d", name, len(got), shape, len(want))
	}
	d := MaxAbsDiff(got, want)
	*worst = max(*worst, d)
	if d > tol {
		return fmt.Errorf("%s differs by %.3g > %g", name, d, tol)
	}
	return nil
}

func runVision(m *idefics3.Model, g *loaders.SafetensorsFile, meta vlmMeta, r *Result) error {
	tol := meta.Tol.Atol
	if tol <= 0 {
		return fmt.Errorf("golden.json: no recommended_tolerance.atol")
	}
	r.Tolerance = tol
	px, shape, err := g.Float32s("pixel_values")
	if err != nil {
		return err
	}
	pos, _, err := g.ReadInt64("position_ids")
	if err != nil {
		return err
	}
	for i, p := range pos {
		if int(p) != i%len(pos) {
			return fmt.Errorf("golden position_ids %v are not the full-tile 0..%d", pos, len(pos)-1)
		}
	}
	f, err := m.EncodeImages(px, shape[0], graphs.HiddenStates+".*", idefics3.LastHiddenState)
	if err != nil {
		return err
	}
	checks := [][2]string{
		{"embeddings", graphs.HiddenStates + ".0"},
		{"hidden_after_layer0", graphs.HiddenStates + ".1"},
		{"hidden_after_layer1", graphs.HiddenStates + ".2"},
		{"last_hidden_state", idefics3.LastHiddenState},
	}
	for _, c := range checks {
		got, ok := f.Captured[c[1]]
		if !ok {
			return fmt.Errorf("%s was not captured", c[1])
		}
		if err := within(g, c[0], got.Data().([]float32), tol, &r.HiddenMaxAbs); err != nil {
			return err
		}
	}
	r.Pass = true
	r.Detail = fmt.Sprintf("vision hidden_max_abs=%.3g (embeddings, %d layers, last_hidden_state)", r.HiddenMaxAbs, len(checks)-2)
	return nil
}

func runConnector(m *idefics3.Model, g *loaders.SafetensorsFile, meta vlmMeta, r *Result) error {
	tol := meta.Tol.Atol
	if tol <= 0 {
		return fmt.Errorf("golden.json: no recommended_tolerance.atol")
	}
	r.Tolerance = tol
	feats, shape, err := g.Float32s("image_features")
	if err != nil {
		return err
	}
	f, err := m.Connect(feats, shape[0], idefics3.PixelShuffled)
	if err != nil {
		return err
	}
	shuffled, ok := f.Captured[idefics3.PixelShuffled]
	if !ok {
		return fmt.Errorf("%s was not captured", idefics3.PixelShuffled)
	}
	// The shuffle moves values: exact.
	var exact float64
	if err := within(g, "pixel_shuffled", shuffled.Data().([]float32), 0, &exact); err != nil {
		return err
	}
	if err := within(g, "image_hidden_states", f.Rows, tol, &r.HiddenMaxAbs); err != nil {
		return err
	}
	r.Pass = true
	r.Detail = fmt.Sprintf("pixel_shuffled exact, image_hidden_states_max_abs=%.3g", r.HiddenMaxAbs)
	return nil
}

func runFull(m *idefics3.Model, g *loaders.SafetensorsFile, meta vlmMeta, r *Result, o Options) error {
	tol, htol := meta.Tol.LogitsAtol, meta.Tol.HiddenAtol
	if tol <= 0 || htol <= 0 {
		return fmt.Errorf("golden.json: no recommended_tolerance.logits_atol or hidden_atol")
	}
	r.Tolerance = tol
	px, shape, err := g.Float32s("pixel_values")
	if err != nil {
		return err
	}
	if len(shape) != 5 || shape[0] != 1 {
		return fmt.Errorf("golden pixel_values has shape %v, want [1, tiles, C, H, W]", shape)
	}
	f, err := m.EncodeImages(px, shape[1], idefics3.LastHiddenState)
	if err != nil {
		return err
	}
	if err := within(g, "vision_last_hidden_state", f.Captured[idefics3.LastHiddenState].Data().([]float32), htol, &r.HiddenMaxAbs); err != nil {
		return err
	}
	if err := within(g, "image_hidden_states", f.Rows, htol, &r.HiddenMaxAbs); err != nil {
		return err
	}
	ids, err := readIDs(g, "input_ids")
	if err != nil {
		return err
	}
	in, err := m.Input(ids, f)
	if err != nil {
		return err
	}
	full, err := newRunner(m, graphs.Options{Capture: []string{graphs.HiddenStates + ".0"}}, o)
	if err != nil {
		return err
	}
	defer full.Close()
	rows, err := full.AppendAll(in)
	if err != nil {
		return err
	}
	embeds, ok := full.Captured(graphs.HiddenStates + ".0")
	if !ok {
		return fmt.Errorf("inputs_embeds (hidden_states.0) was not captured")
	}
	if err := within(g, "inputs_embeds", embeds.Data().([]float32), htol, &r.HiddenMaxAbs); err != nil {
		return err
	}
	if err := within(g, "logits", slices.Concat(rows...), tol, &r.LogitsMaxAbs); err != nil {
		return err
	}

	// KV-cached greedy decode: the prefill with the merge, then plain
	// token embeddings.
	greedy, err := readIDs(g, "greedy_ids")
	if err != nil {
		return err
	}
	stepLogits, _, err := g.Float32s("greedy_step_logits")
	if err != nil {
		return err
	}
	if err := greedyDecode(m, in, greedy, stepLogits, r, o); err != nil {
		return err
	}
	if r.LogitsMaxAbs > tol {
		return fmt.Errorf("greedy-step logits differ by %.3g > %g", r.LogitsMaxAbs, tol)
	}
	r.Pass = true
	return nil
}

// isVLMCase reports whether dir holds a SmolVLM case.
func isVLMCase(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		return false
	}
	var m struct {
		Case string `json:"case"`
	}
	return json.Unmarshal(b, &m) == nil && strings.HasPrefix(m.Case, "smolvlm-")
}
