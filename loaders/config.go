package loaders

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
)

// ReadConfig reads dir/config.json (at most MaxConfigFileBytes) and
// returns its model_type with the raw bytes, which the model's own config
// type decodes. Its sizes are checked as ModelType does.
func ReadConfig(dir string) (modelType string, data []byte, err error) {
	path := filepath.Join(dir, "config.json")
	data, err = readLimited(path, MaxConfigFileBytes)
	if err != nil {
		return "", nil, err
	}
	if modelType, err = ModelType(data); err != nil {
		return "", nil, fmt.Errorf("%s: %w", path, err)
	}
	return modelType, data, nil
}

// ModelType returns the model_type field of a config.json, after checking
// the config's sizes against the limits of CheckConfigSizes: every path
// to a model's config (zoo.ParseConfig, ReadConfig, OpenFolder) passes
// here before a family's parser allocates anything by those sizes.
func ModelType(data []byte) (string, error) {
	var head struct {
		ModelType string `json:"model_type"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return "", err
	}
	if head.ModelType == "" {
		return "", errors.New("no model_type field")
	}
	if err := CheckConfigSizes(data); err != nil {
		return "", err
	}
	return head.ModelType, nil
}

// IntList decodes a field HF allows to be an int or a list of ints, such as
// eos_token_id.
type IntList []int

// UnmarshalJSON accepts null, an int or a list of ints.
func (l *IntList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		*l = nil
		return nil
	}
	if len(b) > 0 && b[0] == '[' {
		var v []int
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*l = v
		return nil
	}
	var v int
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*l = IntList{v}
	return nil
}

// RoPE is one layer type's rotary embedding as transformers v5's
// modeling_rope_utils.py resolves it: the base, the scaling type and the
// parameters that type reads, with HF's defaults filled in. layers turns
// it into the float32 inv_freq table and cos/sin factor.
type RoPE struct {
	Type   string  // "default", "linear", "llama3", "yarn" or "dynamic"
	Theta  float64 // base
	Factor float64 // the scaling factor; 1 for "default"

	// llama3: the band edges of the smoothing, as divisors of
	// OriginalMaxPositions.
	LowFreqFactor, HighFreqFactor float64
	// OriginalMaxPositions (llama3, yarn) is the pretraining context,
	// original_max_position_embeddings.
	OriginalMaxPositions int
	// yarn: the rotation counts that bound the ramp, whether its ends are
	// floored and ceiled, and the factor on cos and sin (1 for every other
	// type).
	BetaFast, BetaSlow float64
	Truncate           bool
	AttentionFactor    float64
	// MaxPositions (dynamic) is max_position_embeddings: past it the base
	// grows with the sequence.
	MaxPositions int

	// FreqFactors are llama.cpp's rope_freqs.weight, per-pair divisors of
	// the default frequencies (how a GGUF stores llama3 scaling); nil
	// for a Hugging Face config.
	FreqFactors []float64
}

// RoPEFields are the config.json keys rotary settings come from: the legacy
// rope_theta + rope_scaling, or transformers v5's rope_parameters (one
// object, or one per layer type as Gemma3 writes it). Embed it in a model
// config and call Resolve.
type RoPEFields struct {
	RopeTheta      *float64        `json:"rope_theta"`
	RopeScaling    json.RawMessage `json:"rope_scaling"`
	RopeParameters json.RawMessage `json:"rope_parameters"`
	// OriginalMaxPositionEmbeddings is the top-level key some configs
	// (Phi3) carry; HF prefers it to the rope object's own.
	OriginalMaxPositionEmbeddings *int `json:"original_max_position_embeddings"`
	// RopeFreqs is not a Hugging Face key: the GGUF loader puts a file's
	// rope_freqs.weight here (see RoPE.FreqFactors).
	RopeFreqs []float64 `json:"rope_freqs"`
}

func isNull(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return len(b) == 0 || bytes.Equal(b, []byte("null"))
}

// ropeObject is one rope object's keys, each kept raw so that an absent
// key, a null and a value stay apart as HF tells them apart.
type ropeObject struct {
	where string // the config.json key it came from, for errors
	keys  map[string]json.RawMessage
}

// has tells whether key is present (null included).
func (o ropeObject) has(key string) bool { _, ok := o.keys[key]; return ok }

// num reads key as a number; ok is false when it is absent or null.
func (o ropeObject) num(key string) (v float64, ok bool, err error) {
	b, present := o.keys[key]
	if !present || isNull(b) {
		return 0, false, nil
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return 0, false, fmt.Errorf("config.json: %s.%s: %w", o.where, key, err)
	}
	return v, true, nil
}

// need reads a key the rope type requires.
func (o ropeObject) need(t, key string) (float64, error) {
	v, ok, err := o.num(key)
	if err == nil && !ok {
		err = fmt.Errorf("config.json: %s: rope type %q needs %s", o.where, t, key)
	}
	return v, err
}

func (o ropeObject) ropeType() (string, error) {
	for _, key := range []string{"rope_type", "type"} { // type: the older spelling
		if b, ok := o.keys[key]; ok && !isNull(b) {
			var t string
			if err := json.Unmarshal(b, &t); err != nil {
				return "", fmt.Errorf("config.json: %s.%s: %w", o.where, key, err)
			}
			return t, nil
		}
	}
	return "default", nil
}

func parseRopeObject(where string, b json.RawMessage) (ropeObject, error) {
	o := ropeObject{where: where}
	if err := json.Unmarshal(b, &o.keys); err != nil {
		return o, fmt.Errorf("config.json: %s: %w", where, err)
	}
	return o, nil
}

// Resolve returns the RoPE of layers of the given type ("full_attention",
// "sliding_attention"; "" when the model has one kind), falling back to
// defaultTheta when the config names no base. maxPositions is the
// config's max_position_embeddings, HF's default for
// original_max_position_embeddings and dynamic scaling's threshold.
func (f RoPEFields) Resolve(layerType string, defaultTheta float64, maxPositions int) (RoPE, error) {
	r := RoPE{Type: "default", Theta: defaultTheta, Factor: 1, AttentionFactor: 1}
	var obj *ropeObject
	flat := true // HF's "one global dict" case, where a top-level original_max_position_embeddings wins
	if !isNull(f.RopeParameters) {
		o, err := parseRopeObject("rope_parameters", f.RopeParameters)
		if err != nil {
			return r, err
		}
		// One object per layer type when every value is an object.
		perType := len(o.keys) > 0
		for _, v := range o.keys {
			if v = bytes.TrimSpace(v); len(v) == 0 || v[0] != '{' {
				perType = false
			}
		}
		if perType {
			b, ok := o.keys[layerType]
			if !ok {
				return r, fmt.Errorf("config.json: rope_parameters has no entry for layer type %q", layerType)
			}
			if o, err = parseRopeObject("rope_parameters."+layerType, b); err != nil {
				return r, err
			}
			flat = false
		}
		obj = &o
	} else if !isNull(f.RopeScaling) {
		o, err := parseRopeObject("rope_scaling", f.RopeScaling)
		if err != nil {
			return r, err
		}
		obj = &o
	}
	if f.RopeTheta != nil {
		r.Theta = *f.RopeTheta
	}
	if obj != nil {
		if err := r.fill(*obj, flat, f.OriginalMaxPositionEmbeddings, maxPositions); err != nil {
			return r, err
		}
	}
	if r.Theta <= 0 {
		return r, fmt.Errorf("config.json: rope theta must be positive, got %g", r.Theta)
	}
	if f.RopeFreqs != nil && (layerType == "" || layerType == "full_attention") {
		for i, v := range f.RopeFreqs {
			if !(v > 0) {
				return r, fmt.Errorf("config.json: rope_freqs[%d] = %g, want a positive divisor", i, v)
			}
		}
		r.FreqFactors = f.RopeFreqs
	}
	return r, nil
}

// fill reads the rope object o into r as HF's standardize_rope_params and
// the _compute_*_parameters functions read it.
func (r *RoPE) fill(o ropeObject, flat bool, topOriginal *int, maxPositions int) error {
	theta, ok, err := o.num("rope_theta")
	if err != nil {
		return err
	}
	if ok {
		r.Theta = theta
	}
	if p, ok, err := o.num("partial_rotary_factor"); err != nil {
		return err
	} else if ok && p != 1 {
		return fmt.Errorf("config.json: %s.partial_rotary_factor %g is not supported (only 1)", o.where, p)
	}
	t, err := o.ropeType()
	if err != nil {
		return err
	}
	r.Type = t
	switch t {
	case "default":
		return nil
	case "linear", "dynamic", "llama3", "yarn":
	default:
		return fmt.Errorf("config.json: %s: rope type %q is not supported (supported: default, linear, dynamic, llama3, yarn)", o.where, t)
	}
	// factor: required by every scaling type (yarn alone takes a null as
	// max_position_embeddings / original_max_position_embeddings).
	factor, hasFactor, err := o.num("factor")
	if err != nil {
		return err
	}
	if !o.has("factor") || (!hasFactor && t != "yarn") {
		return fmt.Errorf("config.json: %s: rope type %q needs factor", o.where, t)
	}
	if hasFactor && !(factor > 0) {
		return fmt.Errorf("config.json: %s.factor must be positive, got %g", o.where, factor)
	}
	r.Factor = factor
	if t == "llama3" || t == "yarn" {
		r.OriginalMaxPositions = maxPositions
		if v, ok, err := o.num("original_max_position_embeddings"); err != nil {
			return err
		} else if ok {
			r.OriginalMaxPositions = int(v)
		}
		if flat && topOriginal != nil {
			r.OriginalMaxPositions = *topOriginal
		}
		if r.OriginalMaxPositions <= 0 {
			return fmt.Errorf("config.json: %s.original_max_position_embeddings must be positive, got %d", o.where, r.OriginalMaxPositions)
		}
	}
	switch t {
	case "dynamic":
		if maxPositions <= 0 {
			return fmt.Errorf("config.json: dynamic rope scaling needs a positive max_position_embeddings, got %d", maxPositions)
		}
		r.MaxPositions = maxPositions
	case "llama3":
		if r.LowFreqFactor, err = o.need(t, "low_freq_factor"); err != nil {
			return err
		}
		if r.HighFreqFactor, err = o.need(t, "high_freq_factor"); err != nil {
			return err
		}
		if !(r.LowFreqFactor > 0) || !(r.HighFreqFactor > r.LowFreqFactor) {
			return fmt.Errorf("config.json: %s: llama3 wants 0 < low_freq_factor < high_freq_factor, got %g and %g", o.where, r.LowFreqFactor, r.HighFreqFactor)
		}
	case "yarn":
		return r.fillYarn(o, maxPositions)
	}
	return nil
}

// fillYarn reads yarn's optional keys with _compute_yarn_parameters'
// defaults: beta_fast 32 and beta_slow 1 (also for 0 or null), truncate
// true when absent, and the attention factor from factor and mscale.
func (r *RoPE) fillYarn(o ropeObject, maxPositions int) error {
	if r.Factor == 0 { // factor: null
		r.Factor = float64(maxPositions) / float64(r.OriginalMaxPositions)
	}
	var err error
	num := func(key string, def float64) float64 {
		v, ok, e := o.num(key)
		if e != nil && err == nil {
			err = e
		}
		if !ok || v == 0 {
			return def
		}
		return v
	}
	r.BetaFast, r.BetaSlow = num("beta_fast", 32), num("beta_slow", 1)
	mscale, mscaleAll := num("mscale", 0), num("mscale_all_dim", 0)
	if err != nil {
		return err
	}
	// get_mscale: 0.1·m·ln f + 1, or 1 when f <= 1.
	get := func(m float64) float64 {
		if r.Factor <= 1 {
			return 1
		}
		return 0.1*m*math.Log(r.Factor) + 1
	}
	if a, ok, err := o.num("attention_factor"); err != nil {
		return err
	} else if ok {
		if !(a > 0) {
			return fmt.Errorf("config.json: %s.attention_factor must be positive, got %g", o.where, a)
		}
		r.AttentionFactor = a
	} else if mscale != 0 && mscaleAll != 0 {
		r.AttentionFactor = get(mscale) / get(mscaleAll)
	} else {
		r.AttentionFactor = get(1)
	}
	// truncate: absent is true; HF tests it for truth, so null is false.
	r.Truncate = true
	if b, ok := o.keys["truncate"]; ok {
		if isNull(b) {
			r.Truncate = false
		} else if err := json.Unmarshal(b, &r.Truncate); err != nil {
			return fmt.Errorf("config.json: %s.truncate: %w", o.where, err)
		}
	}
	return nil
}
