package loaders

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/nlpodyssey/safetensors"
)

// A PEFT LoRA adapter folder as huggingface/peft's save_pretrained writes
// it: adapter_config.json (a LoraConfig) and adapter_model.safetensors,
// whose tensors are named base_model.model.<module>.lora_A.weight [r, in]
// and .lora_B.weight [out, r], without the adapter's name (PEFT's
// get_peft_model_state_dict strips it).
const (
	LoRAConfigFile  = "adapter_config.json"
	LoRAWeightsFile = "adapter_model.safetensors"
	// LoRAPrefix is what PEFT puts before a module's HF path.
	LoRAPrefix = "base_model.model."
)

// LoRAConfig is the part of PEFT's LoraConfig that changes a forward.
type LoRAConfig struct {
	R      int     `json:"r"`
	Alpha  float64 `json:"lora_alpha"`
	RSLoRA bool    `json:"use_rslora"`
	// Targets is target_modules as a list: a module is adapted when its
	// name equals an entry or ends with "." + entry. TargetRegex is
	// target_modules given as a string: a regular expression the whole
	// module name must match (PEFT's re.fullmatch). One of them is set.
	Targets     []string
	TargetRegex string
	// Exclude and ExcludeRegex are exclude_modules, matched the same way,
	// winning over the targets.
	Exclude      []string
	ExcludeRegex string
	FanInFanOut  bool `json:"fan_in_fan_out"`
	Dropout      float64
	// Raw is the whole file, to write back what was read.
	Raw map[string]json.RawMessage

	target, exclude *regexp.Regexp
}

// Scaling is what the low-rank product is multiplied by: lora_alpha / r,
// or lora_alpha / √r with rsLoRA (PEFT's LoraLayer.update_layer).
func (c *LoRAConfig) Scaling() float64 {
	if c.RSLoRA {
		return c.Alpha / math.Sqrt(float64(c.R))
	}
	return c.Alpha / float64(c.R)
}

// Adapts says whether the module named name (its HF path,
// model.layers.0.self_attn.q_proj) is one the adapter targets, as PEFT's
// check_target_module_exists decides.
func (c *LoRAConfig) Adapts(name string) bool {
	if matchModules(c.Exclude, c.exclude, name) {
		return false
	}
	return matchModules(c.Targets, c.target, name)
}

func matchModules(list []string, re *regexp.Regexp, name string) bool {
	if re != nil {
		return re.MatchString(name)
	}
	for _, t := range list {
		if name == t || strings.HasSuffix(name, "."+t) {
			return true
		}
	}
	return false
}

// loraInformational are LoraConfig keys that do not change an inference
// forward and may hold anything. The keys gozoo implements are decoded;
// every other key must hold its PEFT default (null, false, {} or []), so
// that an adapter relying on one is refused rather than applied wrongly.
var loraInformational = map[string]bool{
	"task_type": true, "base_model_name_or_path": true, "revision": true, "inference_mode": true,
	"init_lora_weights": true, "lora_dropout": true, "auto_mapping": true, "peft_version": true,
	"megatron_core": true, "qalora_group_size": true, "loftq_config": true, "eva_config": true,
	"corda_config": true, "runtime_config": true, "layers_pattern": true,
}

// ReadLoRAConfig reads and checks dir/adapter_config.json.
func ReadLoRAConfig(dir string) (*LoRAConfig, error) {
	path := filepath.Join(dir, LoRAConfigFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("LoRA adapter: %w", err)
	}
	c, err := ParseLoRAConfig(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseLoRAConfig decodes an adapter_config.json and refuses what gozoo
// does not apply (DoRA, trained biases, per-module ranks, layer subsets,
// modules_to_save, ...) by the key at fault.
func ParseLoRAConfig(b []byte) (*LoRAConfig, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, err
	}
	c := &LoRAConfig{Raw: raw}
	str := func(key string) (string, error) {
		var s string
		if v, ok := raw[key]; ok && !isNull(v) {
			if err := json.Unmarshal(v, &s); err != nil {
				return "", fmt.Errorf("%s: %w", key, err)
			}
		}
		return s, nil
	}
	if t, err := str("peft_type"); err != nil {
		return nil, err
	} else if t != "LORA" {
		return nil, fmt.Errorf("peft_type %q: only LORA adapters are supported", t)
	}
	if bias, err := str("bias"); err != nil {
		return nil, err
	} else if bias != "" && bias != "none" {
		return nil, fmt.Errorf("bias %q: adapters that train biases are not supported (only \"none\")", bias)
	}
	for key, dst := range map[string]any{"r": &c.R, "lora_alpha": &c.Alpha, "use_rslora": &c.RSLoRA, "fan_in_fan_out": &c.FanInFanOut, "lora_dropout": &c.Dropout} {
		if v, ok := raw[key]; ok && !isNull(v) {
			if err := json.Unmarshal(v, dst); err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
		}
	}
	if _, ok := raw["lora_alpha"]; !ok {
		c.Alpha = 8 // LoraConfig's default
	}
	if c.R <= 0 {
		return nil, fmt.Errorf("r = %d: the rank must be positive", c.R)
	}
	var err error
	if c.Targets, c.TargetRegex, c.target, err = moduleList(raw, "target_modules"); err != nil {
		return nil, err
	}
	if c.Targets == nil && c.target == nil {
		return nil, fmt.Errorf("target_modules is empty: PEFT's per-model defaults are not applied here, name the modules")
	}
	if c.Exclude, c.ExcludeRegex, c.exclude, err = moduleList(raw, "exclude_modules"); err != nil {
		return nil, err
	}
	known := map[string]bool{"peft_type": true, "bias": true, "r": true, "lora_alpha": true, "use_rslora": true,
		"fan_in_fan_out": true, "target_modules": true, "exclude_modules": true}
	for key, v := range raw {
		if known[key] || loraInformational[key] || isDefault(v) {
			continue
		}
		if key == "use_dora" {
			return nil, fmt.Errorf("use_dora is true: DoRA adapters are not supported")
		}
		return nil, fmt.Errorf("%s = %s: not supported (gozoo applies plain LoRA; this key must be null, false or empty)", key, bytes.TrimSpace(v))
	}
	return c, nil
}

// moduleList decodes target_modules or exclude_modules: a list of names,
// or a string that is a regular expression over whole module names.
func moduleList(raw map[string]json.RawMessage, key string) ([]string, string, *regexp.Regexp, error) {
	v, ok := raw[key]
	if !ok || isNull(v) {
		return nil, "", nil, nil
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		re, err := regexp.Compile(`^(?:` + s + `)$`)
		if err != nil {
			return nil, "", nil, fmt.Errorf("%s %q: %w", key, s, err)
		}
		return nil, s, re, nil
	}
	var list []string
	if err := json.Unmarshal(v, &list); err != nil {
		return nil, "", nil, fmt.Errorf("%s: neither a string nor a list of strings: %w", key, err)
	}
	if len(list) == 0 {
		return nil, "", nil, nil
	}
	slices.Sort(list)
	return list, "", nil, nil
}

// isDefault says whether a value is one of PEFT's neutral defaults.
func isDefault(v json.RawMessage) bool {
	switch string(bytes.TrimSpace(v)) {
	case "null", "false", "{}", "[]", `""`:
		return true
	}
	return false
}

// LoRATensor is one low-rank factor of an adapted module, widened to
// float32 in PyTorch's layout: A [r, in], B [out, r].
type LoRATensor struct {
	Name   string // as in the file
	Module string // the HF path of the adapted module
	Factor byte   // 'A' or 'B'
	Shape  []int
	Data   []float32
}

// LoRA is an adapter folder read whole: its config and its factors by
// file name (adapters are small; they are copied out of the file).
type LoRA struct {
	Dir     string
	Config  *LoRAConfig
	Tensors []LoRATensor
}

// ReadLoRA reads a PEFT LoRA folder. Every tensor of the file must be a
// lora_A or lora_B weight under base_model.model.; which modules they
// belong to and whether their shapes fit is the model's to check
// (graphs.Params.ApplyLoRA).
func ReadLoRA(dir string) (*LoRA, error) {
	c, err := ReadLoRAConfig(dir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, LoRAWeightsFile)
	f, err := OpenSafetensors(path)
	if err != nil {
		return nil, fmt.Errorf("LoRA adapter: %w", err)
	}
	defer f.Close()
	a := &LoRA{Dir: dir, Config: c}
	for _, name := range f.Names() {
		t := LoRATensor{Name: name}
		rest, ok := strings.CutPrefix(name, LoRAPrefix)
		switch {
		case ok && strings.HasSuffix(rest, ".lora_A.weight"):
			t.Module, t.Factor = strings.TrimSuffix(rest, ".lora_A.weight"), 'A'
		case ok && strings.HasSuffix(rest, ".lora_B.weight"):
			t.Module, t.Factor = strings.TrimSuffix(rest, ".lora_B.weight"), 'B'
		default:
			return nil, fmt.Errorf("%s: tensor %q is not a LoRA factor (base_model.model.<module>.lora_A.weight or .lora_B.weight)", path, name)
		}
		if t.Data, t.Shape, err = f.Float32s(name); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(t.Shape) != 2 {
			return nil, fmt.Errorf("%s: tensor %q has shape %v, want a matrix", path, name, t.Shape)
		}
		a.Tensors = append(a.Tensors, t)
	}
	return a, nil
}

// LoRAConfigJSON is the adapter_config.json PEFT's save_pretrained writes
// for a LoraConfig(r, lora_alpha, target_modules, use_rslora) of a causal
// LM, every other key at LoraConfig's default, so that PEFT loads it as
// it would its own.
func LoRAConfigJSON(r int, alpha float64, rslora bool, targets []string, base string) map[string]any {
	return map[string]any{
		"alpha_pattern": map[string]any{}, "auto_mapping": nil, "base_model_name_or_path": base,
		"bias": "none", "corda_config": nil, "eva_config": nil, "exclude_modules": nil,
		"fan_in_fan_out": false, "inference_mode": true, "init_lora_weights": true,
		"layer_replication": nil, "layers_pattern": nil, "layers_to_transform": nil,
		"loftq_config": map[string]any{}, "lora_alpha": alpha, "lora_bias": false,
		"lora_dropout": 0.0, "megatron_config": nil, "megatron_core": "megatron.core",
		"modules_to_save": nil, "peft_type": "LORA", "qalora_group_size": 16, "r": r,
		"rank_pattern": map[string]any{}, "revision": nil, "target_modules": slices.Sorted(slices.Values(targets)),
		"task_type": "CAUSAL_LM", "trainable_token_indices": nil, "use_dora": false,
		"use_qalora": false, "use_rslora": rslora,
	}
}

// JSON is the adapter_config.json of c (LoRAConfigJSON) with its targets
// as read: a list, or the regular expression string.
func (c *LoRAConfig) JSON(base string) map[string]any {
	m := LoRAConfigJSON(c.R, c.Alpha, c.RSLoRA, c.Targets, base)
	if c.TargetRegex != "" {
		m["target_modules"] = c.TargetRegex
	}
	if c.ExcludeRegex != "" {
		m["exclude_modules"] = c.ExcludeRegex
	} else if c.Exclude != nil {
		m["exclude_modules"] = c.Exclude
	}
	return m
}

// WriteLoRA writes a PEFT LoRA folder: config (LoRAConfigJSON, or a
// config read back: LoRAConfig.Raw) as adapter_config.json, and the
// factors as F32 in adapter_model.safetensors under their names, with
// PEFT's __metadata__ {"format": "pt"}. Each file is written to a
// temporary name and renamed, so a reader never sees half of one.
func WriteLoRA(dir string, config any, tensors []LoRATensor) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cfg, err := json.MarshalIndent(config, "", "  ")
	if err != nil {
		return fmt.Errorf("%s: %w", LoRAConfigFile, err)
	}
	views := map[string]safetensors.TensorView{}
	for _, t := range tensors {
		shape := make([]uint64, len(t.Shape))
		n := 1
		for i, d := range t.Shape {
			shape[i], n = uint64(d), n*d
		}
		if n != len(t.Data) {
			return fmt.Errorf("%s: tensor %q has %d values for shape %v", LoRAWeightsFile, t.Name, len(t.Data), t.Shape)
		}
		b := make([]byte, 4*n)
		for i, v := range t.Data {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		if views[t.Name], err = safetensors.NewTensorView(safetensors.F32, shape, b); err != nil {
			return fmt.Errorf("%s: tensor %q: %w", LoRAWeightsFile, t.Name, err)
		}
	}
	st, err := safetensors.Serialize(views, map[string]string{"format": "pt"})
	if err != nil {
		return fmt.Errorf("%s: %w", LoRAWeightsFile, err)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{LoRAWeightsFile, st}, {LoRAConfigFile, append(cfg, '\n')}} {
		tmp := filepath.Join(dir, "."+f.name+".tmp")
		if err := os.WriteFile(tmp, f.data, 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(dir, f.name)); err != nil {
			return err
		}
	}
	return nil
}
