package modelconfig

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// checkConfigError fails t unless err is a *Error whose message contains want.
func checkConfigError(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %q", want)
	}
	var ce *Error
	if !errors.As(err, &ce) {
		t.Errorf("error %T is not a *Error: %v", err, err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
}

// defaultServableLogging is the logging of a servable given none.
var defaultServableLogging = ServableLogging{Level: LogLevelNone, SampleRate: 1, KeyFeaturesSeparator: "."}

// twoContracts is a config with contracts ads/pctr/1 (v1 on a/, v2 on b/)
// and ads/pcvr/1 (v1 on a/), and model c/ in no contract.
const twoContracts = `{"model_metadata": [{"model_path": "a/", "checksum": "` + sum1 + `"}, {"model_path": "b/"}, {"model_path": "c/"}],
 "contracts": [
  {"organization": "ads", "project": "pctr", "contract_number": 1, "router": "latest", "expiration": {"keep_latest": 2},
   "servables": [{"release_version": "v1", "model_path": "a/"}, {"release_version": "v2", "model_path": "b/", "shadow": {}}]},
  {"organization": "ads", "project": "pcvr", "contract_number": 1,
   "servables": [{"release_version": "v1", "model_path": "a/"}]}]}`

// parseConfig parses a model config or fails t.
func parseConfig(t *testing.T, data string) *Config {
	t.Helper()
	c, err := Parse([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// release is what AddServable takes: a release of the contract Contract
// names, the model it serves, and the settings of a contract it creates.
type release struct {
	Model            Model
	Contract         Contract
	Servable         ContractServable
	ContractSettings *ContractSettings
}

// newRelease returns release rv of contract o/p/n on model path, with the
// default settings.
func newRelease(org, project string, n int, rv, path string) *release {
	return &release{
		Model:    Model{Path: path},
		Contract: Contract{Organization: org, Project: project, Number: n},
		Servable: ContractServable{ReleaseVersion: rv, ModelPath: path, PhaseIn: PhaseIn{Kind: PhaseInImmediate}, Logging: defaultServableLogging},
	}
}

// pctrV2 is release 2.0 of a new contract ads/pctr/3 on a new model
// pctr_v2/, with settings of every kind.
func pctrV2() *release {
	r := newRelease("ads", "pctr", 3, "2.0", "pctr_v2/")
	r.Model = Model{Path: "pctr_v2/", Checksum: sum1, WarmUpJSON: `{"request": []}`, EvictionGracePeriod: time.Minute}
	r.Servable.Validity = []ValidityRule{{Kind: RuleImmediatelyValid}, {Kind: RuleValidAfterMs, After: 5 * time.Second}}
	r.Servable.PhaseIn = PhaseIn{Kind: PhaseInLinear, Over: 10 * time.Minute}
	r.Servable.Logging = ServableLogging{Level: LogLevelFull, SampleRate: 1, KeyFeatures: []string{"someKey", "anotherKey"}, KeyFeaturesSeparator: "."}
	r.ContractSettings = &ContractSettings{Router: RouterLatest, Expiration: Expiration{Kind: ExpireKeepLatest, Keep: 2}}
	return r
}

// addTo adds r to c.
func (r *release) addTo(c *Config) error {
	return c.AddServable(r.Contract, r.Servable, r.Model, r.ContractSettings)
}

// checkValid fails t unless c validates and its canonical JSON reads back to c.
func checkValid(t *testing.T, c *Config) {
	t.Helper()
	data, err := c.Validate()
	if err != nil {
		t.Fatalf("Validate: %v", err)
	}
	back, err := Parse(data)
	if err != nil {
		t.Fatalf("re-parsing %s: %v", data, err)
	}
	if want := normalized(c); !reflect.DeepEqual(back, want) {
		t.Errorf("Validate's JSON reads back to\n%+v\nnot\n%+v", back, want)
	}
}

// normalized returns a deep copy of c as Parse reads it: empty lists are
// nil (an edit that removes the last servable leaves an empty slice,
// written as [] and read back as nil). The settings of c must be in their
// canonical form (no empty router, phase-in or log level standing for the
// default): the edits tested here set them so.
func normalized(c *Config) *Config {
	out := &Config{Models: slices.Clone(c.Models)}
	for _, k := range c.Contracts {
		k.Servables = slices.Clone(k.Servables)
		for i := range k.Servables {
			s := &k.Servables[i]
			s.Validity = slices.Clone(s.Validity)
			s.Logging.KeyFeatures = slices.Clone(s.Logging.KeyFeatures)
			if len(s.Validity) == 0 {
				s.Validity = nil
			}
			if len(s.Logging.KeyFeatures) == 0 {
				s.Logging.KeyFeatures = nil
			}
		}
		if len(k.Servables) == 0 {
			k.Servables = nil
		}
		out.Contracts = append(out.Contracts, k)
	}
	if len(out.Models) == 0 {
		out.Models = nil
	}
	return out
}

func TestCreateContractAddsAContractWithNoServables(t *testing.T) {
	c := parseConfig(t, twoContracts)
	cs := ContractSettings{Router: RouterLatest, Expiration: Expiration{Kind: ExpireKeepTopRanked, Keep: 2, Metric: "auc"}, StickyKey: "user_id"}
	if err := c.CreateContract("ads", "pctr", 2, cs); err != nil {
		t.Fatal(err)
	}
	want := Contract{Organization: "ads", Project: "pctr", Number: 2, Router: RouterLatest,
		Expiration: Expiration{Kind: ExpireKeepTopRanked, Keep: 2, Metric: "auc"}, StickyKey: "user_id"}
	if len(c.Contracts) != 3 || !reflect.DeepEqual(c.Contracts[2], want) {
		t.Fatalf("contracts %+v, want the third %+v", c.Contracts, want)
	}
	if got := c.Contracts[2].Settings(); !reflect.DeepEqual(got, cs) {
		t.Errorf("Settings() = %+v, want %+v", got, cs)
	}
	checkValid(t, c)
}

func TestCreateContractRefusesAnExistingContract(t *testing.T) {
	c := parseConfig(t, twoContracts)
	before := parseConfig(t, twoContracts)
	err := c.CreateContract("ads", "pcvr", 1, ContractSettings{Router: RouterLatest})
	if !errors.Is(err, ErrContractExists) {
		t.Fatalf("got %v, want ErrContractExists", err)
	}
	if !strings.Contains(err.Error(), "ads/pcvr/1") {
		t.Errorf("error %q does not name the contract", err)
	}
	if !reflect.DeepEqual(c, before) {
		t.Errorf("the config changed: %+v", c)
	}
}

func TestUpdateContractReplacesTheSettingsOnly(t *testing.T) {
	c := parseConfig(t, twoContracts)
	cs := ContractSettings{Router: RouterFair, StickyKey: "u"}
	if err := c.UpdateContract("ads/pctr/1", cs); err != nil {
		t.Fatal(err)
	}
	k := c.Contracts[0]
	if !reflect.DeepEqual(k.Settings(), cs) || len(k.Servables) != 2 || k.ID() != "ads/pctr/1" {
		t.Errorf("contract %+v, want settings %+v and its two servables", k, cs)
	}
	checkValid(t, c)
	if err := c.UpdateContract("ads/pctr/9", cs); !errors.Is(err, ErrContractNotFound) {
		t.Errorf("unknown contract: got %v, want ErrContractNotFound", err)
	}
}

func TestAddServableCreatesTheContractWithDefaultSettings(t *testing.T) {
	var c Config
	r := newRelease("ads", "pctr", 1, "v1", "a/")
	r.Model.EvictionGracePeriod = time.Minute
	if err := r.addTo(&c); err != nil {
		t.Fatal(err)
	}
	want := Config{
		Models: []Model{{Path: "a/", EvictionGracePeriod: time.Minute}},
		Contracts: []Contract{{Organization: "ads", Project: "pctr", Number: 1, Router: RouterFair,
			Servables: []ContractServable{r.Servable}}},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got  %+v\nwant %+v", c, want)
	}
	if c.Contracts[0].Expiration.Kind != ExpireNone {
		t.Errorf("a created contract expires %+v, want no expiration (not ForestFlow's KeepLatest(1))", c.Contracts[0].Expiration)
	}
	checkValid(t, &c)
}

func TestAddServableCreatesTheContractWithTheGivenSettings(t *testing.T) {
	r := pctrV2()
	var c Config
	if err := r.addTo(&c); err != nil {
		t.Fatal(err)
	}
	k := c.Contracts[0]
	if k.ID() != "ads/pctr/3" || !reflect.DeepEqual(k.Settings(), *r.ContractSettings) || !reflect.DeepEqual(k.Servables, []ContractServable{r.Servable}) {
		t.Errorf("contract %+v, want settings %+v and servable %+v", k, *r.ContractSettings, r.Servable)
	}
	if !reflect.DeepEqual(c.Models, []Model{r.Model}) {
		t.Errorf("models %+v, want %+v", c.Models, r.Model)
	}
	checkValid(t, &c)
}

func TestAddServableListsTheModelOnlyIfMissing(t *testing.T) {
	c := parseConfig(t, twoContracts)
	// a/ is listed with a checksum: the request's model fields do not replace it.
	r := newRelease("ads", "pctr", 2, "v1", "a/")
	r.Model.EvictionGracePeriod = time.Hour
	if err := r.addTo(c); err != nil {
		t.Fatal(err)
	}
	if len(c.Models) != 3 || !reflect.DeepEqual(c.Models[0], Model{Path: "a/", Checksum: sum1}) {
		t.Errorf("models %+v, want a/ unchanged and nothing added", c.Models)
	}
	// d/ is new: it is appended with the request's fields.
	r = newRelease("ads", "pctr", 1, "v3", "d/")
	r.Model.Checksum = sum1
	if err := r.addTo(c); err != nil {
		t.Fatal(err)
	}
	if len(c.Models) != 4 || !reflect.DeepEqual(c.Models[3], r.Model) {
		t.Errorf("models %+v, want d/ appended as %+v", c.Models, r.Model)
	}
	if s := c.Contracts[0].Servables; len(s) != 3 || s[2].ReleaseVersion != "v3" || s[2].ModelPath != "d/" {
		t.Errorf("servables %+v, want v3 on d/ appended", s)
	}
	checkValid(t, c)
}

func TestAddServableUsesThePathOfTheModel(t *testing.T) {
	var c Config
	r := newRelease("o", "p", 1, "v1", "m/")
	r.Servable.ModelPath = "elsewhere/"
	if err := r.addTo(&c); err != nil {
		t.Fatal(err)
	}
	if got := c.Contracts[0].Servables[0].ModelPath; got != "m/" {
		t.Errorf("model_path %q, want the model's path m/", got)
	}
	if r.Servable.ModelPath != "elsewhere/" {
		t.Errorf("AddServable modified the servable it was given")
	}
}

func TestAddServableRefusesContractSettingsForAnExistingContract(t *testing.T) {
	c := parseConfig(t, twoContracts)
	before := parseConfig(t, twoContracts)
	r := newRelease("ads", "pctr", 1, "v3", "d/")
	r.ContractSettings = &ContractSettings{Router: RouterFair}
	err := r.addTo(c)
	if !errors.Is(err, ErrContractSettingsGiven) {
		t.Fatalf("got %v, want ErrContractSettingsGiven", err)
	}
	if !strings.Contains(err.Error(), "ads/pctr/1") {
		t.Errorf("error %q does not name the contract", err)
	}
	if !reflect.DeepEqual(c, before) {
		t.Errorf("the config changed: %+v", c)
	}
}

func TestAddServableRefusesADuplicateRelease(t *testing.T) {
	c := parseConfig(t, twoContracts)
	before := parseConfig(t, twoContracts)
	err := newRelease("ads", "pctr", 1, "v2", "d/").addTo(c)
	if !errors.Is(err, ErrServableExists) {
		t.Fatalf("got %v, want ErrServableExists", err)
	}
	if !strings.Contains(err.Error(), "v2") || !strings.Contains(err.Error(), "ads/pctr/1") {
		t.Errorf("error %q does not name the release and contract", err)
	}
	if !reflect.DeepEqual(c, before) {
		t.Errorf("the config changed (d/ must not be listed): %+v", c)
	}
}

func TestEditsOfUnknownContractsAndReleasesFail(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(c *Config) error
		want error
	}{
		{"SetPolicy unknown contract", func(c *Config) error { return c.SetPolicy("ads/pctr/2", "v1", Policy{}) }, ErrContractNotFound},
		{"SetPolicy unknown release", func(c *Config) error { return c.SetPolicy("ads/pctr/1", "v3", Policy{}) }, ErrServableNotFound},
		{"SetPolicy release of another contract", func(c *Config) error { return c.SetPolicy("ads/pcvr/1", "v2", Policy{}) }, ErrServableNotFound},
		{"SetLogging unknown contract", func(c *Config) error { return c.SetLogging("ads/x/1", "v1", ServableLogging{}) }, ErrContractNotFound},
		{"SetLogging unknown release", func(c *Config) error { return c.SetLogging("ads/pctr/1", "V1", ServableLogging{}) }, ErrServableNotFound},
		{"RemoveServable unknown contract", func(c *Config) error { return c.RemoveServable("ads/pctr/01", "v1") }, ErrContractNotFound},
		{"RemoveServable unknown release", func(c *Config) error { return c.RemoveServable("ads/pcvr/1", "v2") }, ErrServableNotFound},
		{"UpdateContract unknown contract", func(c *Config) error { return c.UpdateContract("", ContractSettings{}) }, ErrContractNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := parseConfig(t, twoContracts)
			before := parseConfig(t, twoContracts)
			err := tc.edit(c)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if !reflect.DeepEqual(c, before) {
				t.Errorf("the config changed: %+v", c)
			}
		})
	}
}

func TestSetPolicyReplacesTheServablesPolicy(t *testing.T) {
	c := parseConfig(t, twoContracts)
	p := Policy{Validity: []ValidityRule{{Kind: RuleValidAfterMs, After: 5 * time.Second}}, PhaseIn: PhaseIn{Kind: PhaseInLinear, Over: 10 * time.Minute}}
	if err := c.SetPolicy("ads/pctr/1", "v2", p); err != nil {
		t.Fatal(err)
	}
	s := c.Contracts[0].Servables[1]
	if !reflect.DeepEqual(s.Policy(), p) {
		t.Errorf("policy %+v, want %+v", s.Policy(), p)
	}
	if s.Shadow != nil {
		t.Errorf("the shadow was kept: a policy replaces the whole policy")
	}
	if s.ReleaseVersion != "v2" || s.ModelPath != "b/" || !reflect.DeepEqual(s.Logging, defaultServableLogging) {
		t.Errorf("SetPolicy changed more than the policy: %+v", s)
	}
	if other := c.Contracts[1].Servables[0]; other.Validity != nil {
		t.Errorf("SetPolicy changed release v1 of ads/pcvr/1: %+v", other)
	}
	checkValid(t, c)
}

func TestSetLoggingReplacesTheServablesLogging(t *testing.T) {
	c := parseConfig(t, twoContracts)
	l := ServableLogging{Level: LogLevelFull, SampleRate: 1, KeyFeatures: []string{"user_id"}, KeyFeaturesSeparator: "."}
	if err := c.SetLogging("ads/pcvr/1", "v1", l); err != nil {
		t.Fatal(err)
	}
	if got := c.Contracts[1].Servables[0].Logging; !reflect.DeepEqual(got, l) {
		t.Errorf("logging %+v, want %+v", got, l)
	}
	if got := c.Contracts[0].Servables[0].Logging; !reflect.DeepEqual(got, defaultServableLogging) {
		t.Errorf("SetLogging changed release v1 of ads/pctr/1: %+v", got)
	}
	checkValid(t, c)
}

func TestRemoveServableRemovesTheModelOnlyWhenUnused(t *testing.T) {
	c := parseConfig(t, twoContracts)
	// b/ is used by ads/pctr/1 v2 only: it leaves model_metadata.
	if err := c.RemoveServable("ads/pctr/1", "v2"); err != nil {
		t.Fatal(err)
	}
	if got := paths(c.Models); !reflect.DeepEqual(got, []string{"a/", "c/"}) {
		t.Errorf("models %v, want a/ and c/", got)
	}
	// a/ is still used by ads/pcvr/1 v1: it stays.
	if err := c.RemoveServable("ads/pctr/1", "v1"); err != nil {
		t.Fatal(err)
	}
	if got := paths(c.Models); !reflect.DeepEqual(got, []string{"a/", "c/"}) {
		t.Errorf("models %v, want a/ (used by ads/pcvr/1) and c/", got)
	}
	if n := len(c.Contracts[0].Servables); n != 0 || len(c.Contracts) != 2 {
		t.Errorf("contracts %+v, want ads/pctr/1 kept with no servables", c.Contracts)
	}
	checkValid(t, c)
	// Its last user gone, a/ leaves too; c/, which no contract used, stays.
	if err := c.RemoveServable("ads/pcvr/1", "v1"); err != nil {
		t.Fatal(err)
	}
	if got := paths(c.Models); !reflect.DeepEqual(got, []string{"c/"}) {
		t.Errorf("models %v, want c/", got)
	}
	if !reflect.DeepEqual(c.Models[0], Model{Path: "c/"}) {
		t.Errorf("model c/ changed: %+v", c.Models[0])
	}
	checkValid(t, c)
}

func TestRemoveServableKeepsTheContractsOtherReleases(t *testing.T) {
	c := parseConfig(t, twoContracts)
	if err := c.RemoveServable("ads/pctr/1", "v1"); err != nil {
		t.Fatal(err)
	}
	s := c.Contracts[0].Servables
	if len(s) != 1 || s[0].ReleaseVersion != "v2" || s[0].Shadow == nil {
		t.Errorf("servables %+v, want v2 unchanged", s)
	}
}

func paths(models []Model) []string {
	var out []string
	for _, m := range models {
		out = append(out, m.Path)
	}
	return out
}

func TestValidateRejectsInvalidEdits(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(c *Config) error
		want string
	}{
		{"two releases on one model_path", func(c *Config) error {
			return newRelease("ads", "pctr", 1, "v3", "a/").addTo(c)
		}, `contracts[0].servables[2].model_path: contract ads/pctr/1: release v3: model_path "a/" is already release v1 of this contract`},
		{"keep_latest 0", func(c *Config) error {
			return c.UpdateContract("ads/pcvr/1", ContractSettings{Router: RouterFair, Expiration: Expiration{Kind: ExpireKeepLatest}})
		}, `contracts[1].expiration.keep_latest: contract ads/pcvr/1: keep_latest must keep at least 1 servable, got 0`},
		{"unknown router", func(c *Config) error {
			return c.UpdateContract("ads/pctr/1", ContractSettings{Router: "RandomRouter"})
		}, `contracts[0].router: contract ads/pctr/1: router "RandomRouter" is not fair, latest, thompson or epsilon_greedy`},
		{"unknown expiration policy", func(c *Config) error {
			return c.CreateContract("ads", "new", 1, ContractSettings{Router: RouterFair, Expiration: Expiration{Kind: "KeepOldest"}})
		}, `contracts[2].expiration: contract ads/new/1: unknown expiration policy "KeepOldest"`},
		{"bad contract names", func(c *Config) error {
			return newRelease("a/b", "p", 1, "v1", "d/").addTo(c)
		}, `contracts[2].organization: contract a/b/p/1: organization "a/b" has the character '/'`},
		{"reserved organization", func(c *Config) error {
			return c.CreateContract("v2", "p", 1, ContractSettings{Router: RouterFair})
		}, `contracts[2].organization: contract v2/p/1: organization "v2" is reserved`},
		{"contract number 0", func(c *Config) error {
			return newRelease("o", "p", 0, "v1", "d/").addTo(c)
		}, `contract_number 0 must be at least 1`},
		{"release name with a space", func(c *Config) error {
			return newRelease("ads", "pctr", 1, "v 3", "d/").addTo(c)
		}, `release_version "v 3" has the character ' '`},
		{"unsafe model path", func(c *Config) error {
			return newRelease("ads", "pctr", 1, "v3", "../d/").addTo(c)
		}, `model_metadata[3].model_path: "../d/" must not contain ".." segments`},
		{"bad checksum", func(c *Config) error {
			r := newRelease("ads", "pctr", 1, "v3", "d/")
			r.Model.Checksum = "abc"
			return r.addTo(c)
		}, `model_metadata[3].checksum: "abc" has 3 characters`},
		{"zero-second linear phase-in", func(c *Config) error {
			return c.SetPolicy("ads/pctr/1", "v1", Policy{PhaseIn: PhaseIn{Kind: PhaseInLinear}})
		}, `contracts[0].servables[0].phase_in.linear_over_secs.secs: contract ads/pctr/1: release v1: linear_over_secs needs secs ≥ 1, got 0`},
		{"unknown validity rule", func(c *Config) error {
			return c.SetPolicy("ads/pctr/1", "v2", Policy{Validity: []ValidityRule{{Kind: "AlwaysValid"}}, PhaseIn: PhaseIn{Kind: PhaseInImmediate}})
		}, `contracts[0].servables[1].validity[0]: contract ads/pctr/1: release v2: unknown validity rule "AlwaysValid"`},
		{"min_metric without a metric", func(c *Config) error {
			return c.SetPolicy("ads/pctr/1", "v2", Policy{Validity: []ValidityRule{{Kind: RuleMinMetric}}})
		}, `min_metric needs the name of the metric`},
		{"shadow rate above 1", func(c *Config) error {
			return c.SetPolicy("ads/pctr/1", "v2", Policy{Shadow: &Shadow{SampleRate: 2}})
		}, `shadow sample_rate 2 is not between 0 and 1`},
		{"lowercase log level", func(c *Config) error {
			return c.SetLogging("ads/pcvr/1", "v1", ServableLogging{Level: "full", SampleRate: 1})
		}, `contracts[1].servables[0].logging.log_level: contract ads/pcvr/1: release v1: log_level "full" is not NONE, FULL or SAMPLE`},
		{"duplicate key feature", func(c *Config) error {
			return c.SetLogging("ads/pcvr/1", "v1", ServableLogging{Level: LogLevelFull, SampleRate: 1, KeyFeatures: []string{"u", "u"}})
		}, `key feature "u" is listed twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := parseConfig(t, twoContracts)
			if err := tc.edit(c); err != nil {
				t.Fatalf("the edit itself failed: %v", err)
			}
			data, err := c.Validate()
			checkConfigError(t, err, tc.want)
			if data != nil {
				t.Errorf("Validate returned data with its error: %s", data)
			}
		})
	}
}

func TestValidateReturnsCanonicalJSONThatReadsBack(t *testing.T) {
	c := parseConfig(t, allShapesExample)
	if err := pctrV2().addTo(c); err != nil {
		t.Fatal(err)
	}
	if err := c.SetPolicy("ads/pctr/7", "v1~rc.1", Policy{PhaseIn: PhaseIn{Kind: PhaseInImmediate}, Shadow: &Shadow{SampleRate: 0}}); err != nil {
		t.Fatal(err)
	}
	data, err := c.Validate()
	if err != nil {
		t.Fatal(err)
	}
	canonical, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != string(canonical) {
		t.Errorf("Validate returned\n%s\nnot the canonical\n%s", data, canonical)
	}
	checkValid(t, c)

	// An empty config is valid too.
	data, err = (&Config{}).Validate()
	if err != nil || string(data) != `{"model_metadata":[]}` {
		t.Errorf("empty config: got %s, %v", data, err)
	}
}

func TestContractSettingsMarshalJSONWritesTheConfigShape(t *testing.T) {
	// An empty router is written as the default.
	for _, tc := range []struct {
		cs   ContractSettings
		want string
	}{
		{ContractSettings{}, `{"router":"fair"}`},
		{ContractSettings{Router: RouterLatest, Expiration: Expiration{Kind: ExpireKeepLatest, Keep: 2}, StickyKey: "u"}, `{"router":"latest","expiration":{"keep_latest":2},"sticky_key":"u"}`},
		{ContractSettings{Router: RouterFair, Expiration: Expiration{Kind: ExpireKeepTopRanked, Keep: 1, Metric: "auc"}}, `{"router":"fair","expiration":{"keep_top_ranked":{"metric":"auc","n":1}}}`},
	} {
		got, err := json.Marshal(tc.cs)
		if err != nil || string(got) != tc.want {
			t.Errorf("%+v: got %s, %v; want %s", tc.cs, got, err, tc.want)
		}
	}
}

func TestPolicyMarshalJSONWritesTheDefaultsOfTheZeroPolicy(t *testing.T) {
	got, err := json.Marshal(Policy{})
	if want := `{"validity":[],"phase_in":{"immediate":{}}}`; err != nil || string(got) != want {
		t.Errorf("zero policy: got %s, %v; want %s", got, err, want)
	}
}

func TestServableLoggingMarshalJSONWritesTheDefaultLevelOfTheZeroLogging(t *testing.T) {
	got, err := json.Marshal(ServableLogging{})
	if want := `{"log_level":"NONE","sample_rate":0,"key_features":[],"key_features_separator":""}`; err != nil || string(got) != want {
		t.Errorf("zero logging: got %s, %v; want %s", got, err, want)
	}
}

func TestContractServableMarshalJSONIsTheConfigsServable(t *testing.T) {
	c := parseConfig(t, allShapesExample)
	for _, s := range c.Contracts[0].Servables {
		data, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		doc := `{"model_metadata": [{"model_path": "a/"}, {"model_path": "b/"}], "contracts": [{"organization": "o", "project": "p", "contract_number": 1, "servables": [` + string(data) + `]}]}`
		back, err := Parse([]byte(doc))
		if err != nil {
			t.Fatalf("parsing %s: %v", doc, err)
		}
		if got := back.Contracts[0].Servables[0]; !reflect.DeepEqual(got, s) {
			t.Errorf("%s reads back as %+v, not %+v", data, got, s)
		}
	}
	data, _ := json.Marshal(ContractServable{ReleaseVersion: "v1", ModelPath: "m/", PhaseIn: PhaseIn{Kind: PhaseInLinear, Over: time.Minute}, Logging: defaultServableLogging})
	want := `{"release_version":"v1","model_path":"m/","validity":[],"phase_in":{"linear_over_secs":{"secs":60}},"logging":{"log_level":"NONE","sample_rate":1,"key_features":[],"key_features_separator":"."}}`
	if string(data) != want {
		t.Errorf("got  %s\nwant %s", data, want)
	}
}

// checkOnlyConfigErrors fails t unless err is nil or a *Error.
func checkOnlyConfigErrors(t *testing.T, err error) {
	t.Helper()
	var ce *Error
	if err != nil && !errors.As(err, &ce) {
		t.Fatalf("error %T is not a *Error: %v", err, err)
	}
}
