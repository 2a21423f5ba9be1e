package elect

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// A ticket's record is JSON, read by every waiter behind it and by Query,
// and written at each change of its owner's request. It is written and
// read here without reflection: appendRecord makes, byte for byte, what
// encoding/json makes of a record (the format every leaderrun reads), and
// parseRecord reads the records leaderrun writes, handing anything else
// (escapes, unknown or differently spelled keys, null, numbers that are
// not plain integers) to encoding/json, so that what is accepted and how
// it decodes does not change. FuzzRecordCodec holds both to
// encoding/json.

// appendRecord appends the JSON encoding of r to b, as json.Marshal does.
func appendRecord(b []byte, r *record) ([]byte, error) {
	b = append(b, `{"pid":`...)
	b = strconv.AppendInt(b, int64(r.PID), 10)
	b = append(b, `,"mode":`...)
	b = appendString(b, r.Mode.String())
	b = append(b, `,"since":`...)
	var err error
	if b, err = appendTime(b, r.Since); err != nil {
		return nil, err
	}
	if len(r.Command) > 0 {
		b = append(b, `,"command":`...)
		b = appendStrings(b, r.Command)
	}
	if r.Steal {
		b = append(b, `,"steal":true`...)
	}
	if r.Epoch != 0 {
		b = append(b, `,"epoch":`...)
		b = strconv.AppendUint(b, r.Epoch, 10)
	}
	if !r.Granted.IsZero() {
		b = append(b, `,"granted":`...)
		if b, err = appendTime(b, r.Granted); err != nil {
			return nil, err
		}
	}
	if r.Deposed {
		b = append(b, `,"deposed":true`...)
	}
	if r.Polling {
		b = append(b, `,"polling":true`...)
	}
	if len(r.Labels) > 0 {
		b = append(b, `,"labels":`...)
		b = appendStrings(b, r.Labels)
	}
	return append(b, '}'), nil
}

// appendTime is time.Time's MarshalJSON (RFC 3339 with nanoseconds; an
// error for a year outside 0-9999).
func appendTime(b []byte, t time.Time) ([]byte, error) {
	b = append(b, '"')
	b, err := t.AppendText(b)
	if err != nil {
		return nil, err
	}
	return append(b, '"'), nil
}

func appendStrings(b []byte, ss []string) []byte {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string the way encoding/json does by
// default: <, > and & escaped for HTML, U+2028 and U+2029 escaped, and
// each byte of invalid UTF-8 replaced by U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// parseRecord decodes a record as json.Unmarshal does: through a scan of
// the form leaderrun writes, and through encoding/json for anything else.
func parseRecord(b []byte) (record, error) {
	if r, ok := scanRecord(b); ok {
		return r, nil
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return record{}, err
	}
	return r, nil
}

// recordScanner reads the plain JSON that appendRecord writes; any other
// form fails it (ok false), never with a result that encoding/json would
// not give.
type recordScanner struct {
	b   []byte
	i   int
	bad bool
}

func (s *recordScanner) space() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// byte consumes c (after white space) or fails.
func (s *recordScanner) byte(c byte) bool {
	s.space()
	if s.bad || s.i >= len(s.b) || s.b[s.i] != c {
		s.bad = true
		return false
	}
	s.i++
	return true
}

// peek reports whether the next byte (after white space) is c.
func (s *recordScanner) peek(c byte) bool {
	s.space()
	return !s.bad && s.i < len(s.b) && s.b[s.i] == c
}

// str reads a string in valid UTF-8 without control characters, with the
// escapes appendString writes: \" \\ \/ \b \f \n \r \t and \u00XX for
// an ASCII XX (commands often hold '<', '>' and '&', which it writes so).
// Anything else (\u for a rune beyond ASCII, invalid UTF-8) is left to
// encoding/json.
func (s *recordScanner) str() string {
	if !s.byte('"') {
		return ""
	}
	start := s.i
	var esc []byte // the string so far, once it has an escape
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			v := s.b[start:s.i]
			s.i++
			if esc != nil {
				v = append(esc, v...)
			}
			if !utf8.Valid(v) {
				s.bad = true
				return ""
			}
			return string(v)
		case c < 0x20:
			s.bad = true
			return ""
		case c == '\\':
			r, n := unescapeASCII(s.b[s.i:])
			if n == 0 {
				s.bad = true
				return ""
			}
			esc = append(append(esc, s.b[start:s.i]...), r)
			s.i += n
			start = s.i
			continue
		}
		s.i++
	}
	s.bad = true
	return ""
}

// unescapeASCII decodes the escape at the start of b to an ASCII byte and
// its length, or n 0 for one that str leaves to encoding/json.
func unescapeASCII(b []byte) (c byte, n int) {
	if len(b) < 2 {
		return 0, 0
	}
	switch b[1] {
	case '"', '\\', '/':
		return b[1], 2
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		if len(b) < 6 || b[2] != '0' || b[3] != '0' {
			return 0, 0
		}
		hi, lo := unhex(b[4]), unhex(b[5])
		if hi < 0 || hi > 7 || lo < 0 {
			return 0, 0
		}
		return byte(hi<<4 | lo), 6
	}
	return 0, 0
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// digits reads a JSON integer: an optional minus sign (when neg is
// allowed), then digits without a leading zero.
func (s *recordScanner) digits(neg bool) string {
	s.space()
	start := s.i
	if neg && s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	d := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	if s.i == d || s.b[d] == '0' && s.i-d > 1 {
		s.bad = true
		return ""
	}
	if s.i < len(s.b) {
		switch s.b[s.i] {
		case '.', 'e', 'E':
			s.bad = true // a float: encoding/json decides
			return ""
		}
	}
	return string(s.b[start:s.i])
}

func (s *recordScanner) boolean() bool {
	s.space()
	switch {
	case s.bad:
	case len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "true":
		s.i += 4
		return true
	case len(s.b)-s.i >= 5 && string(s.b[s.i:s.i+5]) == "false":
		s.i += 5
		return false
	}
	s.bad = true
	return false
}

func (s *recordScanner) strings() []string {
	if !s.byte('[') {
		return nil
	}
	out := []string{}
	if s.peek(']') {
		s.i++
		return out
	}
	for !s.bad {
		out = append(out, s.str())
		if s.peek(',') {
			s.i++
			continue
		}
		s.byte(']')
		break
	}
	return out
}

func (s *recordScanner) time() time.Time {
	v := s.str()
	var t time.Time
	if !s.bad && t.UnmarshalText([]byte(v)) != nil {
		s.bad = true
	}
	return t
}

func scanRecord(b []byte) (r record, ok bool) {
	s := &recordScanner{b: b}
	if !s.byte('{') {
		return record{}, false
	}
	if s.peek('}') {
		s.i++
	} else {
		for !s.bad {
			key := s.str()
			if !s.byte(':') {
				break
			}
			switch key {
			case "pid":
				n, err := strconv.Atoi(s.digits(true))
				if err != nil {
					s.bad = true
				}
				r.PID = n
			case "mode":
				switch s.str() {
				case "exclusive", "":
					r.Mode = Exclusive
				case "shared":
					r.Mode = Shared
				default:
					s.bad = true
				}
			case "since":
				r.Since = s.time()
			case "command":
				r.Command = s.strings()
			case "steal":
				r.Steal = s.boolean()
			case "epoch":
				n, err := strconv.ParseUint(s.digits(false), 10, 64)
				if err != nil {
					s.bad = true
				}
				r.Epoch = n
			case "granted":
				r.Granted = s.time()
			case "deposed":
				r.Deposed = s.boolean()
			case "polling":
				r.Polling = s.boolean()
			case "labels":
				r.Labels = s.strings()
			default:
				s.bad = true // unknown, or spelled otherwise: encoding/json
			}
			if s.peek(',') {
				s.i++
				continue
			}
			s.byte('}')
			break
		}
	}
	s.space()
	if s.bad || s.i != len(b) {
		return record{}, false
	}
	return r, true
}
