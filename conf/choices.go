package conf

import (
	"encoding"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/groveml/grove/conf/modelconfig"
)

// The choices of the server config, the keys whose value is one of a
// fixed list of names, are types that check themselves when read: from
// the YAML file (UnmarshalYAML, an error on the value's line that the
// loader names with its key) and from a flag (UnmarshalText, an error
// naming the key and the flag), each with the message that lists the
// names. A value of one of these types is one of its constants (unless
// code converts an integer to it, a programming error), so the code that
// uses it switches on them and has nothing to refuse. The zero
// value of each is its first constant (LogLevel's is info); String and
// MarshalText give the config name.

// Acks is kafka.acks: which brokers acknowledge a record before the
// producer counts it delivered.
type Acks uint8

// The values of kafka.acks.
const (
	// AcksAll waits for every in-sync replica, with the idempotent
	// producer ("all", the default).
	AcksAll Acks = iota
	// AcksLeader waits for the partition leader alone; idempotence is off ("leader").
	AcksLeader
	// AcksNone waits for no broker; idempotence is off ("none").
	AcksNone
)

func (Acks) names() []string { return []string{"all", "leader", "none"} }

// String returns the config name: all, leader or none.
func (a Acks) String() string { return choiceName(a, a.names()) }

// MarshalText returns the config name.
func (a Acks) MarshalText() ([]byte, error) { return marshalChoice(a, a.names()) }

// UnmarshalText sets a to the value named text, or returns an error listing the names.
func (a *Acks) UnmarshalText(text []byte) error {
	return parseChoice(a, text, a.names(), "all, leader or none")
}

// UnmarshalYAML reads a YAML scalar as UnmarshalText does.
func (a *Acks) UnmarshalYAML(n *yaml.Node) error { return unmarshalYAMLText(n, a) }

// Compression is kafka.compression: the codec of the producer's batches.
type Compression uint8

// The values of kafka.compression.
const (
	// CompressionNone sends batches uncompressed ("none").
	CompressionNone Compression = iota
	// CompressionGzip is gzip ("gzip").
	CompressionGzip
	// CompressionSnappy is snappy ("snappy", the default in DefaultServer).
	CompressionSnappy
	// CompressionLz4 is LZ4 ("lz4").
	CompressionLz4
	// CompressionZstd is Zstandard ("zstd").
	CompressionZstd
)

func (Compression) names() []string { return []string{"none", "gzip", "snappy", "lz4", "zstd"} }

// String returns the config name: none, gzip, snappy, lz4 or zstd.
func (c Compression) String() string { return choiceName(c, c.names()) }

// MarshalText returns the config name.
func (c Compression) MarshalText() ([]byte, error) { return marshalChoice(c, c.names()) }

// UnmarshalText sets c to the value named text, or returns an error listing the names.
func (c *Compression) UnmarshalText(text []byte) error {
	return parseChoice(c, text, c.names(), "none, gzip, snappy, lz4 or zstd")
}

// UnmarshalYAML reads a YAML scalar as UnmarshalText does.
func (c *Compression) UnmarshalYAML(n *yaml.Node) error { return unmarshalYAMLText(n, c) }

// Encoding is kafka.encoding: how a prediction log record's value is
// encoded. Its config name is also the value of the record's
// grove-encoding header.
type Encoding uint8

// The values of kafka.encoding.
const (
	// EncodingProto is binary protobuf ("proto", the default).
	EncodingProto Encoding = iota
	// EncodingJSON is protojson with the .proto field names ("json").
	EncodingJSON
)

func (Encoding) names() []string { return []string{"proto", "json"} }

// String returns the config name: proto or json.
func (e Encoding) String() string { return choiceName(e, e.names()) }

// MarshalText returns the config name.
func (e Encoding) MarshalText() ([]byte, error) { return marshalChoice(e, e.names()) }

// UnmarshalText sets e to the value named text, or returns an error listing the names.
func (e *Encoding) UnmarshalText(text []byte) error {
	return parseChoice(e, text, e.names(), "proto or json")
}

// UnmarshalYAML reads a YAML scalar as UnmarshalText does.
func (e *Encoding) UnmarshalYAML(n *yaml.Node) error { return unmarshalYAMLText(n, e) }

// SASLMechanism is kafka.sasl.mechanism: how the Kafka clients
// authenticate to the brokers, if at all.
type SASLMechanism uint8

// The values of kafka.sasl.mechanism.
const (
	// SASLNone is no SASL ("", the default).
	SASLNone SASLMechanism = iota
	// SASLPlain is PLAIN ("PLAIN").
	SASLPlain
	// SASLScramSHA256 is SCRAM-SHA-256 ("SCRAM-SHA-256").
	SASLScramSHA256
	// SASLScramSHA512 is SCRAM-SHA-512 ("SCRAM-SHA-512").
	SASLScramSHA512
)

func (SASLMechanism) names() []string { return []string{"", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} }

// String returns the config name: "" (no SASL), PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
func (m SASLMechanism) String() string { return choiceName(m, m.names()) }

// MarshalText returns the config name.
func (m SASLMechanism) MarshalText() ([]byte, error) { return marshalChoice(m, m.names()) }

// UnmarshalText sets m to the value named text ("" is SASLNone), or
// returns an error listing the mechanisms.
func (m *SASLMechanism) UnmarshalText(text []byte) error {
	return parseChoice(m, text, m.names(), "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
}

// UnmarshalYAML reads a YAML scalar as UnmarshalText does.
func (m *SASLMechanism) UnmarshalYAML(n *yaml.Node) error { return unmarshalYAMLText(n, m) }

// ClientAuth is tls.client_auth: whether the listeners ask for client
// certificates.
type ClientAuth uint8

// The values of tls.client_auth.
const (
	// ClientAuthNone asks for no client certificate ("none", the default).
	ClientAuthNone ClientAuth = iota
	// ClientAuthRequest verifies a certificate the client gives ("request").
	ClientAuthRequest
	// ClientAuthRequire does so too, and refuses every route but the
	// probes to a caller without one ("require").
	ClientAuthRequire
)

func (ClientAuth) names() []string { return []string{"none", "request", "require"} }

// String returns the config name: none, request or require.
func (c ClientAuth) String() string { return choiceName(c, c.names()) }

// MarshalText returns the config name.
func (c ClientAuth) MarshalText() ([]byte, error) { return marshalChoice(c, c.names()) }

// UnmarshalText sets c to the value named text, or returns an error listing the names.
func (c *ClientAuth) UnmarshalText(text []byte) error {
	return parseChoice(c, text, c.names(), "none, request or require")
}

// UnmarshalYAML reads a YAML scalar as UnmarshalText does.
func (c *ClientAuth) UnmarshalYAML(n *yaml.Node) error { return unmarshalYAMLText(n, c) }

// LogFormat is log_format: how Grove's own log lines are written.
type LogFormat uint8

// The values of log_format.
const (
	// LogFormatText is slog's key=value text ("text", the default).
	LogFormatText LogFormat = iota
	// LogFormatJSON is one JSON object a line ("json").
	LogFormatJSON
)

func (LogFormat) names() []string { return []string{"text", "json"} }

// String returns the config name: text or json.
func (f LogFormat) String() string { return choiceName(f, f.names()) }

// MarshalText returns the config name.
func (f LogFormat) MarshalText() ([]byte, error) { return marshalChoice(f, f.names()) }

// UnmarshalText sets f to the value named text, or returns an error listing the names.
func (f *LogFormat) UnmarshalText(text []byte) error {
	return parseChoice(f, text, f.names(), "text or json")
}

// UnmarshalYAML reads a YAML scalar as UnmarshalText does.
func (f *LogFormat) UnmarshalYAML(n *yaml.Node) error { return unmarshalYAMLText(n, f) }

// LoadPolicy is load_policy: when a model entry without a load of its
// own is loaded (modelconfig.Model.Load).
type LoadPolicy uint8

// The values of load_policy.
const (
	// LoadPolicyEager loads every model the config lists at once ("eager", the default).
	LoadPolicyEager LoadPolicy = iota
	// LoadPolicyOnDemand loads a model on the first request for it ("on_demand").
	LoadPolicyOnDemand
)

func (LoadPolicy) names() []string { return []string{"eager", "on_demand"} }

// String returns the config name: eager or on_demand.
func (l LoadPolicy) String() string { return choiceName(l, l.names()) }

// MarshalText returns the config name.
func (l LoadPolicy) MarshalText() ([]byte, error) { return marshalChoice(l, l.names()) }

// UnmarshalText sets l to the value named text, or returns an error listing the names.
func (l *LoadPolicy) UnmarshalText(text []byte) error {
	return parseChoice(l, text, l.names(), "eager or on_demand")
}

// UnmarshalYAML reads a YAML scalar as UnmarshalText does.
func (l *LoadPolicy) UnmarshalYAML(n *yaml.Node) error { return unmarshalYAMLText(n, l) }

// Model is the model config's load value of the policy
// (modelconfig.LoadEager or LoadOnDemand).
func (l LoadPolicy) Model() modelconfig.Load {
	if l == LoadPolicyOnDemand {
		return modelconfig.LoadOnDemand
	}
	return modelconfig.LoadEager
}

// PredictionLogLevel is prediction_log.default_level: how much of the
// direct model calls the prediction log records. Its names are the model
// config's (modelconfig.LogLevelNone, LogLevelFull, LogLevelSample), in
// capitals only.
type PredictionLogLevel uint8

// The values of prediction_log.default_level.
const (
	// PredictionLogNone logs nothing ("NONE", the default).
	PredictionLogNone PredictionLogLevel = iota
	// PredictionLogFull logs every call ("FULL").
	PredictionLogFull
	// PredictionLogSample logs a prediction_log.default_sample_rate share of them ("SAMPLE").
	PredictionLogSample
)

func (PredictionLogLevel) names() []string {
	return []string{modelconfig.LogLevelNone, modelconfig.LogLevelFull, modelconfig.LogLevelSample}
}

// String returns the config name: NONE, FULL or SAMPLE.
func (l PredictionLogLevel) String() string { return choiceName(l, l.names()) }

// MarshalText returns the config name.
func (l PredictionLogLevel) MarshalText() ([]byte, error) { return marshalChoice(l, l.names()) }

// UnmarshalText sets l to the value named text, or returns an error listing the names.
func (l *PredictionLogLevel) UnmarshalText(text []byte) error {
	return parseChoice(l, text, l.names(), "NONE, FULL or SAMPLE")
}

// UnmarshalYAML reads a YAML scalar as UnmarshalText does.
func (l *PredictionLogLevel) UnmarshalYAML(n *yaml.Node) error { return unmarshalYAMLText(n, l) }

// KeyBy is prediction_log.key_by: what the record key of every
// prediction event is.
type KeyBy uint8

// The values of prediction_log.key_by.
const (
	// KeyByKeyFeatures keys an event by its servable's key features, the
	// values of the configs they name joined by their separator
	// ("key_features", the default).
	KeyByKeyFeatures KeyBy = iota
	// KeyByRequestID keys an event by its request id, the join key of
	// the outcomes that name it by request_id ("request_id").
	KeyByRequestID
)

func (KeyBy) names() []string { return []string{"key_features", "request_id"} }

// String returns the config name: key_features or request_id.
func (k KeyBy) String() string { return choiceName(k, k.names()) }

// MarshalText returns the config name.
func (k KeyBy) MarshalText() ([]byte, error) { return marshalChoice(k, k.names()) }

// UnmarshalText sets k to the value named text, or returns an error listing the names.
func (k *KeyBy) UnmarshalText(text []byte) error {
	return parseChoice(k, text, k.names(), "key_features or request_id")
}

// UnmarshalYAML reads a YAML scalar as UnmarshalText does.
func (k *KeyBy) UnmarshalYAML(n *yaml.Node) error { return unmarshalYAMLText(n, k) }

// LogLevel is log_level: the least severe of Grove's own log lines that
// is written. It is a slog.Level, named as slog names them, in any case:
// debug, info, warn or error, optionally with an offset ("debug-4",
// "WARN+1"). The zero value is info. It is a slog.Leveler.
type LogLevel slog.Level

// Level returns l as a slog.Level.
func (l LogLevel) Level() slog.Level { return slog.Level(l) }

// String returns slog's name of l in lower case: "info", "debug-4".
func (l LogLevel) String() string { return strings.ToLower(slog.Level(l).String()) }

// MarshalText returns String's name.
func (l LogLevel) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText sets l to the level named text (as slog.Level's
// UnmarshalText reads it), or returns an error listing the names.
func (l *LogLevel) UnmarshalText(text []byte) error {
	var level slog.Level
	if err := level.UnmarshalText(text); err != nil {
		return fmt.Errorf("%q is not debug, info, warn or error", text)
	}
	*l = LogLevel(level)
	return nil
}

// UnmarshalYAML reads a YAML scalar as UnmarshalText does.
func (l *LogLevel) UnmarshalYAML(n *yaml.Node) error { return unmarshalYAMLText(n, l) }

// choiceName returns the name of v, names being the names of its type's
// constants in the order of their values. A value no constant has, which
// only converting an integer in code makes, is shown as Type(n).
func choiceName[T ~uint8](v T, names []string) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%T(%d)", v, uint8(v))
}

// marshalChoice returns the name of v as choiceName does, and an error
// for a value no constant has.
func marshalChoice[T ~uint8](v T, names []string) ([]byte, error) {
	if int(v) >= len(names) {
		return nil, fmt.Errorf("%s is not a value of the config", choiceName(v, names))
	}
	return []byte(names[v]), nil
}

// parseChoice sets *p to the constant named text, compared exactly, or
// returns the error `"text" is not <list>` and leaves *p alone.
func parseChoice[T ~uint8](p *T, text []byte, names []string, list string) error {
	i := slices.Index(names, string(text))
	if i < 0 {
		return fmt.Errorf("%q is not %s", text, list)
	}
	*p = T(i)
	return nil
}

// unmarshalYAMLText reads YAML node n, a scalar, into u with its
// UnmarshalText. A value u refuses is a yaml.TypeError, which yaml.v3
// gathers with the file's other errors, at n's line and column
// ("line 3, column 8: ..."); DecodeYAML puts the key in its place.
func unmarshalYAMLText(n *yaml.Node, u encoding.TextUnmarshaler) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	if err := u.UnmarshalText([]byte(s)); err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d, column %d: %v", n.Line, n.Column, err)}}
	}
	return nil
}
