package conf

// The management documents' decoder: a table-driven reader of JSON objects
// in the model config's shapes (snake_case or lowerCamelCase names, unknown
// fields rejected, null as the default), which manage.go extends with
// ForestFlow's shapes. The model config itself is read with protojson
// (model.go).

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
)

// field describes one field of a JSON object decoded into a T.
type field[T any] struct {
	// name is the protobuf field name (snake_case); its lowerCamelCase JSON
	// name is accepted too.
	name string
	// decode reads the field's value from d into dst; path names the field
	// in errors. A null value must leave dst alone, as protobuf reads it as
	// the default.
	decode func(d *decoder, path string, dst *T) error
}

// modelMetadataFields are the fields of a model_metadata entry, as a serve
// request gives them.
func modelMetadataFields() []field[ModelMetadata] {
	return []field[ModelMetadata]{
		{"model_path", func(d *decoder, path string, m *ModelMetadata) error {
			return d.string(path, &m.Path)
		}},
		{"checksum", func(d *decoder, path string, m *ModelMetadata) error {
			return d.string(path, &m.Checksum)
		}},
		{"warm_up_batch_request_json", func(d *decoder, path string, m *ModelMetadata) error {
			return d.string(path, &m.WarmUpJSON)
		}},
		{"eviction_grace_period_in_ms", func(d *decoder, path string, m *ModelMetadata) error {
			ms, err := d.integer(path, 0, maxGracePeriodMs)
			if err != nil {
				return err
			}
			m.EvictionGracePeriod = time.Duration(ms) * time.Millisecond
			return nil
		}},
		{"replicas", func(d *decoder, path string, m *ModelMetadata) error {
			n, err := d.integer(path, 0, MaxReplicas)
			m.Serving.Replicas = int(n)
			return err
		}},
		{"max_batch_rows", func(d *decoder, path string, m *ModelMetadata) error {
			n, err := d.integer(path, 0, maxBatchRowsLimit)
			m.Serving.MaxBatchRows = int(n)
			return err
		}},
		{"max_queue_delay_us", func(d *decoder, path string, m *ModelMetadata) error {
			us, err := d.integer(path, 0, maxQueueDelayUs)
			m.Serving.MaxQueueDelay = time.Duration(us) * time.Microsecond
			return err
		}},
		{"intra_op_threads", func(d *decoder, path string, m *ModelMetadata) error {
			n, err := d.integer(path, 0, maxIntraOpThreads)
			m.Serving.IntraOpThreads = int(n)
			return err
		}},
		{"default_timeout_ms", func(d *decoder, path string, m *ModelMetadata) error {
			ms, err := d.integer(path, 0, maxTimeoutMs)
			m.DefaultTimeout = time.Duration(ms) * time.Millisecond
			return err
		}},
		{"queue_timeout_ms", func(d *decoder, path string, m *ModelMetadata) error {
			ms, err := d.integer(path, 0, maxTimeoutMs)
			m.QueueTimeout = time.Duration(ms) * time.Millisecond
			return err
		}},
	}
}

// string reads a string field; null leaves dst unchanged.
func (d *decoder) string(path string, dst *string) error {
	tok, err := d.token(path)
	if err != nil {
		return err
	}
	switch v := tok.(type) {
	case nil:
		return nil
	case string:
		*dst = v
		return nil
	}
	return typeError(path, "a string", tok)
}

// integer reads an integer field given as a number or a quoted number, as
// protobuf JSON allows for int32 fields, and checks it is in lo..hi; null
// reads as 0.
func (d *decoder) integer(path string, lo, hi int64) (int64, error) {
	tok, err := d.token(path)
	if err != nil || tok == nil {
		return 0, err
	}
	return intValue(path, tok, lo, hi)
}

// decodeObject reads a JSON object into dst using the field table. Null
// is rejected: protobuf does not allow it as an element of a repeated field.
func decodeObject[T any](d *decoder, path string, fields []field[T], dst *T) error {
	tok, err := d.token(path)
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return typeError(path, "an object", tok)
	}
	return decodeObjectBody(d, path, fields, dst)
}

// decodeObjectBody reads the members of an object whose "{" has been read.
func decodeObjectBody[T any](d *decoder, path string, fields []field[T], dst *T) error {
	given := make(map[string]string, len(fields)) // field name -> key as written
	for d.dec.More() {
		tok, err := d.token(path)
		if err != nil {
			return err
		}
		key := tok.(string) // the decoder guarantees object keys are strings
		f, ok := lookup(fields, key)
		if !ok {
			return &ConfigError{Field: path, Msg: fmt.Sprintf("unknown field %q", key)}
		}
		same := f.name
		if a, ok := aliasOf[f.name]; ok {
			same = a
		}
		if prev, dup := given[same]; dup {
			msg := fmt.Sprintf("duplicate field %q", key)
			if prev != key {
				msg += fmt.Sprintf(" (already given as %q)", prev)
			}
			return &ConfigError{Field: path, Msg: msg}
		}
		given[same] = key
		fieldPath := f.name
		if path != "" {
			fieldPath = path + "." + f.name
		}
		if err := f.decode(d, fieldPath, dst); err != nil {
			return err
		}
	}
	_, err := d.token(path) // the closing "}"
	return err
}

// decodeArray reads a JSON array (or null), calling elem for each element
// with the element's path; elem must consume exactly one value.
func decodeArray(d *decoder, path string, elem func(path string) error) error {
	tok, err := d.token(path)
	if err != nil {
		return err
	}
	switch tok {
	case nil:
		return nil
	case json.Delim('['):
	default:
		return typeError(path, "an array", tok)
	}
	for i := 0; d.dec.More(); i++ {
		if err := elem(fmt.Sprintf("%s[%d]", path, i)); err != nil {
			return err
		}
	}
	_, err = d.token(path) // the closing "]"
	return err
}

// lookup finds the field named key in either spelling.
func lookup[T any](fields []field[T], key string) (field[T], bool) {
	for _, f := range fields {
		if key == f.name || key == lowerCamel(f.name) {
			return f, true
		}
	}
	return field[T]{}, false
}

// lowerCamel converts a protobuf field name to its JSON name, as protoc
// does: "warm_up_batch_request_json" becomes "warmUpBatchRequestJson".
func lowerCamel(name string) string {
	var b strings.Builder
	upper := false
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '_':
			upper = true
		case upper && 'a' <= c && c <= 'z':
			b.WriteByte(c - 'a' + 'A')
			upper = false
		default:
			b.WriteByte(c)
			upper = false
		}
	}
	return b.String()
}

// contractFields are the fields of a contracts entry that the management
// documents read: the contract's name and some of its settings (the router
// and the servables have their own shapes there).
func contractFields() []field[Contract] {
	return []field[Contract]{
		{"organization", func(d *decoder, path string, c *Contract) error {
			return d.string(path, &c.Organization)
		}},
		{"project", func(d *decoder, path string, c *Contract) error {
			return d.string(path, &c.Project)
		}},
		{"contract_number", func(d *decoder, path string, c *Contract) error {
			n, err := d.integer(path, math.MinInt32, math.MaxInt32)
			c.Number = int(n)
			return err
		}},
		{"expiration", func(d *decoder, path string, c *Contract) error {
			return decodeOneOf(d, path, true, expirationOptions(), &c.Expiration,
				func(e *Expiration, key string) { e.Kind = ExpirationKind(key) })
		}},
		{"sticky_key", func(d *decoder, path string, c *Contract) error {
			return d.string(path, &c.StickyKey)
		}},
	}
}

// expirationOptions are the keys of an expiration object.
func expirationOptions() []field[Expiration] {
	return []field[Expiration]{
		{string(ExpireKeepLatest), func(d *decoder, path string, e *Expiration) error {
			n, err := d.integer(path, math.MinInt32, math.MaxInt32)
			*e = Expiration{Kind: ExpireKeepLatest, Keep: int(n)}
			return err
		}},
		{string(ExpireKeepTopRanked), func(d *decoder, path string, e *Expiration) error {
			*e = Expiration{Kind: ExpireKeepTopRanked}
			return decodeObject(d, path, []field[Expiration]{
				{"n", func(d *decoder, path string, e *Expiration) error {
					n, err := d.integer(path, math.MinInt32, math.MaxInt32)
					e.Keep = int(n)
					return err
				}},
				{"metric", func(d *decoder, path string, e *Expiration) error {
					return d.string(path, &e.Metric)
				}},
			}, e)
		}},
	}
}

// decodeShadow reads a servable's shadow object into dst; null leaves it
// alone, {} shadows every request.
func decodeShadow(d *decoder, path string, dst **Shadow) error {
	tok, err := d.token(path)
	switch {
	case err != nil:
		return err
	case tok == nil:
		return nil
	case tok != json.Delim('{'):
		return typeError(path, "an object", tok)
	}
	sh := &Shadow{SampleRate: 1}
	*dst = sh
	return decodeObjectBody(d, path, []field[Shadow]{
		{"sample_rate", func(d *decoder, path string, sh *Shadow) error {
			return d.float(path, &sh.SampleRate)
		}},
	}, sh)
}

// ruleOptions are the keys of a validity rule object.
func ruleOptions() []field[ValidityRule] {
	empty := func(kind RuleKind) field[ValidityRule] {
		return field[ValidityRule]{string(kind), func(d *decoder, path string, r *ValidityRule) error {
			*r = ValidityRule{Kind: kind}
			return decodeObject(d, path, []field[ValidityRule]{}, r)
		}}
	}
	return []field[ValidityRule]{
		empty(RuleImmediatelyValid),
		empty(RuleNeverValid),
		{string(RuleValidAfterMs), func(d *decoder, path string, r *ValidityRule) error {
			*r = ValidityRule{Kind: RuleValidAfterMs}
			return decodeObject(d, path, []field[ValidityRule]{
				{"ms", func(d *decoder, path string, r *ValidityRule) error {
					ms, err := d.integer(path, 0, maxValidAfterMs)
					r.After = time.Duration(ms) * time.Millisecond
					return err
				}},
			}, r)
		}},
		{string(RuleMinServedEvents), func(d *decoder, path string, r *ValidityRule) error {
			*r = ValidityRule{Kind: RuleMinServedEvents}
			return decodeObject(d, path, []field[ValidityRule]{
				{"count", func(d *decoder, path string, r *ValidityRule) error {
					n, err := d.integer(path, 0, maxEventCount)
					r.Count = n
					return err
				}},
			}, r)
		}},
		{string(RuleMinMetric), func(d *decoder, path string, r *ValidityRule) error {
			*r = ValidityRule{Kind: RuleMinMetric}
			return decodeObject(d, path, []field[ValidityRule]{
				{"metric", func(d *decoder, path string, r *ValidityRule) error {
					return d.string(path, &r.Metric)
				}},
				{"threshold", func(d *decoder, path string, r *ValidityRule) error {
					return d.float(path, &r.Threshold)
				}},
			}, r)
		}},
	}
}

// phaseInOptions are the keys of a phase_in object.
func phaseInOptions() []field[PhaseIn] {
	return []field[PhaseIn]{
		{string(PhaseInImmediate), func(d *decoder, path string, p *PhaseIn) error {
			*p = PhaseIn{Kind: PhaseInImmediate}
			return decodeObject(d, path, []field[PhaseIn]{}, p)
		}},
		{string(PhaseInLinear), func(d *decoder, path string, p *PhaseIn) error {
			*p = PhaseIn{Kind: PhaseInLinear}
			return decodeObject(d, path, []field[PhaseIn]{
				{"secs", func(d *decoder, path string, p *PhaseIn) error {
					secs, err := d.integer(path, math.MinInt32, math.MaxInt32)
					p.Over = time.Duration(secs) * time.Second
					return err
				}},
			}, p)
		}},
	}
}

// loggingFields are the fields of a servable's logging object.
func loggingFields() []field[ServableLogging] {
	return []field[ServableLogging]{
		{"log_level", func(d *decoder, path string, l *ServableLogging) error {
			return d.string(path, &l.Level)
		}},
		{"sample_rate", func(d *decoder, path string, l *ServableLogging) error {
			return d.float(path, &l.SampleRate)
		}},
		{"key_features", func(d *decoder, path string, l *ServableLogging) error {
			return decodeArray(d, path, func(path string) error {
				tok, err := d.token(path)
				if err != nil {
					return err
				}
				f, ok := tok.(string)
				if !ok {
					return typeError(path, "a string", tok)
				}
				l.KeyFeatures = append(l.KeyFeatures, f)
				return nil
			})
		}},
		{"key_features_separator", func(d *decoder, path string, l *ServableLogging) error {
			return d.string(path, &l.KeyFeaturesSeparator)
		}},
	}
}

// decodeOneOf reads an object that must hold exactly one of the keys in
// options (a protobuf oneof), such as {"keep_latest": 2}. An unknown key is
// passed to unknown and its value skipped, so that validation can name the
// contract and servable in the error; nullable says whether null (the
// default, dst left alone) is accepted instead of an object.
func decodeOneOf[T any](d *decoder, path string, nullable bool, options []field[T], dst *T, unknown func(dst *T, key string)) error {
	tok, err := d.token(path)
	if err != nil {
		return err
	}
	if tok != json.Delim('{') && (tok != nil || !nullable) {
		return typeError(path, "an object", tok)
	}
	if tok == nil {
		return nil
	}
	first := ""
	for d.dec.More() {
		tok, err := d.token(path)
		if err != nil {
			return err
		}
		key := tok.(string)
		if first != "" {
			return &ConfigError{Field: path, Msg: fmt.Sprintf("give exactly one of %s, got %q and %q", optionNames(options), first, key)}
		}
		first = key
		f, ok := lookup(options, key)
		if !ok {
			unknown(dst, key)
			if err := d.skip(path + "." + key); err != nil {
				return err
			}
			continue
		}
		if err := f.decode(d, path+"."+f.name, dst); err != nil {
			return err
		}
	}
	if first == "" {
		return &ConfigError{Field: path, Msg: fmt.Sprintf("expected one of %s, got an empty object", optionNames(options))}
	}
	_, err = d.token(path) // the closing "}"
	return err
}

// optionNames lists the names of options as "a, b or c".
func optionNames[T any](options []field[T]) string {
	names := make([]string, len(options))
	for i, o := range options {
		names[i] = o.name
	}
	return orList(names)
}

// float reads a finite number given as a number or a quoted number, as
// protobuf JSON allows for double fields (its "NaN" and "Infinity" are
// rejected); null leaves dst unchanged.
func (d *decoder) float(path string, dst *float64) error {
	tok, err := d.token(path)
	if err != nil || tok == nil {
		return err
	}
	f, err := floatValue(path, tok)
	if err == nil {
		*dst = f
	}
	return err
}
