package jinja

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The lexer follows jinja2's (lexer.py) rule for rule, because chat
// templates depend on its exact whitespace handling:
//
//   - newlines in the source are normalised to \n and one trailing newline
//     is dropped (keep_trailing_newline=False);
//   - "{%-", "{{-", "{#-" strip all whitespace before the tag, "-%}",
//     "-}}", "-#}" all whitespace after it;
//   - trim_blocks: a block or comment tag eats one newline right after it;
//   - lstrip_blocks: spaces and tabs between the start of a line and a
//     block or comment tag are removed ("{%+" opts out);
//   - inside a tag, the closing "%}" / "}}" only counts when brackets are
//     balanced, so {{ {'a': 1}}} works.

type tokType int

const (
	tEOF tokType = iota
	tData
	tVarBegin
	tVarEnd
	tBlockBegin
	tBlockEnd
	tName
	tString
	tInt
	tFloat
	tOp
)

type token struct {
	typ tokType
	val string // name, operator, data or decoded string literal
	num Value  // int64 or float64 for number tokens
	pos int    // byte offset into the normalised source
}

func (t token) describe() string {
	switch t.typ {
	case tEOF:
		return "end of template"
	case tData:
		return "template data / text"
	case tVarBegin:
		return "begin of print statement"
	case tVarEnd:
		return "end of print statement"
	case tBlockBegin:
		return "begin of statement block"
	case tBlockEnd:
		return "end of statement block"
	case tString:
		return "string"
	case tInt:
		return "integer"
	case tFloat:
		return "float"
	}
	return t.val
}

type lexer struct {
	src          string
	name         string
	pos          int
	toks         []token
	lineStarting bool // the previous match ended with a newline (jinja2's line_starting)
}

// normalizeSource applies jinja2's newline handling before lexing.
func normalizeSource(src string) string {
	src = strings.ReplaceAll(src, "\r\n", "\n")
	src = strings.ReplaceAll(src, "\r", "\n")
	return strings.TrimSuffix(src, "\n")
}

func tokenize(name, src string) ([]token, error) {
	lx := &lexer{src: src, name: name, lineStarting: true}
	if err := lx.run(); err != nil {
		return nil, err
	}
	lx.toks = append(lx.toks, token{typ: tEOF, pos: len(src)})
	return lx.toks, nil
}

func (lx *lexer) errAt(pos int, format string, args ...any) error {
	line, col := lineCol(lx.src, pos)
	return &SyntaxError{Name: lx.name, Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

// lineCol turns a byte offset into a 1-based line and character column.
func lineCol(src string, pos int) (int, int) {
	if pos > len(src) {
		pos = len(src)
	}
	line := 1 + strings.Count(src[:pos], "\n")
	start := strings.LastIndexByte(src[:pos], '\n') + 1
	return line, 1 + utf8.RuneCountInString(src[start:pos])
}

// pyIsSpace is Python's str.isspace for one character (also what the
// regex \s matches in a str pattern): Go's unicode.IsSpace plus the
// information separators U+001C..U+001F.
func pyIsSpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}

func skipSpace(s string, i int) int {
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !pyIsSpace(r) {
			break
		}
		i += n
	}
	return i
}

func rstripSpace(s string) string { return strings.TrimRightFunc(s, pyIsSpace) }

func (lx *lexer) run() error {
	src := lx.src
	for lx.pos < len(src) {
		// Root state: find the next tag opener.
		start := lx.pos
		open := -1
		for i := start; i+1 < len(src); i++ {
			if src[i] == '{' && (src[i+1] == '{' || src[i+1] == '%' || src[i+1] == '#') {
				open = i
				break
			}
		}
		if open < 0 {
			lx.emitData(src[start:], start)
			return nil
		}
		kind := src[open+1]
		after := open + 2
		sign := byte(0)
		if after < len(src) && (src[after] == '-' || src[after] == '+') {
			sign = src[after]
			after++
		}
		text := src[start:open]

		// {% raw %} is recognised by the root rule itself.
		rawEnd := -1
		if kind == '%' {
			rawEnd = matchRawBegin(src, after)
		}

		// Whitespace control for the text before the tag.
		if sign == '-' {
			text = rstripSpace(text)
		} else if sign != '+' && kind != '{' {
			lpos := strings.LastIndexByte(text, '\n') + 1
			if lpos > 0 || lx.lineStarting {
				rest := text[lpos:]
				if rest != "" && strings.TrimLeftFunc(rest, pyIsSpace) == "" {
					text = text[:lpos]
				}
			}
		}
		lx.emitData(text, start)

		switch {
		case rawEnd >= 0:
			lx.lineStarting = src[rawEnd-1] == '\n'
			if err := lx.lexRaw(rawEnd, open); err != nil {
				return err
			}
		case kind == '#':
			if err := lx.lexComment(after, open); err != nil {
				return err
			}
		default:
			lx.lineStarting = false
			if err := lx.lexTag(kind, after, open); err != nil {
				return err
			}
		}
	}
	return nil
}

func (lx *lexer) emitData(text string, pos int) {
	if text != "" {
		lx.toks = append(lx.toks, token{typ: tData, val: text, pos: pos})
	}
}

// matchRawBegin matches `\s*raw\s*(-%}\s*|%})` at i (after "{%" and its
// sign) and returns the end of the match, or -1.
func matchRawBegin(src string, i int) int {
	i = skipSpace(src, i)
	if !strings.HasPrefix(src[i:], "raw") {
		return -1
	}
	i = skipSpace(src, i+3)
	switch {
	case strings.HasPrefix(src[i:], "-%}"):
		return skipSpace(src, i+3)
	case strings.HasPrefix(src[i:], "%}"):
		return i + 2
	}
	return -1
}

// blockEnd matches the end of a block or comment tag at i: "+%}" (no
// trimming), "-%}" plus all following whitespace, or "%}" plus one
// newline (trim_blocks). close is '%' or '#'. It returns the end of the
// match or -1.
func blockEnd(src string, i int, close byte) int {
	end := string([]byte{close, '}'})
	switch {
	case strings.HasPrefix(src[i:], "+"+end):
		return i + 3
	case strings.HasPrefix(src[i:], "-"+end):
		return skipSpace(src, i+3)
	case strings.HasPrefix(src[i:], end):
		i += 2
		if i < len(src) && src[i] == '\n' {
			i++
		}
		return i
	}
	return -1
}

func (lx *lexer) lexComment(i, open int) error {
	for ; i < len(lx.src); i++ {
		if end := blockEnd(lx.src, i, '#'); end >= 0 {
			lx.lineStarting = lx.src[end-1] == '\n'
			lx.pos = end
			return nil
		}
	}
	return lx.errAt(open, "Missing end of comment tag")
}

func (lx *lexer) lexRaw(i, open int) error {
	src := lx.src
	for j := i; j+1 < len(src); j++ {
		if src[j] != '{' || src[j+1] != '%' {
			continue
		}
		k := j + 2
		sign := byte(0)
		if k < len(src) && (src[k] == '-' || src[k] == '+') {
			sign = src[k]
			k++
		}
		k = skipSpace(src, k)
		if !strings.HasPrefix(src[k:], "endraw") {
			continue
		}
		end := blockEnd(src, skipSpace(src, k+6), '%')
		if end < 0 {
			continue
		}
		text := src[i:j]
		if sign == '-' {
			text = rstripSpace(text)
		} else if sign != '+' {
			lpos := strings.LastIndexByte(text, '\n') + 1
			if rest := text[lpos:]; (lpos > 0 || lx.lineStarting) && rest != "" && strings.TrimLeftFunc(rest, pyIsSpace) == "" {
				text = text[:lpos]
			}
		}
		lx.emitData(text, i)
		lx.lineStarting = src[end-1] == '\n'
		lx.pos = end
		return nil
	}
	return lx.errAt(open, "Missing end of raw directive")
}

// operators, longest first so that "**" wins over "*".
var operators = []string{
	"//", "**", "==", "!=", ">=", "<=",
	"+", "-", "/", "*", "%", "~", "[", "]", "(", ")", "{", "}",
	">", "<", "=", ".", ":", "|", ",", ";",
}

func (lx *lexer) lexTag(kind byte, i, open int) error {
	src := lx.src
	begin, endTok := tBlockBegin, tBlockEnd
	if kind == '{' {
		begin, endTok = tVarBegin, tVarEnd
	}
	lx.toks = append(lx.toks, token{typ: begin, pos: open})
	var balance []byte
	for i < len(src) {
		// The closing tag only counts outside brackets.
		if len(balance) == 0 {
			end := -1
			if kind == '%' {
				end = blockEnd(src, i, '%')
			} else if strings.HasPrefix(src[i:], "-}}") {
				end = skipSpace(src, i+3)
			} else if strings.HasPrefix(src[i:], "}}") {
				end = i + 2
			}
			if end >= 0 {
				lx.toks = append(lx.toks, token{typ: endTok, pos: i})
				lx.lineStarting = src[end-1] == '\n'
				lx.pos = end
				return nil
			}
		}
		r, size := utf8.DecodeRuneInString(src[i:])
		switch {
		case pyIsSpace(r):
			i = skipSpace(src, i)
		case r >= '0' && r <= '9':
			tok, n, err := lexNumber(src, i)
			if err != nil {
				return lx.errAt(i, "%s", err.Error())
			}
			lx.toks = append(lx.toks, tok)
			i = n
		case r == '_' || unicode.IsLetter(r):
			j := i + size
			for j < len(src) {
				r2, n2 := utf8.DecodeRuneInString(src[j:])
				if r2 != '_' && !unicode.IsLetter(r2) && !unicode.IsDigit(r2) && !unicode.Is(unicode.Mn, r2) && !unicode.Is(unicode.Mc, r2) && !unicode.Is(unicode.Nl, r2) {
					break
				}
				j += n2
			}
			lx.toks = append(lx.toks, token{typ: tName, val: src[i:j], pos: i})
			i = j
		case r == '\'' || r == '"':
			j, ok := scanString(src, i)
			if !ok {
				return lx.errAt(i, "unexpected char %s at %d", strRepr(string(r)), i)
			}
			s, err := unescapePython(src[i+1 : j-1])
			if err != nil {
				return lx.errAt(i, "%s", err.Error())
			}
			lx.toks = append(lx.toks, token{typ: tString, val: s, pos: i})
			i = j
		default:
			op := ""
			for _, o := range operators {
				if strings.HasPrefix(src[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				return lx.errAt(i, "unexpected char %s at %d", strRepr(string(r)), i)
			}
			switch op {
			case "{":
				balance = append(balance, '}')
			case "(":
				balance = append(balance, ')')
			case "[":
				balance = append(balance, ']')
			case "}", ")", "]":
				if len(balance) == 0 {
					return lx.errAt(i, "unexpected '%s'", op)
				}
				want := balance[len(balance)-1]
				balance = balance[:len(balance)-1]
				if want != op[0] {
					return lx.errAt(i, "unexpected '%s', expected '%c'", op, want)
				}
			}
			lx.toks = append(lx.toks, token{typ: tOp, val: op, pos: i})
			i += len(op)
		}
	}
	if kind == '%' {
		return lx.errAt(open, "unexpected end of template, expected 'end of statement block'.")
	}
	return lx.errAt(open, "unexpected end of template, expected 'end of print statement'.")
}

// scanString finds the end of a quoted literal starting at i; backslash
// escapes the next character, and literals may span lines.
func scanString(src string, i int) (int, bool) {
	q := src[i]
	for j := i + 1; j < len(src); j++ {
		switch src[j] {
		case '\\':
			j++
		case q:
			return j + 1, true
		}
	}
	return 0, false
}

// lexNumber matches jinja2's float and integer rules at i: floats need
// digits on both sides of the dot or an exponent; integers may be 0b, 0o,
// 0x or decimal, with single underscores between digits.
func lexNumber(src string, i int) (token, int, error) {
	digits := func(j int, ok func(byte) bool) int {
		// (\d+_)*\d+ style run
		k := j
		for k < len(src) {
			if ok(src[k]) {
				k++
			} else if src[k] == '_' && k > j && k+1 < len(src) && ok(src[k+1]) {
				k++
			} else {
				break
			}
		}
		return k
	}
	isDec := func(c byte) bool { return c >= '0' && c <= '9' }
	// float: (?<!\.) digits ( (\.digits)? e[+-]?digits | \.digits )
	if i == 0 || src[i-1] != '.' {
		j := digits(i, isDec)
		k := j
		frac := false
		if k+1 < len(src) && src[k] == '.' && isDec(src[k+1]) {
			k = digits(k+1, isDec)
			frac = true
		}
		exp := false
		if k < len(src) && (src[k] == 'e' || src[k] == 'E') {
			m := k + 1
			if m < len(src) && (src[m] == '+' || src[m] == '-') {
				m++
			}
			if m < len(src) && isDec(src[m]) {
				k = digits(m, isDec)
				exp = true
			}
		}
		if frac || exp {
			text := strings.ReplaceAll(src[i:k], "_", "")
			f, err := strconv.ParseFloat(text, 64)
			if err != nil {
				return token{}, 0, fmt.Errorf("invalid float literal %q", text)
			}
			return token{typ: tFloat, num: f, val: text, pos: i}, k, nil
		}
	}
	// integer
	if src[i] == '0' && i+1 < len(src) {
		base := 0
		var ok func(byte) bool
		switch src[i+1] {
		case 'b', 'B':
			base, ok = 2, func(c byte) bool { return c == '0' || c == '1' }
		case 'o', 'O':
			base, ok = 8, func(c byte) bool { return c >= '0' && c <= '7' }
		case 'x', 'X':
			base, ok = 16, func(c byte) bool {
				return isDec(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
			}
		}
		if base != 0 {
			j := i + 2
			if j < len(src) && src[j] == '_' {
				j++
			}
			k := digits(j, ok)
			if k > j {
				text := strings.ReplaceAll(src[i+2:k], "_", "")
				n, err := strconv.ParseInt(text, base, 64)
				if err != nil {
					return token{}, 0, fmt.Errorf("integer literal %q out of range", src[i:k])
				}
				return token{typ: tInt, num: n, val: src[i:k], pos: i}, k, nil
			}
		}
	}
	var k int
	if src[i] == '0' {
		// 0(_?0)*
		k = i + 1
		for k < len(src) {
			if src[k] == '0' {
				k++
			} else if src[k] == '_' && k+1 < len(src) && src[k+1] == '0' {
				k += 2
			} else {
				break
			}
		}
	} else {
		k = digits(i, isDec)
	}
	text := strings.ReplaceAll(src[i:k], "_", "")
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return token{}, 0, fmt.Errorf("integer literal %q out of range", text)
	}
	return token{typ: tInt, num: n, val: text, pos: i}, k, nil
}

// unescapePython decodes a string literal body as jinja2 does
// (.encode("ascii", "backslashreplace").decode("unicode-escape")): Python's
// escapes are honoured, unknown ones such as \d are kept as written.
func unescapePython(s string) (string, error) {
	if strings.IndexByte(s, '\\') < 0 {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			i++
			continue
		}
		e := s[i+1]
		i += 2
		switch e {
		case '\n':
			// line continuation: both characters vanish
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			n := int(e - '0')
			for k := 0; k < 2 && i < len(s) && s[i] >= '0' && s[i] <= '7'; k++ {
				n = n*8 + int(s[i]-'0')
				i++
			}
			b.WriteRune(rune(n))
		case 'x', 'u', 'U':
			width := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if i+width > len(s) {
				return "", fmt.Errorf("truncated \\%cXX escape", e)
			}
			n, err := strconv.ParseUint(s[i:i+width], 16, 32)
			if err != nil {
				return "", fmt.Errorf("truncated \\%cXX escape", e)
			}
			if n > unicode.MaxRune {
				return "", fmt.Errorf("illegal Unicode character")
			}
			b.WriteRune(rune(n))
			i += width
		default:
			if e >= utf8.RuneSelf {
				// A backslash before a non-ASCII character: jinja2 first
				// backslash-escapes the character, so the literal backslash
				// pairs with that escape's own backslash and the escape
				// text stays (e.g. "\é" becomes `\xe9`).
				r, n := utf8.DecodeRuneInString(s[i-1:])
				i += n - 1
				b.WriteByte('\\')
				switch {
				case r < 0x100:
					b.WriteString("x" + hex2(int(r)))
				case r < 0x10000:
					b.WriteString("u" + hexN(int(r), 4))
				default:
					b.WriteString("U" + hexN(int(r), 8))
				}
				continue
			}
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	return b.String(), nil
}
