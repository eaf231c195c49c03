package ba

import (
	"strings"
	"testing"

	"github.com/groveml/grove/internal/jsonscan"
)

// TestEverySyntaxErrorHasARapidjsonMessage checks that each kind of error
// the lexer reports has one of rapidjson's messages.
func TestEverySyntaxErrorHasARapidjsonMessage(t *testing.T) {
	for _, k := range jsonscan.Kinds() {
		if int(k) >= len(syntaxErrText) || !strings.HasSuffix(syntaxErrText[k], ".") || syntaxErrText[k] == syntaxErrText[jsonscan.OK] {
			t.Errorf("%v has no rapidjson message", k)
		}
	}
}
