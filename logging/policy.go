package logging

import (
	"fmt"
	"math/rand/v2"

	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/conf/modelconfig"
)

// Level is how much of a servable's traffic is logged.
type Level uint8

// The log levels.
const (
	// LevelNone logs nothing.
	LevelNone Level = iota
	// LevelFull logs every execution.
	LevelFull
	// LevelSample logs a Policy.SampleRate share of the executions.
	LevelSample
)

// String returns the level's config name: NONE, FULL or SAMPLE.
func (l Level) String() string {
	switch l {
	case LevelNone:
		return modelconfig.LogLevelNone
	case LevelFull:
		return modelconfig.LogLevelFull
	case LevelSample:
		return modelconfig.LogLevelSample
	}
	return fmt.Sprintf("Level(%d)", uint8(l))
}

// ParseLevel returns the level named NONE, FULL or SAMPLE (case-sensitive).
func ParseLevel(s string) (Level, error) {
	switch s {
	case modelconfig.LogLevelNone:
		return LevelNone, nil
	case modelconfig.LogLevelFull:
		return LevelFull, nil
	case modelconfig.LogLevelSample:
		return LevelSample, nil
	}
	return LevelNone, fmt.Errorf("prediction log level %q is not NONE, FULL or SAMPLE", s)
}

// Policy is what gets logged for one servable and how its records are
// keyed. The zero Policy logs nothing. A Policy is a value: it is safe for
// concurrent use and its methods are pure.
type Policy struct {
	// Level says whether executions are logged.
	Level Level
	// SampleRate is the share of executions logged at LevelSample, from 0 to 1.
	SampleRate float64
	// KeyFeatures are the names of the request configs whose values, in
	// this order, make the record key; none means no key.
	KeyFeatures []string
	// Separator joins the key features' values.
	Separator string
}

// PolicyFromConfig returns the server's default policy, the one for direct
// model calls.
func PolicyFromConfig(c conf.PredictionLog) (Policy, error) {
	var l Level
	switch c.DefaultLevel {
	case conf.PredictionLogNone:
		l = LevelNone
	case conf.PredictionLogFull:
		l = LevelFull
	case conf.PredictionLogSample:
		l = LevelSample
	}
	if !(c.DefaultSampleRate >= 0 && c.DefaultSampleRate <= 1) {
		return Policy{}, fmt.Errorf("prediction log sample rate %v is not between 0 and 1", c.DefaultSampleRate)
	}
	return Policy{
		Level:       l,
		SampleRate:  c.DefaultSampleRate,
		KeyFeatures: append([]string(nil), c.DefaultKeyFeatures...),
		Separator:   c.DefaultKeyFeaturesSeparator,
	}, nil
}

// PolicyFromServable returns a contract servable's policy; the config was
// validated when it was parsed, so an unknown level logs nothing.
func PolicyFromServable(c modelconfig.ServableLogging) Policy {
	l, _ := ParseLevel(c.Level)
	return Policy{Level: l, SampleRate: c.SampleRate, KeyFeatures: c.KeyFeatures, Separator: c.KeyFeaturesSeparator}
}

// Decide reports whether one execution is logged: never at LevelNone,
// always at LevelFull, and at LevelSample when rnd() < SampleRate, so a
// rate of 1 logs everything and 0 nothing. rnd returns numbers in [0, 1);
// nil uses math/rand/v2's Float64 (safe for concurrent use, no lock).
func (p Policy) Decide(rnd func() float64) bool {
	switch p.Level {
	case LevelFull:
		return true
	case LevelSample:
		if rnd == nil {
			rnd = rand.Float64
		}
		return rnd() < p.SampleRate
	}
	return false
}

// Key returns the record key of an execution whose request carried
// configs: the values of KeyFeatures looked up in configs, in order, joined
// by Separator. A feature missing from configs contributes an empty string
// in its place, so the values keep their positions ("u1..c9" for user,
// site, campaign with no site). The key is nil, and the record unkeyed,
// when no KeyFeatures are configured or none of them is in configs. The
// returned slice is new on every call.
func (p Policy) Key(configs map[string]string) []byte {
	if len(p.KeyFeatures) == 0 {
		return nil
	}
	n, found := len(p.Separator)*(len(p.KeyFeatures)-1), false
	for _, f := range p.KeyFeatures {
		v, ok := modelconfig.LookupConfig(configs, f)
		n += len(v)
		found = found || ok
	}
	if !found {
		return nil
	}
	key := make([]byte, 0, n)
	for i, f := range p.KeyFeatures {
		if i > 0 {
			key = append(key, p.Separator...)
		}
		v, _ := modelconfig.LookupConfig(configs, f)
		key = append(key, v...)
	}
	return key
}
