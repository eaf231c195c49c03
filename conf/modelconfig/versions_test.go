package modelconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// sum2 is a second valid checksum.
const sum2 = "2222222222222222222222222222222222222222222222222222222222222222"

func TestVersionPolicySelect(t *testing.T) {
	found := []int64{3, 1, 10, 2}
	for _, tc := range []struct {
		name   string
		policy VersionPolicy
		found  []int64
		want   []int64
	}{
		{"latest 1", VersionPolicy{Kind: VersionsLatest, Latest: 1}, found, []int64{10}},
		{"latest 2, numerically not as text", VersionPolicy{Kind: VersionsLatest, Latest: 2}, found, []int64{3, 10}},
		{"latest more than found", VersionPolicy{Kind: VersionsLatest, Latest: 9}, found, []int64{1, 2, 3, 10}},
		{"latest of none", VersionPolicy{Kind: VersionsLatest, Latest: 2}, nil, nil},
		{"specific found and missing", VersionPolicy{Kind: VersionsSpecific, Versions: []int64{3, 7, 1}}, found, []int64{1, 3}},
		{"specific none found", VersionPolicy{Kind: VersionsSpecific, Versions: []int64{7}}, found, nil},
		{"all", VersionPolicy{Kind: VersionsAll}, found, []int64{1, 2, 3, 10}},
		{"unknown kind selects nothing", VersionPolicy{Kind: "newest"}, found, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.policy.Select(tc.found)
			if len(got) != len(tc.want) || len(got) > 0 && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Select(%v) = %v, want %v", tc.found, got, tc.want)
			}
		})
	}
	if !reflect.DeepEqual(found, []int64{3, 1, 10, 2}) {
		t.Errorf("Select changed its argument: %v", found)
	}
}

func TestModelExpand(t *testing.T) {
	entry := Model{Path: "ads/pcvr/", WarmUpJSON: `{"request":[]}`, EvictionGracePeriod: 5 * time.Second,
		Serving:          ServingOptions{Replicas: 2},
		Signature:        Signature{Inputs: []TensorSignature{{Name: "x", Datatype: "FP32", Shape: []int64{-1, 8}}}},
		VersionPolicy:    &VersionPolicy{Kind: VersionsLatest, Latest: 2},
		VersionChecksums: map[int64]string{3: sum1, 1: sum2}}
	got := entry.Expand([]int64{1, 2, 3})
	var want []Model
	for _, v := range []struct {
		n   int64
		sum string
	}{{2, ""}, {3, sum1}} {
		m := entry
		m.Path = "ads/pcvr/" + map[int64]string{2: "2/", 3: "3/"}[v.n]
		m.Checksum, m.VersionPolicy, m.VersionChecksums, m.VersionOf, m.Version = v.sum, nil, nil, "ads/pcvr/", v.n
		want = append(want, m)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Expand:\n got %+v\nwant %+v", got, want)
	}
	if got[1].EntryPath() != "ads/pcvr/" || entry.EntryPath() != "ads/pcvr/" {
		t.Errorf("EntryPath: %q, %q", got[1].EntryPath(), entry.EntryPath())
	}
	if got := entry.Expand(nil); got != nil {
		t.Errorf("Expand with no versions found = %+v, want none", got)
	}
	plain := Model{Path: "pctr/", Checksum: sum1}
	if got := plain.Expand([]int64{1}); !reflect.DeepEqual(got, []Model{plain}) {
		t.Errorf("Expand of an entry without a policy = %+v, want the entry itself", got)
	}
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]int64{"1": 1, "10": 10, "9223372036854775807": 1<<63 - 1,
		"0": 0, "-1": 0, "+2": 0, "03": 0, "v4": 0, "1e3": 0, "": 0, " 1": 0, "99999999999999999999": 0} {
		if got, ok := ParseVersion(in); got != want || ok != (want > 0) {
			t.Errorf("ParseVersion(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
}

func TestParseModelConfigReadsVersionPolicies(t *testing.T) {
	c, err := Parse([]byte(`{"model_metadata": [
	  {"model_path": "a/", "version_policy": {"latest": {"num_versions": 2}}, "version_checksums": {"3": "` + sum1 + `"}},
	  {"modelPath": "b/", "versionPolicy": {"specific": {"versions": [1, "3"]}}, "versionChecksums": {"1": "` + sum2 + `", "3": "` + sum1 + `"}},
	  {"model_path": "c/", "version_policy": {"all": {}}},
	  {"model_path": "d/", "version_policy": null, "version_checksums": {}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []Model{
		{Path: "a/", VersionPolicy: &VersionPolicy{Kind: VersionsLatest, Latest: 2}, VersionChecksums: map[int64]string{3: sum1}},
		{Path: "b/", VersionPolicy: &VersionPolicy{Kind: VersionsSpecific, Versions: []int64{1, 3}}, VersionChecksums: map[int64]string{1: sum2, 3: sum1}},
		{Path: "c/", VersionPolicy: &VersionPolicy{Kind: VersionsAll}},
		{Path: "d/"},
	}
	if !reflect.DeepEqual(c.Models, want) {
		t.Errorf("got  %+v\nwant %+v", c.Models, want)
	}
	if !c.Models[0].IsVersioned() || c.Models[3].IsVersioned() {
		t.Error("IsVersioned is wrong")
	}
}

func TestParseModelConfigVersionErrors(t *testing.T) {
	for _, tc := range []struct {
		name, models, want string
	}{
		{"not a directory", `{"model_path": "a", "version_policy": {"all": {}}}`,
			`model_metadata[0].model_path: versioned model "a": a versioned entry's model_path is the directory of its versions and must end in "/" ("a/")`},
		{"checksum with a policy", `{"model_path": "a/", "checksum": "` + sum1 + `", "version_policy": {"all": {}}}`,
			`model_metadata[0].checksum: versioned model "a/": checksum does not apply to a versioned entry; give each version's checksum in version_checksums`},
		{"version_checksums without a policy", `{"model_path": "a/", "version_checksums": {"1": "` + sum1 + `"}}`,
			`model_metadata[0].version_checksums: model "a/": version_checksums needs a version_policy`},
		{"latest 0", `{"model_path": "a/", "version_policy": {"latest": {"num_versions": 0}}}`,
			`model_metadata[0].version_policy.latest.num_versions: 0 is out of range 1..2147483647`},
		{"latest without num_versions", `{"model_path": "a/", "version_policy": {"latest": {}}}`,
			`model_metadata[0].version_policy.latest.num_versions: versioned model "a/": latest needs num_versions ≥ 1, got 0`},
		{"specific empty", `{"model_path": "a/", "version_policy": {"specific": {"versions": []}}}`,
			`model_metadata[0].version_policy.specific.versions: versioned model "a/": specific needs at least one version`},
		{"specific zero", `{"model_path": "a/", "version_policy": {"specific": {"versions": [1, 0]}}}`,
			`model_metadata[0].version_policy.specific.versions[1]: 0 is out of range 1..9223372036854775807`},
		{"specific twice", `{"model_path": "a/", "version_policy": {"specific": {"versions": [3, 1, 3]}}}`,
			`model_metadata[0].version_policy.specific.versions[2]: versioned model "a/": version 3 is listed twice`},
		{"two policies", `{"model_path": "a/", "version_policy": {"all": {}, "latest": {"num_versions": 1}}}`,
			`model_metadata[0].version_policy: give exactly one of latest, specific or all, got "all" and "latest"`},
		{"empty policy", `{"model_path": "a/", "version_policy": {}}`,
			`model_metadata[0].version_policy: expected one of latest, specific or all, got an empty object`},
		{"empty key", `{"model_path": "a/", "version_policy": {"": {}}}`,
			`model_metadata[0].version_policy: expected one of latest, specific or all, got an empty key`},
		{"unknown policy", `{"model_path": "a/", "version_policy": {"newest": {}}}`,
			`model_metadata[0].version_policy: versioned model "a/": unknown version_policy "newest"; the policies are latest, specific or all`},
		{"checksum key not a number", `{"model_path": "a/", "version_policy": {"all": {}}, "version_checksums": {"v3": "` + sum1 + `"}}`,
			`model_metadata[0].version_checksums: key "v3" is not a version number`},
		{"checksum key with a leading zero", `{"model_path": "a/", "version_policy": {"all": {}}, "version_checksums": {"03": "` + sum1 + `"}}`,
			`model_metadata[0].version_checksums: key "03" is not a version number`},
		{"checksum key zero", `{"model_path": "a/", "version_policy": {"all": {}}, "version_checksums": {"0": "` + sum1 + `"}}`,
			`key "0" is not a version number`},
		{"bad version checksum", `{"model_path": "a/", "version_policy": {"all": {}}, "version_checksums": {"2": "abc"}}`,
			`model_metadata[0].version_checksums["2"]: versioned model "a/": version 2: "abc" has 3 characters`},
		{"empty version checksum", `{"model_path": "a/", "version_policy": {"all": {}}, "version_checksums": {"2": ""}}`,
			`model_metadata[0].version_checksums["2"]: versioned model "a/": version 2: the checksum is empty`},
		{"version checksum not a string", `{"model_path": "a/", "version_policy": {"all": {}}, "version_checksums": {"2": 5}}`,
			`line 1`},
		{"a version listed too", `{"model_path": "pcvr/", "version_policy": {"all": {}}}, {"model_path": "pcvr/3/"}`,
			`model_metadata[1].model_path: "pcvr/3/" is inside the directory of versioned model "pcvr/" (model_metadata[0])`},
		{"a version listed first", `{"model_path": "pcvr/3/"}, {"model_path": "pcvr/", "version_policy": {"all": {}}}`,
			`model_metadata[1].model_path: "pcvr/3/" is inside the directory of versioned model "pcvr/" (model_metadata[1]), whose versions are listed by its version_policy; remove one of the two entries (model_metadata[0] and model_metadata[1] overlap)`},
		{"a file under the directory", `{"model_path": "pcvr/", "version_policy": {"all": {}}}, {"model_path": "pcvr/extra.pt"}`,
			`"pcvr/extra.pt" is inside the directory of versioned model "pcvr/"`},
		{"versioned inside a directory entry", `{"model_path": "ads/"}, {"model_path": "ads/pcvr/", "version_policy": {"all": {}}}`,
			`model_metadata[1].model_path: versioned model "ads/pcvr/" (model_metadata[1]) is inside the directory of model "ads/"`},
		{"a file named as the directory", `{"model_path": "pcvr", "checksum": "` + sum1 + `"}, {"model_path": "pcvr/", "version_policy": {"all": {}}}`,
			`model_metadata[1].model_path: "pcvr" and versioned model "pcvr/" (model_metadata[1]) are both OIP model "pcvr": its versions/{v} would address either; rename one of the two entries (model_metadata[0] and model_metadata[1] overlap)`},
		{"two versioned nested", `{"model_path": "a/", "version_policy": {"all": {}}}, {"model_path": "a/1/", "version_policy": {"all": {}}}`,
			`"a/1/" is inside the directory of versioned model "a/"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkParseError(t, `{"model_metadata": [`+tc.models+`]}`, tc.want)
		})
	}
}

func TestParseModelConfigAcceptsVersionedNeighbours(t *testing.T) {
	// Prefixes that are not directories of each other do not overlap, and
	// entries without a policy may nest as before.
	if _, err := Parse([]byte(`{"model_metadata": [
	  {"model_path": "pcvr/", "version_policy": {"all": {}}}, {"model_path": "pcvr2/"}, {"model_path": "pcvr_v1/"},
	  {"model_path": "m/"}, {"model_path": "m/1/"}]}`)); err != nil {
		t.Fatal(err)
	}
}

func TestParseModelConfigLetsAContractNameAVersionedEntry(t *testing.T) {
	c, err := Parse([]byte(`{"model_metadata": [{"model_path": "pcvr/", "version_policy": {"latest": {"num_versions": 2}}}],
	  "contracts": [{"organization": "ads", "project": "pcvr", "contract_number": 1, "servables": [{"release_version": "v", "model_path": "pcvr/"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Contracts[0].Servables[0].ModelPath != "pcvr/" {
		t.Errorf("servable %+v", c.Contracts[0].Servables[0])
	}
}

func TestParseModelConfigLetsAContractNameAVersionOfAVersionedEntry(t *testing.T) {
	doc := func(paths ...string) string {
		var svs []string
		for i, p := range paths {
			svs = append(svs, fmt.Sprintf(`{"release_version": "r%d", "model_path": %q}`, i, p))
		}
		return `{"model_metadata": [{"model_path": "pcvr/", "version_policy": {"all": {}}}, {"model_path": "plain/"}],
		  "contracts": [{"organization": "ads", "project": "pcvr", "contract_number": 1, "servables": [` + strings.Join(svs, ",") + `]}]}`
	}
	c, err := Parse([]byte(doc("pcvr/2/", "pcvr/3/")))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Contracts[0].Servables[1].ModelPath; got != "pcvr/3/" {
		t.Errorf("servable 1 serves %q", got)
	}
	for _, bad := range []string{"pcvr/03/", "pcvr/x/", "pcvr/3", "pcvr/0/", "plain/3/", "other/3/", "pcvr/3/4/"} {
		checkParseError(t, doc(bad), fmt.Sprintf("model_path %q is not listed in model_metadata, nor a version", bad))
	}
}

func TestModelConfigMarshalJSONWritesVersionPolicies(t *testing.T) {
	c := Config{Models: []Model{
		{Path: "a/", VersionPolicy: &VersionPolicy{Kind: VersionsLatest, Latest: 2}, VersionChecksums: map[int64]string{10: sum1, 3: sum2}},
		{Path: "b/", VersionPolicy: &VersionPolicy{Kind: VersionsSpecific, Versions: []int64{3, 1}}},
		{Path: "c/", VersionPolicy: &VersionPolicy{Kind: VersionsAll}},
	}}
	got, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model_metadata":[{"model_path":"a/","version_policy":{"latest":{"num_versions":2}},"version_checksums":{"10":"` + sum1 + `","3":"` + sum2 + `"}},` +
		`{"model_path":"b/","version_policy":{"specific":{"versions":[3,1]}}},{"model_path":"c/","version_policy":{"all":{}}}]}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	back, err := Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, &c) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, &c)
	}
}

// checkParseError fails unless Parse refuses data with a *Error containing want.
func checkParseError(t *testing.T, data, want string) {
	t.Helper()
	_, err := Parse([]byte(data))
	if err == nil {
		t.Fatalf("no error, want %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
	var ce *Error
	if !errors.As(err, &ce) {
		t.Errorf("error %T is not a *Error", err)
	}
}
