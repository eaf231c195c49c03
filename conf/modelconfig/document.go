package modelconfig

// The management documents' field tables: the fields of the model
// config's objects in its shapes (snake_case or lowerCamelCase names,
// unknown fields rejected, null as the default), read by jsondoc's
// table-driven decoder, which manage.go extends with ForestFlow's shapes.
// The model config itself is read with protojson (model.go).

import (
	"encoding/json"
	"math"
	"time"

	"github.com/groveml/grove/internal/jsondoc"
)

// modelMetadataFields are the fields of a model_metadata entry, as a serve
// request gives them.
func modelMetadataFields() []jsondoc.Field[Model] {
	return []jsondoc.Field[Model]{
		{Name: "model_path", Decode: func(d *jsondoc.Decoder, path string, m *Model) error {
			return d.String(path, &m.Path)
		}},
		{Name: "checksum", Decode: func(d *jsondoc.Decoder, path string, m *Model) error {
			return d.String(path, &m.Checksum)
		}},
		{Name: "warm_up_batch_request_json", Decode: func(d *jsondoc.Decoder, path string, m *Model) error {
			return d.String(path, &m.WarmUpJSON)
		}},
		{Name: "eviction_grace_period_in_ms", Decode: func(d *jsondoc.Decoder, path string, m *Model) error {
			ms, err := d.Integer(path, 0, maxGracePeriodMs)
			if err != nil {
				return err
			}
			m.EvictionGracePeriod = time.Duration(ms) * time.Millisecond
			return nil
		}},
		{Name: "replicas", Decode: func(d *jsondoc.Decoder, path string, m *Model) error {
			n, err := d.Integer(path, 0, MaxReplicas)
			m.Serving.Replicas = int(n)
			return err
		}},
		{Name: "max_batch_rows", Decode: func(d *jsondoc.Decoder, path string, m *Model) error {
			n, err := d.Integer(path, 0, maxBatchRowsLimit)
			m.Serving.MaxBatchRows = int(n)
			return err
		}},
		{Name: "max_queue_delay_us", Decode: func(d *jsondoc.Decoder, path string, m *Model) error {
			us, err := d.Integer(path, 0, maxQueueDelayUs)
			m.Serving.MaxQueueDelay = time.Duration(us) * time.Microsecond
			return err
		}},
		{Name: "intra_op_threads", Decode: func(d *jsondoc.Decoder, path string, m *Model) error {
			n, err := d.Integer(path, 0, maxIntraOpThreads)
			m.Serving.IntraOpThreads = int(n)
			return err
		}},
		{Name: "default_timeout_ms", Decode: func(d *jsondoc.Decoder, path string, m *Model) error {
			ms, err := d.Integer(path, 0, maxTimeoutMs)
			m.DefaultTimeout = time.Duration(ms) * time.Millisecond
			return err
		}},
		{Name: "queue_timeout_ms", Decode: func(d *jsondoc.Decoder, path string, m *Model) error {
			ms, err := d.Integer(path, 0, maxTimeoutMs)
			m.QueueTimeout = time.Duration(ms) * time.Millisecond
			return err
		}},
	}
}

// contractFields are the fields of a contracts entry that the management
// documents read: the contract's name and some of its settings (the router
// and the servables have their own shapes there).
func contractFields() []jsondoc.Field[Contract] {
	return []jsondoc.Field[Contract]{
		{Name: "organization", Decode: func(d *jsondoc.Decoder, path string, c *Contract) error {
			return d.String(path, &c.Organization)
		}},
		{Name: "project", Decode: func(d *jsondoc.Decoder, path string, c *Contract) error {
			return d.String(path, &c.Project)
		}},
		{Name: "contract_number", Decode: func(d *jsondoc.Decoder, path string, c *Contract) error {
			n, err := d.Integer(path, math.MinInt32, math.MaxInt32)
			c.Number = int(n)
			return err
		}},
		{Name: "expiration", Decode: func(d *jsondoc.Decoder, path string, c *Contract) error {
			return jsondoc.DecodeOneOf(d, path, true, expirationOptions(), &c.Expiration,
				func(e *Expiration, key string) { e.Kind = ExpirationKind(key) })
		}},
		{Name: "sticky_key", Decode: func(d *jsondoc.Decoder, path string, c *Contract) error {
			return d.String(path, &c.StickyKey)
		}},
	}
}

// expirationOptions are the keys of an expiration object.
func expirationOptions() []jsondoc.Field[Expiration] {
	return []jsondoc.Field[Expiration]{
		{Name: string(ExpireKeepLatest), Decode: func(d *jsondoc.Decoder, path string, e *Expiration) error {
			n, err := d.Integer(path, math.MinInt32, math.MaxInt32)
			*e = Expiration{Kind: ExpireKeepLatest, Keep: int(n)}
			return err
		}},
		{Name: string(ExpireKeepTopRanked), Decode: func(d *jsondoc.Decoder, path string, e *Expiration) error {
			*e = Expiration{Kind: ExpireKeepTopRanked}
			return jsondoc.DecodeObject(d, path, []jsondoc.Field[Expiration]{
				{Name: "n", Decode: func(d *jsondoc.Decoder, path string, e *Expiration) error {
					n, err := d.Integer(path, math.MinInt32, math.MaxInt32)
					e.Keep = int(n)
					return err
				}},
				{Name: "metric", Decode: func(d *jsondoc.Decoder, path string, e *Expiration) error {
					return d.String(path, &e.Metric)
				}},
			}, e)
		}},
	}
}

// decodeShadow reads a servable's shadow object into dst; null leaves it
// alone, {} shadows every request.
func decodeShadow(d *jsondoc.Decoder, path string, dst **Shadow) error {
	tok, err := d.Token(path)
	switch {
	case err != nil:
		return err
	case tok == nil:
		return nil
	case tok != json.Delim('{'):
		return jsondoc.TypeError(path, "an object", tok)
	}
	sh := &Shadow{SampleRate: 1}
	*dst = sh
	return jsondoc.DecodeObjectBody(d, path, []jsondoc.Field[Shadow]{
		{Name: "sample_rate", Decode: func(d *jsondoc.Decoder, path string, sh *Shadow) error {
			return d.Float(path, &sh.SampleRate)
		}},
	}, sh)
}

// ruleOptions are the keys of a validity rule object.
func ruleOptions() []jsondoc.Field[ValidityRule] {
	empty := func(kind RuleKind) jsondoc.Field[ValidityRule] {
		return jsondoc.Field[ValidityRule]{Name: string(kind), Decode: func(d *jsondoc.Decoder, path string, r *ValidityRule) error {
			*r = ValidityRule{Kind: kind}
			return jsondoc.DecodeObject(d, path, []jsondoc.Field[ValidityRule]{}, r)
		}}
	}
	return []jsondoc.Field[ValidityRule]{
		empty(RuleImmediatelyValid),
		empty(RuleNeverValid),
		{Name: string(RuleValidAfterMs), Decode: func(d *jsondoc.Decoder, path string, r *ValidityRule) error {
			*r = ValidityRule{Kind: RuleValidAfterMs}
			return jsondoc.DecodeObject(d, path, []jsondoc.Field[ValidityRule]{
				{Name: "ms", Decode: func(d *jsondoc.Decoder, path string, r *ValidityRule) error {
					ms, err := d.Integer(path, 0, maxValidAfterMs)
					r.After = time.Duration(ms) * time.Millisecond
					return err
				}},
			}, r)
		}},
		{Name: string(RuleMinServedEvents), Decode: func(d *jsondoc.Decoder, path string, r *ValidityRule) error {
			*r = ValidityRule{Kind: RuleMinServedEvents}
			return jsondoc.DecodeObject(d, path, []jsondoc.Field[ValidityRule]{
				{Name: "count", Decode: func(d *jsondoc.Decoder, path string, r *ValidityRule) error {
					n, err := d.Integer(path, 0, maxEventCount)
					r.Count = n
					return err
				}},
			}, r)
		}},
		{Name: string(RuleMinMetric), Decode: func(d *jsondoc.Decoder, path string, r *ValidityRule) error {
			*r = ValidityRule{Kind: RuleMinMetric}
			return jsondoc.DecodeObject(d, path, []jsondoc.Field[ValidityRule]{
				{Name: "metric", Decode: func(d *jsondoc.Decoder, path string, r *ValidityRule) error {
					return d.String(path, &r.Metric)
				}},
				{Name: "threshold", Decode: func(d *jsondoc.Decoder, path string, r *ValidityRule) error {
					return d.Float(path, &r.Threshold)
				}},
			}, r)
		}},
	}
}

// phaseInOptions are the keys of a phase_in object.
func phaseInOptions() []jsondoc.Field[PhaseIn] {
	return []jsondoc.Field[PhaseIn]{
		{Name: string(PhaseInImmediate), Decode: func(d *jsondoc.Decoder, path string, p *PhaseIn) error {
			*p = PhaseIn{Kind: PhaseInImmediate}
			return jsondoc.DecodeObject(d, path, []jsondoc.Field[PhaseIn]{}, p)
		}},
		{Name: string(PhaseInLinear), Decode: func(d *jsondoc.Decoder, path string, p *PhaseIn) error {
			*p = PhaseIn{Kind: PhaseInLinear}
			return jsondoc.DecodeObject(d, path, []jsondoc.Field[PhaseIn]{
				{Name: "secs", Decode: func(d *jsondoc.Decoder, path string, p *PhaseIn) error {
					secs, err := d.Integer(path, math.MinInt32, math.MaxInt32)
					p.Over = time.Duration(secs) * time.Second
					return err
				}},
			}, p)
		}},
	}
}

// loggingFields are the fields of a servable's logging object.
func loggingFields() []jsondoc.Field[ServableLogging] {
	return []jsondoc.Field[ServableLogging]{
		{Name: "log_level", Decode: func(d *jsondoc.Decoder, path string, l *ServableLogging) error {
			return d.String(path, &l.Level)
		}},
		{Name: "sample_rate", Decode: func(d *jsondoc.Decoder, path string, l *ServableLogging) error {
			return d.Float(path, &l.SampleRate)
		}},
		{Name: "key_features", Decode: func(d *jsondoc.Decoder, path string, l *ServableLogging) error {
			return jsondoc.DecodeArray(d, path, func(path string) error {
				tok, err := d.Token(path)
				if err != nil {
					return err
				}
				f, ok := tok.(string)
				if !ok {
					return jsondoc.TypeError(path, "a string", tok)
				}
				l.KeyFeatures = append(l.KeyFeatures, f)
				return nil
			})
		}},
		{Name: "key_features_separator", Decode: func(d *jsondoc.Decoder, path string, l *ServableLogging) error {
			return d.String(path, &l.KeyFeaturesSeparator)
		}},
	}
}
