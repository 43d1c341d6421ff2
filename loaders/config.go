package loaders

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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

// RoPE is one layer type's rotary embedding: base theta and the scaling HF
// applies to its inverse frequencies.
type RoPE struct {
	Type   string  // "default" or "linear"
	Theta  float64 // base
	Factor float64 // linear scaling factor; 1 for "default"
}

// RoPEFields are the config.json keys rotary settings come from: the legacy
// rope_theta + rope_scaling, or transformers v5's rope_parameters (one
// object, or one per layer type as Gemma3 writes it). Embed it in a model
// config and call Resolve.
type RoPEFields struct {
	RopeTheta      *float64        `json:"rope_theta"`
	RopeScaling    json.RawMessage `json:"rope_scaling"`
	RopeParameters json.RawMessage `json:"rope_parameters"`
}

type ropeObject struct {
	RopeType  string   `json:"rope_type"`
	Type      string   `json:"type"` // older spelling of rope_type
	RopeTheta *float64 `json:"rope_theta"`
	Factor    *float64 `json:"factor"`
}

func isNull(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return len(b) == 0 || bytes.Equal(b, []byte("null"))
}

// Resolve returns the RoPE of layers of the given type ("full_attention",
// "sliding_attention"; "" when the model has one kind), falling back to
// defaultTheta when the config names no base.
func (f RoPEFields) Resolve(layerType string, defaultTheta float64) (RoPE, error) {
	r := RoPE{Type: "default", Theta: defaultTheta, Factor: 1}
	var obj *ropeObject
	if !isNull(f.RopeParameters) {
		var flat ropeObject
		if err := json.Unmarshal(f.RopeParameters, &flat); err != nil {
			return r, fmt.Errorf("config.json: rope_parameters: %w", err)
		}
		if flat.RopeTheta != nil || flat.RopeType != "" || flat.Type != "" {
			obj = &flat
		} else {
			var per map[string]ropeObject
			if err := json.Unmarshal(f.RopeParameters, &per); err != nil {
				return r, fmt.Errorf("config.json: rope_parameters: %w", err)
			}
			p, ok := per[layerType]
			if !ok {
				return r, fmt.Errorf("config.json: rope_parameters has no entry for layer type %q", layerType)
			}
			obj = &p
		}
	} else {
		if f.RopeTheta != nil {
			r.Theta = *f.RopeTheta
		}
		if !isNull(f.RopeScaling) {
			var s ropeObject
			if err := json.Unmarshal(f.RopeScaling, &s); err != nil {
				return r, fmt.Errorf("config.json: rope_scaling: %w", err)
			}
			obj = &s
		}
	}
	if obj != nil {
		if obj.RopeTheta != nil {
			r.Theta = *obj.RopeTheta
		}
		t := obj.RopeType
		if t == "" {
			t = obj.Type
		}
		switch t {
		case "", "default":
		case "linear":
			if obj.Factor == nil || *obj.Factor <= 0 {
				return r, errors.New("config.json: linear rope scaling needs a positive factor")
			}
			r.Type, r.Factor = "linear", *obj.Factor
		default:
			return r, fmt.Errorf("config.json: rope type %q is not supported (supported: default, linear)", t)
		}
	}
	if r.Theta <= 0 {
		return r, fmt.Errorf("config.json: rope theta must be positive, got %g", r.Theta)
	}
	return r, nil
}
