package logging

import (
	"math"
	"testing"

	"github.com/groveml/grove/conf"
)

func TestParseLevel(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Level
		ok   bool
	}{
		{"NONE", LevelNone, true}, {"FULL", LevelFull, true}, {"SAMPLE", LevelSample, true},
		{"full", LevelNone, false}, {"", LevelNone, false}, {"ALL", LevelNone, false},
	} {
		got, err := ParseLevel(tc.in)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
		if tc.ok && got.String() != tc.in {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), tc.in)
		}
	}
	if s := Level(9).String(); s != "Level(9)" {
		t.Errorf("unknown level prints %q", s)
	}
}

func TestPolicyDecide(t *testing.T) {
	const (
		low  = 0.0
		mid  = 0.5
		high = math.SmallestNonzeroFloat64 + 0.999999
	)
	for _, tc := range []struct {
		name string
		p    Policy
		rnd  float64
		want bool
	}{
		{"zero policy", Policy{}, low, false},
		{"none ignores rate", Policy{Level: LevelNone, SampleRate: 1}, low, false},
		{"full", Policy{Level: LevelFull}, high, true},
		{"full ignores rate 0", Policy{Level: LevelFull, SampleRate: 0}, high, true},
		{"sample below rate", Policy{Level: LevelSample, SampleRate: 0.6}, mid, true},
		{"sample at rate", Policy{Level: LevelSample, SampleRate: 0.5}, mid, false},
		{"sample above rate", Policy{Level: LevelSample, SampleRate: 0.4}, mid, false},
		{"sample rate 1 takes all", Policy{Level: LevelSample, SampleRate: 1}, high, true},
		{"sample rate 0 takes none", Policy{Level: LevelSample, SampleRate: 0}, low, false},
		{"unknown level", Policy{Level: Level(7), SampleRate: 1}, low, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			called := false
			got := tc.p.Decide(func() float64 { called = true; return tc.rnd })
			if got != tc.want {
				t.Errorf("Decide = %v, want %v", got, tc.want)
			}
			if called != (tc.p.Level == LevelSample) {
				t.Errorf("rnd called %v, want only at SAMPLE", called)
			}
		})
	}
}

func TestPolicyDecideDefaultRandomSamplesAtTheRate(t *testing.T) {
	p := Policy{Level: LevelSample, SampleRate: 0.25}
	n, hits := 20000, 0
	for range n {
		if p.Decide(nil) {
			hits++
		}
	}
	if share := float64(hits) / float64(n); share < 0.22 || share > 0.28 {
		t.Errorf("logged share %.3f, want about 0.25", share)
	}
}

func TestPolicyKey(t *testing.T) {
	cfg := map[string]string{"user": "u1", "campaign": "c9", "empty": "", "site": "s.example"}
	for _, tc := range []struct {
		name     string
		features []string
		sep      string
		configs  map[string]string
		want     []byte
	}{
		{"no key features", nil, ".", cfg, nil},
		{"one feature", []string{"user"}, ".", cfg, []byte("u1")},
		{"ordered as configured", []string{"campaign", "user"}, ".", cfg, []byte("c9.u1")},
		{"separator of several bytes", []string{"user", "campaign"}, "::", cfg, []byte("u1::c9")},
		{"empty separator", []string{"user", "campaign"}, "", cfg, []byte("u1c9")},
		{"missing feature keeps its place", []string{"user", "nope", "campaign"}, ".", cfg, []byte("u1..c9")},
		{"empty value keeps its place", []string{"empty", "user"}, "|", cfg, []byte("|u1")},
		{"present but empty is a key", []string{"empty"}, ".", cfg, []byte{}},
		{"all missing: no key", []string{"nope", "nada"}, ".", cfg, nil},
		{"nil configs: no key", []string{"user"}, ".", nil, nil},
		{"value with separator is kept", []string{"site", "user"}, ".", cfg, []byte("s.example.u1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Policy{Level: LevelFull, KeyFeatures: tc.features, Separator: tc.sep}.Key(tc.configs)
			if string(got) != string(tc.want) || (got == nil) != (tc.want == nil) {
				t.Errorf("Key = %q (nil %v), want %q (nil %v)", got, got == nil, tc.want, tc.want == nil)
			}
		})
	}
}

func TestPolicyKeyReturnsAFreshSlice(t *testing.T) {
	p := Policy{KeyFeatures: []string{"a"}}
	cfg := map[string]string{"a": "x"}
	k1 := p.Key(cfg)
	k1[0] = 'y'
	if k2 := p.Key(cfg); string(k2) != "x" {
		t.Errorf("second key %q, want x", k2)
	}
}

func TestPolicyFromConfig(t *testing.T) {
	c := conf.DefaultServer().PredictionLog
	p, err := PolicyFromConfig(c)
	if err != nil || p.Level != LevelNone || p.SampleRate != 1 || p.KeyFeatures != nil || p.Separator != "." {
		t.Errorf("defaults: %+v, %v", p, err)
	}
	c = conf.PredictionLog{DefaultLevel: conf.PredictionLogSample, DefaultSampleRate: 0.1, DefaultKeyFeatures: []string{"u", "c"}, DefaultKeyFeaturesSeparator: "-"}
	p, err = PolicyFromConfig(c)
	if err != nil || p.Level != LevelSample || p.SampleRate != 0.1 || len(p.KeyFeatures) != 2 || p.Separator != "-" {
		t.Errorf("sample: %+v, %v", p, err)
	}
	c.DefaultKeyFeatures[0] = "changed"
	if p.KeyFeatures[0] != "u" {
		t.Error("the policy shares the config's key features")
	}
	c = conf.PredictionLog{DefaultLevel: conf.PredictionLogFull, DefaultSampleRate: 1}
	if p, err = PolicyFromConfig(c); err != nil || p.Level != LevelFull {
		t.Errorf("full: %+v, %v", p, err)
	}
	if _, err := PolicyFromConfig(conf.PredictionLog{DefaultLevel: conf.PredictionLogFull, DefaultSampleRate: math.NaN()}); err == nil {
		t.Error("NaN sample rate accepted")
	}
}

func TestPolicyKeyFindsAFeatureWhoseHeaderArrivedLowercased(t *testing.T) {
	// Grove-Config-UserId reaches the configs as "userid".
	p := Policy{KeyFeatures: []string{"userId", "siteId"}, Separator: "."}
	if got := string(p.Key(map[string]string{"userid": "u1", "siteId": "s9"})); got != "u1.s9" {
		t.Errorf("key %q, want u1.s9", got)
	}
}
