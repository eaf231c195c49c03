package main

import (
	"testing"

	"github.com/groveml/grove/grovepb"
)

func TestFirstValueOfEachTypedField(t *testing.T) {
	for want, tensor := range map[string]*grovepb.Tensor{
		"0.5":      {Datatype: "FLOAT", FloatData: []float32{0.5}},
		"7":        {Datatype: "INT64", Int64Data: []int64{7}},
		`"friend"`: {Datatype: "BYTES", BytesData: [][]byte{[]byte("friend"), []byte("foe")}},
		"-":        {Datatype: "BOOL", RawData: []byte{1}},
	} {
		if got := firstValue(tensor); got != want {
			t.Errorf("%s tensor: %s, want %s", tensor.GetDatatype(), got, want)
		}
	}
}
