package node

import (
	"testing"

	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/conf/modelconfig"
)

// TestFileBytes: a model's file size for placement is what a node that
// takes it loads: a file, a directory's files, and for a versioned entry
// only the versions its policy serves, not every version the bucket
// keeps (which would make a small model look too big for any node).
func TestFileBytes(t *testing.T) {
	cfg, err := modelconfig.Parse([]byte(`{"model_metadata": [
		{"model_path": "m.pt"},
		{"model_path": "dir/"},
		{"model_path": "v/", "version_policy": {"latest": {"num_versions": 2}}},
		{"model_path": "s/", "version_policy": {"specific": {"versions": [1]}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string][]bucket.Object{
		"m.pt": {{Name: "m.pt", Size: 7}, {Name: "m.pt.bak", Size: 100}},
		"dir/": {{Name: "dir/a", Size: 3}, {Name: "dir/sub/b", Size: 4}},
		"v/": {{Name: "v/1/model.pt", Size: 1000}, {Name: "v/2/model.pt", Size: 1000}, {Name: "v/3/model.pt", Size: 10},
			{Name: "v/3/" + bucket.ChecksumFile, Size: 64}, {Name: "v/4/", Size: 0}, {Name: "v/4/model.pt", Size: 20},
			{Name: "v/README", Size: 5}, {Name: "v/05/x", Size: 500}, {Name: "v/9/", Size: 0}},
		"s/": {{Name: "s/1/a", Size: 2}, {Name: "s/1/b", Size: 3}, {Name: "s/2/a", Size: 900}},
	}
	want := map[string]int64{"m.pt": 7, "dir/": 7, "v/": 30, "s/": 5}
	for _, m := range cfg.Models {
		if got := FileBytes(m, objs[m.Path]); got != want[m.Path] {
			t.Errorf("%s: %d bytes, want %d", m.Path, got, want[m.Path])
		}
	}
}
