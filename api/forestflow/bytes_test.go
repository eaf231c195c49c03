package forestflow

import (
	"strings"
	"testing"

	"github.com/groveml/grove/servables"
)

func TestBytesOutputsAreStringsOrBase64Bytes(t *testing.T) {
	side, _ := servables.NewStringTensor("side", []int64{2, 1}, []string{"friend", "foe"})
	raw, _ := servables.NewStringTensor("raw", []int64{2}, []string{"\x00\xff", "ok"})
	out, err := AppendPrediction(nil, FQRV{Contract{"games", "arena", 1}, "v1"}, []servables.Tensor{side, raw})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"schema":[{"type":"String","fields":["side"]},{"type":"Bytes","fields":["raw"]}]`,
		`{"tensors":[{"String":{"data":["friend"]}},{"Byte":{"data":["AP8="]}}]}`,
		`{"tensors":[{"String":{"data":["foe"]}},{"Byte":{"data":["b2s="]}}]}`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("prediction %s\nlacks %s", out, want)
		}
	}
}
