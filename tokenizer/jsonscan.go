package tokenizer

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonReader is a minimal JSON reader for the large parts of tokenizer.json
// (the vocabulary and the merges: hundreds of thousands of short strings,
// which encoding/json decodes several times slower). It is written by hand
// because the standard library has no allocation-free streaming reader.
// Small components are still decoded with encoding/json.
type jsonReader struct {
	data  []byte
	pos   int
	buf   []byte // unescaped string scratch
	depth int    // of the objects and arrays being read
}

// maxJSONDepth is the deepest nesting of objects and arrays read, that of
// serde_json (so of the Rust library). It keeps a hostile file from
// exhausting the stack and the component parsers (which decode each level
// of a Sequence again) from taking quadratic time.
const maxJSONDepth = 128

// enter counts one more level of nesting.
func (r *jsonReader) enter() error {
	if r.depth >= maxJSONDepth {
		return r.errorf("nested deeper than %d levels", maxJSONDepth)
	}
	r.depth++
	return nil
}

func (r *jsonReader) errorf(format string, args ...any) error {
	return fmt.Errorf("invalid JSON at offset %d: %s", r.pos, fmt.Sprintf(format, args...))
}

func (r *jsonReader) ws() {
	// Pretty-printed files indent with long runs of spaces.
	for r.pos+8 <= len(r.data) && binary.LittleEndian.Uint64(r.data[r.pos:]) == 0x2020202020202020 {
		r.pos += 8
	}
	for r.pos < len(r.data) {
		switch r.data[r.pos] {
		case ' ', '\t', '\n', '\r':
			r.pos++
		default:
			return
		}
	}
}

// peek skips white space and returns the next byte (0 at the end).
func (r *jsonReader) peek() byte {
	r.ws()
	if r.pos >= len(r.data) {
		return 0
	}
	return r.data[r.pos]
}

func (r *jsonReader) expect(c byte) error {
	if r.peek() != c {
		if r.pos >= len(r.data) {
			return r.errorf("unexpected end of JSON, want %q", c)
		}
		return r.errorf("want %q, found %q", c, r.data[r.pos])
	}
	r.pos++
	return nil
}

// str reads a string and returns its unescaped bytes, valid until the next
// call (they may alias the input).
func (r *jsonReader) str() ([]byte, error) {
	if err := r.expect('"'); err != nil {
		return nil, err
	}
	start := r.pos
	ascii := true
	for r.pos < len(r.data) {
		c := r.data[r.pos]
		switch {
		case c == '"':
			s := r.data[start:r.pos]
			r.pos++
			if !ascii && !utf8.Valid(s) {
				return nil, r.errorf("invalid UTF-8 in string")
			}
			return s, nil
		case c == '\\':
			return r.strEscaped(start)
		case c < 0x20:
			return nil, r.errorf("control character in string")
		case c >= utf8.RuneSelf:
			ascii = false
		}
		r.pos++
	}
	return nil, r.errorf("unterminated string")
}

func (r *jsonReader) strEscaped(start int) ([]byte, error) {
	b := append(r.buf[:0], r.data[start:r.pos]...)
	for r.pos < len(r.data) {
		c := r.data[r.pos]
		switch {
		case c == '"':
			r.pos++
			r.buf = b
			if !utf8.Valid(b) {
				return nil, r.errorf("invalid UTF-8 in string")
			}
			return b, nil
		case c < 0x20:
			return nil, r.errorf("control character in string")
		case c != '\\':
			b = append(b, c)
			r.pos++
			continue
		}
		if r.pos+1 >= len(r.data) {
			break
		}
		e := r.data[r.pos+1]
		r.pos += 2
		switch e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			c1, ok := r.hex4()
			if !ok {
				return nil, r.errorf("bad \\u escape")
			}
			if utf16.IsSurrogate(c1) {
				// A pair is decoded; a lone surrogate becomes U+FFFD, as
				// encoding/json does.
				c2 := rune(-1)
				if r.pos+1 < len(r.data) && r.data[r.pos] == '\\' && r.data[r.pos+1] == 'u' {
					save := r.pos
					r.pos += 2
					var ok2 bool
					if c2, ok2 = r.hex4(); !ok2 {
						return nil, r.errorf("bad \\u escape")
					}
					if d := utf16.DecodeRune(c1, c2); d != utf8.RuneError {
						b = utf8.AppendRune(b, d)
						continue
					}
					r.pos = save
				}
				b = utf8.AppendRune(b, utf8.RuneError)
				continue
			}
			b = utf8.AppendRune(b, c1)
		default:
			return nil, r.errorf("bad escape \\%c", e)
		}
	}
	return nil, r.errorf("unterminated string")
}

func (r *jsonReader) hex4() (rune, bool) {
	if r.pos+4 > len(r.data) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(r.data[r.pos:r.pos+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	r.pos += 4
	return rune(v), true
}

// integer reads a JSON number that must be an integer.
func (r *jsonReader) integer() (int64, error) {
	r.ws()
	start := r.pos
	for r.pos < len(r.data) {
		c := r.data[r.pos]
		if (c < '0' || c > '9') && c != '-' && c != '+' && c != '.' && c != 'e' && c != 'E' {
			break
		}
		r.pos++
	}
	v, err := strconv.ParseInt(string(r.data[start:r.pos]), 10, 64)
	if err != nil {
		r.pos = start
		return 0, r.errorf("want an integer")
	}
	return v, nil
}

// skip skips one value of any kind.
func (r *jsonReader) skip() error {
	switch c := r.peek(); c {
	case '"':
		_, err := r.str()
		return err
	case '{', '[':
		if err := r.enter(); err != nil {
			return err
		}
		var err error
		if c == '{' {
			err = r.skipObject()
		} else {
			err = r.skipArray()
		}
		r.depth--
		return err
	case 't', 'f', 'n':
		for _, lit := range []string{"true", "false", "null"} {
			if len(r.data)-r.pos >= len(lit) && string(r.data[r.pos:r.pos+len(lit)]) == lit {
				r.pos += len(lit)
				return nil
			}
		}
		return r.errorf("bad literal")
	case 0:
		return r.errorf("unexpected end of JSON")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			start := r.pos
			for r.pos < len(r.data) {
				c := r.data[r.pos]
				if (c < '0' || c > '9') && c != '-' && c != '+' && c != '.' && c != 'e' && c != 'E' {
					break
				}
				r.pos++
			}
			if _, err := strconv.ParseFloat(string(r.data[start:r.pos]), 64); err != nil {
				r.pos = start
				return r.errorf("bad number")
			}
			return nil
		}
		return r.errorf("unexpected %q", c)
	}
}

// skipObject skips an object, r.pos at its '{'.
func (r *jsonReader) skipObject() error {
	r.pos++
	if r.peek() == '}' {
		r.pos++
		return nil
	}
	for {
		if _, err := r.str(); err != nil {
			return err
		}
		if err := r.expect(':'); err != nil {
			return err
		}
		if err := r.skip(); err != nil {
			return err
		}
		if r.peek() == ',' {
			r.pos++
			continue
		}
		return r.expect('}')
	}
}

// skipArray skips an array, r.pos at its '['.
func (r *jsonReader) skipArray() error {
	r.pos++
	if r.peek() == ']' {
		r.pos++
		return nil
	}
	for {
		if err := r.skip(); err != nil {
			return err
		}
		if r.peek() == ',' {
			r.pos++
			continue
		}
		return r.expect(']')
	}
}

// object calls field for each key of an object; field must consume the
// value.
func (r *jsonReader) object(field func(key string) error) error {
	if err := r.expect('{'); err != nil {
		return err
	}
	if err := r.enter(); err != nil {
		return err
	}
	defer func() { r.depth-- }()
	if r.peek() == '}' {
		r.pos++
		return nil
	}
	for {
		k, err := r.str()
		if err != nil {
			return err
		}
		key := string(k)
		if err := r.expect(':'); err != nil {
			return err
		}
		if err := field(key); err != nil {
			return err
		}
		if r.peek() == ',' {
			r.pos++
			continue
		}
		return r.expect('}')
	}
}

// rawValue skips a value and returns its bytes.
func (r *jsonReader) rawValue() ([]byte, error) {
	r.ws()
	start := r.pos
	if err := r.skip(); err != nil {
		return nil, err
	}
	return r.data[start:r.pos], nil
}

// topLevel splits a JSON object into its fields' raw values. The fields
// named in inPlace are handed to their function instead, which reads the
// value from r.
func topLevel(data []byte, inPlace map[string]func(r *jsonReader) error) (map[string][]byte, error) {
	r := &jsonReader{data: data}
	fields := map[string][]byte{}
	var fieldErr error
	err := r.object(func(key string) error {
		if f := inPlace[key]; f != nil {
			fields[key] = nil
			if err := f(r); err != nil {
				fieldErr = err
				return err
			}
			return nil
		}
		v, err := r.rawValue()
		fields[key] = v
		return err
	})
	if fieldErr != nil {
		return nil, fieldErr
	}
	if err == nil && r.peek() != 0 {
		err = r.errorf("data after the top-level object")
	}
	if err != nil {
		return nil, err
	}
	return fields, nil
}
