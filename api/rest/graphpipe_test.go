package rest

import (
	"maps"
	"strings"
	"testing"

	"github.com/groveml/grove/servables"
)

func TestGraphPipeConfigsReadForestFlowPairs(t *testing.T) {
	for config, want := range map[string]map[string]string{
		"":                        nil,
		"user_id:u42":             {"user_id": "u42"},
		"User_Id: u42 , site:a:b": {"user_id": "u42", "site": "a:b"},
		"no-colon,,:empty-key,k:": {"k": ""},
		"k:first,k:second":        {"k": "second"},
	} {
		if got := graphPipeConfigs(config); !maps.Equal(got, want) {
			t.Errorf("graphPipeConfigs(%q) = %v, want %v", config, got, want)
		}
	}
}

func TestGraphPipeOutputsSelectedByNameInRequestOrder(t *testing.T) {
	outs := []servables.Tensor{{Name: "a"}, {Name: "b"}}
	got, err := selectGraphPipeOutputs(outs, []string{"b", "a"})
	if err != nil || len(got) != 2 || got[0].Name != "b" || got[1].Name != "a" {
		t.Errorf("select b, a: %v %v", got, err)
	}
	if got, err := selectGraphPipeOutputs(outs, nil); err != nil || len(got) != 2 || got[0].Name != "a" {
		t.Errorf("select none: %v %v", got, err)
	}
	if _, err := selectGraphPipeOutputs(outs, []string{"c"}); err == nil || !strings.Contains(err.Error(), `"c"`) || !strings.Contains(err.Error(), `"a", "b"`) {
		t.Errorf("unknown output: %v", err)
	}
}
