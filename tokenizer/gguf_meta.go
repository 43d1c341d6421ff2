package tokenizer

import (
	"fmt"
	"math"
)

// Typed access to a GGUF metadata map. A missing key is (zero, false, nil);
// a key of the wrong type is an error that names it.

func metaString(meta map[string]any, key string) (string, bool, error) {
	v, ok := meta[key]
	if !ok {
		return "", false, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", false, fmt.Errorf("%s: want a string, got %s", key, metaTypeName(v))
	}
	return s, true, nil
}

func metaBool(meta map[string]any, key string) (bool, bool, error) {
	v, ok := meta[key]
	if !ok {
		return false, false, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, false, fmt.Errorf("%s: want a bool, got %s", key, metaTypeName(v))
	}
	return b, true, nil
}

// metaInt reads an integer of any integer type.
func metaInt(meta map[string]any, key string) (int64, bool, error) {
	v, ok := meta[key]
	if !ok {
		return 0, false, nil
	}
	n, ok := anyInt(v)
	if !ok {
		return 0, false, fmt.Errorf("%s: want an integer, got %s", key, metaTypeName(v))
	}
	return n, true, nil
}

// anyInt converts an integer of any Go integer type. A uint64 beyond
// int64 saturates (it is out of any vocabulary's range either way).
func anyInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int8:
		return int64(x), true
	case uint8:
		return int64(x), true
	case int16:
		return int64(x), true
	case uint16:
		return int64(x), true
	case int32:
		return int64(x), true
	case uint32:
		return int64(x), true
	case int64:
		return x, true
	case uint64:
		if x > math.MaxInt64 {
			return math.MaxInt64, true
		}
		return int64(x), true
	case int:
		return int64(x), true
	case uint:
		if uint64(x) > math.MaxInt64 {
			return math.MaxInt64, true
		}
		return int64(x), true
	}
	return 0, false
}

// metaStrings reads an array of strings ([]string, or []any of strings).
func metaStrings(meta map[string]any, key string) ([]string, bool, error) {
	v, ok := meta[key]
	if !ok {
		return nil, false, nil
	}
	switch x := v.(type) {
	case []string:
		return x, true, nil
	case []any:
		out := make([]string, len(x))
		for i, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, false, fmt.Errorf("%s[%d]: want a string, got %s", key, i, metaTypeName(e))
			}
			out[i] = s
		}
		return out, true, nil
	}
	return nil, false, fmt.Errorf("%s: want an array of strings, got %s", key, metaTypeName(v))
}

// metaInts reads an array of integers of any integer element type.
func metaInts(meta map[string]any, key string) ([]int64, bool, error) {
	v, ok := meta[key]
	if !ok {
		return nil, false, nil
	}
	var out []int64
	switch x := v.(type) {
	case []int32:
		out = widen(x)
	case []uint32:
		out = widen(x)
	case []int8:
		out = widen(x)
	case []uint8:
		out = widen(x)
	case []int16:
		out = widen(x)
	case []uint16:
		out = widen(x)
	case []int64:
		out = x
	case []uint64:
		out = make([]int64, len(x))
		for i, e := range x {
			out[i], _ = anyInt(e)
		}
	case []int:
		out = widen(x)
	case []any:
		out = make([]int64, len(x))
		for i, e := range x {
			n, ok := anyInt(e)
			if !ok {
				return nil, false, fmt.Errorf("%s[%d]: want an integer, got %s", key, i, metaTypeName(e))
			}
			out[i] = n
		}
	default:
		return nil, false, fmt.Errorf("%s: want an array of integers, got %s", key, metaTypeName(v))
	}
	return out, true, nil
}

func widen[T int8 | uint8 | int16 | uint16 | int32 | uint32 | int](x []T) []int64 {
	out := make([]int64, len(x))
	for i, e := range x {
		out[i] = int64(e)
	}
	return out
}

func metaTypeName(v any) string {
	if v == nil {
		return "nothing"
	}
	return fmt.Sprintf("%T", v)
}
