package jsonscan

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// TestAppendStringEscapes: quotes, backslashes and control characters are
// escaped in the digits' case asked for; '/', HTML and non-ASCII text are
// not; invalid UTF-8 becomes U+FFFD.
func TestAppendStringEscapes(t *testing.T) {
	for _, tt := range []struct{ in, lower, upper string }{
		{"", `""`, `""`},
		{"plain", `"plain"`, `"plain"`},
		{`a"b\c`, `"a\"b\\c"`, `"a\"b\\c"`},
		{"\b\t\n\f\r", `"\b\t\n\f\r"`, `"\b\t\n\f\r"`},
		{"\x00\x1f\x0b", `"\u0000\u001f\u000b"`, `"\u0000\u001F\u000B"`},
		{"</script>&/", `"</script>&/"`, `"</script>&/"`},
		{"héllo ☃ 𝄞", `"héllo ☃ 𝄞"`, `"héllo ☃ 𝄞"`},
		{"a\xffb\xc3", "\"a\uFFFDb\uFFFD\"", "\"a\uFFFDb\uFFFD\""},
	} {
		if got := string(AppendString(nil, tt.in, HexLower)); got != tt.lower {
			t.Errorf("AppendString(%q, HexLower) = %s, want %s", tt.in, got, tt.lower)
		}
		if got := string(AppendString([]byte("x"), tt.in, HexUpper)); got != "x"+tt.upper {
			t.Errorf("AppendString(%q, HexUpper) = %s, want x%s", tt.in, got, tt.upper)
		}
	}
}

// FuzzAppendString: the output is always valid JSON, and decodes to s
// wherever s is valid UTF-8; Unescape reads it back alike.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"b", "\x00\x1f", "é\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := AppendString(nil, s, HexUpper)
		var back string
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("AppendString(%q) = %s: not JSON: %v", s, out, err)
		}
		if utf8.ValidString(s) && back != s {
			t.Fatalf("AppendString(%q) decodes to %q", s, back)
		}
	})
}
