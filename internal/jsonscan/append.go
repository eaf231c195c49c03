package jsonscan

import "unicode/utf8"

// The digits AppendString writes the \u00XX escape of a control character
// with: lower case as encoding/json writes them, upper case as rapidjson's
// Writer does (the B&A sidecar's answers).
const (
	HexLower = "0123456789abcdef"
	HexUpper = "0123456789ABCDEF"
)

// AppendString appends s to dst as a JSON string, the inverse of
// Unescape: '"', '\\' and control characters are escaped (\b \t \n \f \r,
// the others as \u00XX with hex's digits, HexLower or HexUpper);
// everything else, '/', HTML characters and non-ASCII text included, is
// written as it is, except invalid UTF-8, which becomes U+FFFD so that the
// output is always valid JSON text.
func AppendString(dst []byte, s string, hex string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || n != 1 {
				i += n
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\uFFFD"...)
			i++
			start = i
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
