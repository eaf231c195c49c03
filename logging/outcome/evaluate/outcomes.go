package evaluate

import (
	"math"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging"
	"github.com/groveml/grove/logging/outcome"
)

// outcomeDecoder decodes the outcomes of the outcome topic and of
// GROUP-repartition: as outcome.DecodeRecord and outcome.ParseProto do,
// but a protobuf value without reflection, into one reused outcome, its
// names that recur (model paths, contracts, label names) kept once. The
// outcome it returns is its own, valid until the next call (the join and
// the re-keyed record keep none of it). Not safe for concurrent use.
type outcomeDecoder struct {
	names nameTable
	// o and ts are what decode returns, reused, and labels o's labels.
	o      grovepb.Outcome
	ts     timestamppb.Timestamp
	labels map[string]float64
}

// record decodes a record of the outcome topic (outcome.DecodeRecord);
// proto reports that its value is protobuf, which can then be re-keyed as
// it is.
func (d *outcomeDecoder) record(value []byte, headers []kgo.RecordHeader) (o *grovepb.Outcome, proto bool, err error) {
	// encoding is the last grove-encoding header's, as in DecodeRecord; a
	// foreign grove-schema header anywhere, before or after it, leaves the
	// record to DecodeRecord, which says why it is not an outcome.
	encoding := 0 // 0: none named, 1: protobuf, 2: another
	foreign := false
	for _, h := range headers {
		switch h.Key {
		case logging.HeaderEncoding:
			encoding = 2
			if string(h.Value) == logging.EncodingProto {
				encoding = 1
			}
		case logging.HeaderSchema:
			if string(h.Value) != outcome.SchemaName {
				foreign = true
			}
		}
	}
	if !foreign && (encoding == 1 || (encoding == 0 && !looksJSON(value))) {
		o, err = d.decode(value)
		return o, true, err
	}
	o, err = outcome.DecodeRecord(value, headers)
	return o, false, err
}

// decode decodes a protobuf grove.v1.Outcome (outcome.ParseProto).
func (d *outcomeDecoder) decode(b []byte) (*grovepb.Outcome, error) {
	if d.labels == nil {
		d.labels = map[string]float64{}
	}
	clear(d.labels)
	o := &d.o
	*o = grovepb.Outcome{}
	err := fields(b, func(num protowire.Number, typ protowire.Type, b []byte) (n int, err error) {
		switch {
		case typ == protowire.BytesType && num == 1:
			o.OutcomeId, n, err = str(b)
		case typ == protowire.BytesType && num == 2:
			o.RequestId, n, err = str(b)
		case typ == protowire.VarintType && num == 3:
			var v uint64
			v, n, err = varintField(b)
			o.Item = int64(v)
		case typ == protowire.VarintType && num == 4:
			var v uint64
			v, n, err = varintField(b)
			o.Row = int64(v)
		case typ == protowire.BytesType && num == 5:
			o.Key, n, err = str(b)
		case typ == protowire.BytesType && num == 6:
			n, err = timestampField(&o.EventTime, &d.ts, b)
		case typ == protowire.BytesType && num == 7:
			var v []byte
			if v, n, err = bytesField(b); err == nil {
				o.Labels = d.labels
				err = d.label(v)
			}
		case typ == protowire.BytesType && num == 8:
			o.ModelPath, n, err = d.names.field(b)
		case typ == protowire.BytesType && num == 9:
			o.Contract, n, err = d.names.field(b)
		default:
			return -1, nil
		}
		return n, err
	})
	if err != nil {
		return nil, err
	}
	return o, nil
}

// label decodes one entry of the labels map (a key, a double; either
// missing is its zero value, the last of a key wins).
func (d *outcomeDecoder) label(b []byte) error {
	var name string
	var value float64
	err := fields(b, func(num protowire.Number, typ protowire.Type, b []byte) (n int, err error) {
		switch {
		case typ == protowire.BytesType && num == 1:
			name, n, err = d.names.field(b)
		case typ == protowire.Fixed64Type && num == 2:
			v, m := protowire.ConsumeFixed64(b)
			if m < 0 {
				return 0, protowire.ParseError(m)
			}
			value, n = math.Float64frombits(v), m
		default:
			return -1, nil
		}
		return n, err
	})
	if err != nil {
		return err
	}
	d.labels[name] = value
	return nil
}
