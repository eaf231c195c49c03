package oip

import (
	"strings"
	"testing"

	"github.com/groveml/grove/internal/jsonscan"
)

// TestEverySyntaxErrorHasAMessage checks that each kind of error the lexer
// reports has a message of its own, which says where.
func TestEverySyntaxErrorHasAMessage(t *testing.T) {
	seen := map[string]jsonscan.Kind{}
	for _, k := range jsonscan.Kinds() {
		if int(k) >= len(syntaxText) {
			t.Errorf("%v has no entry in syntaxText", k)
			continue
		}
		s := jsonscan.Scanner{Buf: []byte("x"), Err: k}
		msg := syntaxError(&s).Msg
		if k != jsonscan.DocumentEmpty && (!strings.HasPrefix(msg, "malformed JSON at byte 0: ") || strings.HasSuffix(msg, ": ")) {
			t.Errorf("%v: %q", k, msg)
		}
		if other, dup := seen[msg]; dup {
			t.Errorf("%v and %v both say %q", other, k, msg)
		}
		seen[msg] = k
	}
}
