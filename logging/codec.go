package logging

import (
	"bytes"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/grovepb"
)

// The record value encodings as the HeaderEncoding header names them: the
// names of conf.EncodingProto and conf.EncodingJSON, the values of the
// kafka.encoding config key.
const (
	// EncodingProto is binary protobuf.
	EncodingProto = "proto"
	// EncodingJSON is protojson with the .proto file's snake_case field names.
	EncodingJSON = "json"
)

// The record headers Grove sets on every prediction log record.
const (
	// HeaderEncoding names the value's encoding: EncodingProto or EncodingJSON.
	HeaderEncoding = "grove-encoding"
	// HeaderSchema names the value's message type: SchemaName.
	HeaderSchema = "grove-schema"
	// HeaderContentType is the value's MIME type: ContentTypeProto or ContentTypeJSON.
	HeaderContentType = "content-type"
)

// Header values.
const (
	// SchemaName is the full protobuf name of the record value's message.
	SchemaName = "grove.v1.PredictionEvent"
	// ContentTypeProto is the MIME type of the proto encoding.
	ContentTypeProto = "application/x-protobuf"
	// ContentTypeJSON is the MIME type of the json encoding.
	ContentTypeJSON = "application/json"
)

var (
	jsonMarshal   = protojson.MarshalOptions{UseProtoNames: true}
	jsonUnmarshal = protojson.UnmarshalOptions{DiscardUnknown: true}
)

// Encode encodes an event as a record value in the given encoding. JSON
// is one line with the .proto field names (snake_case), fields at their
// default value left out; like all protojson output its spacing is not
// stable, so compare parsed values, not bytes. Encoding fails when a
// string field is not valid UTF-8.
func Encode(ev *grovepb.PredictionEvent, encoding conf.Encoding) ([]byte, error) {
	switch encoding {
	case conf.EncodingProto:
		return proto.Marshal(ev)
	case conf.EncodingJSON:
		return jsonMarshal.Marshal(ev)
	}
	// A programming error: only converting an integer makes a
	// conf.Encoding that is neither constant.
	return nil, fmt.Errorf("prediction log encoding %v is not conf.EncodingProto or conf.EncodingJSON", encoding)
}

// Decode decodes a prediction log record value. The encoding is the one
// the HeaderEncoding header names; without that header, a value whose
// first non-space byte is '{' is JSON and anything else protobuf (a
// protobuf PredictionEvent never starts with '{'). A HeaderSchema header
// naming another message is an error. Unknown fields are ignored, so
// records from a newer Grove decode.
func Decode(value []byte, headers []kgo.RecordHeader) (*grovepb.PredictionEvent, error) {
	encoding := ""
	for _, h := range headers {
		switch h.Key {
		case HeaderEncoding:
			encoding = string(h.Value)
		case HeaderSchema:
			if string(h.Value) != SchemaName {
				return nil, fmt.Errorf("record schema %q is not %s", h.Value, SchemaName)
			}
		}
	}
	if encoding == "" {
		encoding = EncodingProto
		if v := bytes.TrimLeft(value, " \t\r\n"); len(v) > 0 && v[0] == '{' {
			encoding = EncodingJSON
		}
	}
	ev := new(grovepb.PredictionEvent)
	var err error
	switch encoding {
	case EncodingProto:
		err = proto.Unmarshal(value, ev)
	case EncodingJSON:
		err = jsonUnmarshal.Unmarshal(value, ev)
	default:
		return nil, fmt.Errorf("unknown record encoding %q (want %s or %s)", encoding, EncodingProto, EncodingJSON)
	}
	if err != nil {
		return nil, fmt.Errorf("decoding %s prediction event: %w", encoding, err)
	}
	return ev, nil
}

// recordHeaders returns the headers of a record in the given encoding.
// Records share the slice, which nothing modifies.
func recordHeaders(encoding conf.Encoding) []kgo.RecordHeader {
	name, ct := EncodingProto, ContentTypeProto
	if encoding == conf.EncodingJSON {
		name, ct = EncodingJSON, ContentTypeJSON
	}
	return []kgo.RecordHeader{
		{Key: HeaderContentType, Value: []byte(ct)},
		{Key: HeaderEncoding, Value: []byte(name)},
		{Key: HeaderSchema, Value: []byte(SchemaName)},
	}
}
