package modelconfig

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/internal/jsondoc"
)

// This file holds the outcomes object of a contract or a direct model
// entry: what its predictions learn from the outcomes reported after them
// (docs/outcomes.md), and the names of the live outcome metrics that
// min_metric and keep_top_ranked may rank by.

// Outcomes is the outcomes object of a contract or of a model_metadata
// entry (direct calls of the model). In JSON:
//
//	{"label": "click", "kind": "binary", "window": "30m", "missing": "negative", "output": "output_0", "lateness": "1m"}
//
// label and window are required; kind defaults to binary, missing to
// negative, lateness to 1m, and an empty output means the model's first
// output. Every servable it covers must log at FULL: a contract's
// servables their logging.log_level, a model entry's direct calls the
// server's prediction_log.default_level (see ValidateOutcomeLogging).
type Outcomes struct {
	// Label is label, the key of grove.v1.Outcome.labels that is scored.
	Label string
	// Kind is kind: binary (the default) or numeric.
	Kind OutcomeKind
	// Window is window: how long after a prediction, in event time, its
	// outcomes count; more than 0.
	Window time.Duration
	// Missing is missing: what a prediction with no outcome in its window
	// scores.
	Missing OutcomeMissing
	// Output is output, the model output scored; empty: the first one.
	Output string
	// Lateness is lateness: how far behind the newest event time seen an
	// outcome may arrive and still count, 0 or more (default 1m).
	Lateness time.Duration
}

// DefaultOutcomeLateness is the lateness of an outcomes object without one.
const DefaultOutcomeLateness = time.Minute

// OutcomeKind is an outcomes object's kind: how a prediction is scored.
// The zero value is OutcomeBinary, the default.
type OutcomeKind uint8

// The outcome kinds.
const (
	// OutcomeBinary ("binary"): label 1 if a positive outcome fell in the
	// window, else 0; the prediction is a probability.
	OutcomeBinary OutcomeKind = iota
	// OutcomeNumeric ("numeric"): the label's value (the latest in the
	// window); the prediction is an estimate of it.
	OutcomeNumeric
)

var outcomeKindNames = []string{"binary", "numeric"}

// String returns the config name: binary or numeric.
func (k OutcomeKind) String() string { return nameOf(int(k), outcomeKindNames) }

// MarshalText returns the config name.
func (k OutcomeKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// ParseOutcomeKind returns the kind named s, or an error listing the names.
func ParseOutcomeKind(s string) (OutcomeKind, error) {
	i, err := parseName("kind", s, outcomeKindNames)
	return OutcomeKind(i), err
}

// OutcomeMissing is an outcomes object's missing: what becomes of a
// prediction that got no outcome in its window. The zero value is
// OutcomeMissingNegative, the default.
type OutcomeMissing uint8

// The values of missing.
const (
	// OutcomeMissingNegative ("negative"): it scores label 0.
	OutcomeMissingNegative OutcomeMissing = iota
	// OutcomeMissingIgnore ("ignore"): it is not scored.
	OutcomeMissingIgnore
)

var outcomeMissingNames = []string{"negative", "ignore"}

// String returns the config name: negative or ignore.
func (m OutcomeMissing) String() string { return nameOf(int(m), outcomeMissingNames) }

// MarshalText returns the config name.
func (m OutcomeMissing) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// ParseOutcomeMissing returns the value named s, or an error listing the names.
func ParseOutcomeMissing(s string) (OutcomeMissing, error) {
	i, err := parseName("missing", s, outcomeMissingNames)
	return OutcomeMissing(i), err
}

// nameOf returns names[i], or a placeholder for a value out of range.
func nameOf(i int, names []string) string {
	if i < 0 || i >= len(names) {
		return fmt.Sprintf("invalid(%d)", i)
	}
	return names[i]
}

// parseName returns the index of s in names, or an error naming key.
func parseName(key, s string, names []string) (int, error) {
	if i := slices.Index(names, s); i >= 0 {
		return i, nil
	}
	return 0, fmt.Errorf("%s %q is not %s", key, s, jsondoc.OrList(names))
}

// outcomesFromProto converts an outcomes object at path (ending in
// ".outcomes"), applying its defaults; nil for none. Its errors name the
// key: a duration that does not parse, a kind or missing not listed.
// validate checks the rest.
func outcomesFromProto(o *grovepb.OutcomeConfig, path string) (*Outcomes, error) {
	if o == nil {
		return nil, nil
	}
	out := &Outcomes{Label: o.GetLabel(), Output: o.GetOutput(), Lateness: DefaultOutcomeLateness}
	var err error
	if o.Kind != nil {
		if out.Kind, err = ParseOutcomeKind(o.GetKind()); err != nil {
			return nil, &Error{Field: path + ".kind", Msg: err.Error()}
		}
	}
	if o.Missing != nil {
		if out.Missing, err = ParseOutcomeMissing(o.GetMissing()); err != nil {
			return nil, &Error{Field: path + ".missing", Msg: err.Error()}
		}
	}
	if o.GetWindow() == "" {
		return nil, &Error{Field: path + ".window", Msg: `outcomes needs a window, a duration such as "30m" or "168h"`}
	}
	if out.Window, err = parseOutcomeDuration("window", o.GetWindow()); err != nil {
		return nil, &Error{Field: path + ".window", Msg: err.Error()}
	}
	if o.Lateness != nil {
		if out.Lateness, err = parseOutcomeDuration("lateness", o.GetLateness()); err != nil {
			return nil, &Error{Field: path + ".lateness", Msg: err.Error()}
		}
	}
	return out, nil
}

// DecodeOutcomes reads the outcomes object at path of a management
// document (api/forestflow's contract settings) into dst as Parse reads
// it from the config file: the same keys, in snake_case or lowerCamelCase
// (unknown ones refused), the same defaults and the same checks, whose
// errors name the key below path ("outcomes.window"). null leaves dst
// alone. The checks that tie it to the rest of the contract (FULL
// logging, the outcome bounds of its gates) are made when the edited
// config is validated.
func DecodeOutcomes(d *jsondoc.Decoder, path string, dst **Outcomes) error {
	tok, err := d.Token(path)
	switch {
	case err != nil:
		return err
	case tok == nil:
		return nil
	case tok != json.Delim('{'):
		return jsondoc.TypeError(path, "an object", tok)
	}
	str := func(name string, get func(*grovepb.OutcomeConfig) *string) jsondoc.Field[grovepb.OutcomeConfig] {
		return jsondoc.Field[grovepb.OutcomeConfig]{Name: name, Decode: func(d *jsondoc.Decoder, path string, o *grovepb.OutcomeConfig) error {
			return d.String(path, get(o))
		}}
	}
	// optional reads a proto3 optional string: null leaves it absent.
	optional := func(name string, get func(*grovepb.OutcomeConfig) **string) jsondoc.Field[grovepb.OutcomeConfig] {
		return jsondoc.Field[grovepb.OutcomeConfig]{Name: name, Decode: func(d *jsondoc.Decoder, path string, o *grovepb.OutcomeConfig) error {
			tok, err := d.Token(path)
			switch v := tok.(type) {
			case nil:
				return err
			case string:
				*get(o) = &v
				return nil
			}
			return jsondoc.TypeError(path, "a string", tok)
		}}
	}
	var pb grovepb.OutcomeConfig
	if err := jsondoc.DecodeObjectBody(d, path, []jsondoc.Field[grovepb.OutcomeConfig]{
		str("label", func(o *grovepb.OutcomeConfig) *string { return &o.Label }),
		optional("kind", func(o *grovepb.OutcomeConfig) **string { return &o.Kind }),
		str("window", func(o *grovepb.OutcomeConfig) *string { return &o.Window }),
		optional("missing", func(o *grovepb.OutcomeConfig) **string { return &o.Missing }),
		str("output", func(o *grovepb.OutcomeConfig) *string { return &o.Output }),
		optional("lateness", func(o *grovepb.OutcomeConfig) **string { return &o.Lateness }),
	}, &pb); err != nil {
		return err
	}
	o, err := outcomesFromProto(&pb, path)
	if err != nil {
		return err
	}
	if e := o.validate(); e != nil {
		return &Error{Field: path + e.Field, Msg: e.Msg}
	}
	*dst = o
	return nil
}

// parseOutcomeDuration reads the duration of key: Go's syntax ("30m",
// "1h30m"), not negative.
func parseOutcomeDuration(key, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%s %q is not a duration such as \"30m\" or \"168h\"", key, s)
	case d < 0:
		return 0, fmt.Errorf("%s %s is negative", key, s)
	}
	return d, nil
}

// validate checks an outcomes object read by outcomesFromProto; the
// error's field is the key below ".outcomes".
func (o *Outcomes) validate() *gateError {
	switch {
	case o.Label == "":
		return &gateError{".label", `outcomes needs the label to learn, a key of the outcomes' labels such as "click"`}
	case o.Window <= 0:
		return &gateError{".window", fmt.Sprintf("outcomes window %v must be more than 0", o.Window)}
	case o.Lateness < 0:
		return &gateError{".lateness", fmt.Sprintf("outcomes lateness %v is negative", o.Lateness)}
	case o.Kind > OutcomeNumeric:
		return &gateError{".kind", fmt.Sprintf("kind %v is not %s", o.Kind, jsondoc.OrList(outcomeKindNames))}
	case o.Missing > OutcomeMissingIgnore:
		return &gateError{".missing", fmt.Sprintf("missing %v is not %s", o.Missing, jsondoc.OrList(outcomeMissingNames))}
	}
	return nil
}

// outcomesJSON is the outcomes object's canonical JSON shape: every key
// written, durations in Go's syntax.
type outcomesJSON struct {
	Label    string         `json:"label"`
	Kind     OutcomeKind    `json:"kind"`
	Window   string         `json:"window"`
	Missing  OutcomeMissing `json:"missing"`
	Output   string         `json:"output,omitempty"`
	Lateness string         `json:"lateness"`
}

// canonical returns the object's canonical JSON shape, nil for none.
func (o *Outcomes) canonical() *outcomesJSON {
	if o == nil {
		return nil
	}
	return &outcomesJSON{o.Label, o.Kind, o.Window.String(), o.Missing, o.Output, o.Lateness.String()}
}

// The live outcome metrics: names min_metric and keep_top_ranked may use
// for the servable's outcome quality over its since_valid window, each
// higher-is-better. They are read from the outcome statistics, never from
// the metrics pushed to the metrics API, which keep their own names (auc,
// logloss, ...): an old push cannot hide a live value.
const (
	// MetricOutcomeAUC is the AUC of the servable's scored predictions.
	MetricOutcomeAUC = "outcome_auc"
	// MetricOutcomeNegLogLoss is minus their log loss.
	MetricOutcomeNegLogLoss = "outcome_neg_logloss"
	// MetricOutcomeNegBrier is minus their Brier score.
	MetricOutcomeNegBrier = "outcome_neg_brier"
	// MetricOutcomeNegECE is minus their expected calibration error.
	MetricOutcomeNegECE = "outcome_neg_ece"
)

// outcomeMetricPrefix starts the name of every live outcome metric.
const outcomeMetricPrefix = "outcome_"

// OutcomeMetrics lists the live outcome metrics.
func OutcomeMetrics() []string {
	return []string{MetricOutcomeAUC, MetricOutcomeNegLogLoss, MetricOutcomeNegBrier, MetricOutcomeNegECE}
}

// IsOutcomeMetric reports whether name is reserved for live outcome
// metrics: it starts with "outcome_". Only OutcomeMetrics are valid.
func IsOutcomeMetric(name string) bool { return strings.HasPrefix(name, outcomeMetricPrefix) }

// checkOutcomeMetric checks a metric name that min_metric or
// keep_top_ranked ranks by, for a contract with outcomes o (nil: none).
func checkOutcomeMetric(name string, o *Outcomes) string {
	switch {
	case !IsOutcomeMetric(name):
		return ""
	case !slices.Contains(OutcomeMetrics(), name):
		return fmt.Sprintf("%q is not a live outcome metric: names starting with %q are %s", name, outcomeMetricPrefix, jsondoc.OrList(OutcomeMetrics()))
	case o == nil:
		return fmt.Sprintf("%s is measured from outcomes, and the contract has no outcomes object; give it \"outcomes\": {\"label\": ..., \"window\": ...}", name)
	case o.Kind != OutcomeBinary:
		return fmt.Sprintf("%s is measured for binary outcomes, and the contract's outcomes are %v", name, o.Kind)
	}
	return ""
}

// ValidateOutcomeLogging checks, for a config Parse accepted, that every
// model_metadata entry with an outcomes object is logged at FULL when
// called directly: directLevel is the server's
// prediction_log.default_level (LogLevelNone, LogLevelFull or
// LogLevelSample). The error is an *Error naming the entry.
func (c *Config) ValidateOutcomeLogging(directLevel string) error {
	if directLevel == LogLevelFull {
		return nil
	}
	for i, m := range c.Models {
		if m.Outcomes != nil {
			return &Error{Field: fmt.Sprintf("model_metadata[%d].outcomes", i),
				Msg: fmt.Sprintf("model %s: outcomes are joined to logged predictions, and direct calls are logged at %s; set the server's prediction_log.default_level to FULL", m.Path, directLevel)}
		}
	}
	return nil
}
