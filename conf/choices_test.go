package conf

import (
	"bytes"
	"encoding"
	"flag"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
)

// choiceCase is one choice of the server config: its key and flag, its
// values by name, names it refuses, and the message listing its names.
type choiceCase struct {
	key, flag string
	// field returns the choice's field of s.
	field func(s *Server) choiceValue
	// valid maps each accepted name to the value it reads as.
	valid map[string]any
	// invalid are names refused, each with `"name" is not <list>`.
	invalid []string
	list    string
}

// choiceCases are every choice of the server config. A name differing
// from a valid one only in case is refused, but log_level's (slog's
// names, in any case, as before).
func choiceCases() []choiceCase {
	return []choiceCase{
		{key: "kafka.acks", flag: "kafka-acks", field: func(s *Server) choiceValue { return &s.Kafka.Acks },
			valid:   map[string]any{"all": AcksAll, "leader": AcksLeader, "none": AcksNone},
			invalid: []string{"", "1", "-1", "ALL", "Leader", "all "}, list: "all, leader or none"},
		{key: "kafka.compression", flag: "kafka-compression", field: func(s *Server) choiceValue { return &s.Kafka.Compression },
			valid: map[string]any{"none": CompressionNone, "gzip": CompressionGzip, "snappy": CompressionSnappy,
				"lz4": CompressionLz4, "zstd": CompressionZstd},
			invalid: []string{"", "brotli", "GZIP", "lz4hc"}, list: "none, gzip, snappy, lz4 or zstd"},
		{key: "kafka.encoding", flag: "kafka-encoding", field: func(s *Server) choiceValue { return &s.Kafka.Encoding },
			valid:   map[string]any{"proto": EncodingProto, "json": EncodingJSON},
			invalid: []string{"", "avro", "JSON", "protobuf"}, list: "proto or json"},
		{key: "tls.client_auth", flag: "tls-client-auth", field: func(s *Server) choiceValue { return &s.TLS.ClientAuth },
			valid:   map[string]any{"none": ClientAuthNone, "request": ClientAuthRequest, "require": ClientAuthRequire},
			invalid: []string{"", "yes", "REQUIRE", "required"}, list: "none, request or require"},
		{key: "log_format", flag: "log-format", field: func(s *Server) choiceValue { return &s.LogFormat },
			valid:   map[string]any{"text": LogFormatText, "json": LogFormatJSON},
			invalid: []string{"", "xml", "JSON", "logfmt"}, list: "text or json"},
		{key: "log_level", flag: "log-level", field: func(s *Server) choiceValue { return &s.LogLevel },
			valid: map[string]any{"debug": LogLevel(slog.LevelDebug), "info": LogLevel(slog.LevelInfo), "warn": LogLevel(slog.LevelWarn),
				"error": LogLevel(slog.LevelError), "DEBUG": LogLevel(slog.LevelDebug), "Warn": LogLevel(slog.LevelWarn),
				"debug-4": LogLevel(slog.LevelDebug - 4), "info+2": LogLevel(slog.LevelInfo + 2)},
			invalid: []string{"", "loud", "warning", "debug-x", "7"}, list: "debug, info, warn or error"},
		{key: "prediction_log.default_level", flag: "prediction-log-level", field: func(s *Server) choiceValue { return &s.PredictionLog.DefaultLevel },
			valid:   map[string]any{"NONE": PredictionLogNone, "FULL": PredictionLogFull, "SAMPLE": PredictionLogSample},
			invalid: []string{"", "full", "Sample", "ALL"}, list: "NONE, FULL or SAMPLE"},
		{key: "prediction_log.key_by", flag: "prediction-log-key-by", field: func(s *Server) choiceValue { return &s.PredictionLog.KeyBy },
			valid:   map[string]any{"key_features": KeyByKeyFeatures, "request_id": KeyByRequestID},
			invalid: []string{"", "REQUEST_ID", "request-id", "key"}, list: "key_features or request_id"},
		{key: "load_policy", flag: "load-policy", field: func(s *Server) choiceValue { return &s.LoadPolicy },
			valid:   map[string]any{"eager": LoadPolicyEager, "on_demand": LoadPolicyOnDemand},
			invalid: []string{"", "lazy", "ON_DEMAND", "on-demand"}, list: "eager or on_demand"},
		{key: "kafka.sasl.mechanism", field: func(s *Server) choiceValue { return &s.Kafka.SASL.Mechanism },
			valid: map[string]any{"": SASLNone, "PLAIN": SASLPlain, "SCRAM-SHA-256": SASLScramSHA256,
				"SCRAM-SHA-512": SASLScramSHA512},
			invalid: []string{"GSSAPI", "plain", "SCRAM-SHA-1", "OAUTHBEARER"}, list: "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"},
	}
}

func TestChoicesReadEveryNameAndRefuseOthersWithTheirList(t *testing.T) {
	for _, tc := range choiceCases() {
		t.Run(tc.key, func(t *testing.T) {
			for name, want := range tc.valid {
				s := DefaultServer()
				p := tc.field(&s)
				if err := p.UnmarshalText([]byte(name)); err != nil {
					t.Errorf("%q: %v", name, err)
					continue
				}
				got := reflect.ValueOf(p).Elem().Interface()
				if got != want {
					t.Errorf("%q read as %v, want %v", name, got, want)
				}
				// The name it gives back reads as the same value.
				again := reflect.New(reflect.TypeOf(p).Elem()).Interface().(choiceValue)
				text, err := p.(encoding.TextMarshaler).MarshalText()
				if err != nil || string(text) != p.String() || again.UnmarshalText(text) != nil || reflect.ValueOf(again).Elem().Interface() != want {
					t.Errorf("%q: MarshalText %q, %v; String %q; read back as %v", name, text, err, p.String(), again)
				}
			}
			for _, name := range tc.invalid {
				s := DefaultServer()
				p := tc.field(&s)
				before := p.String()
				err := p.UnmarshalText([]byte(name))
				if want := fmt.Sprintf("%q is not %s", name, tc.list); err == nil || err.Error() != want {
					t.Errorf("%q: got %v, want %q", name, err, want)
				}
				if p.String() != before {
					t.Errorf("%q changed the value from %s to %s", name, before, p.String())
				}
			}
		})
	}
}

func TestChoiceFlagsSetTheFieldOrNameKeyAndFlag(t *testing.T) {
	for _, tc := range choiceCases() {
		if tc.flag == "" {
			continue // kafka.sasl.mechanism has no grove serve flag
		}
		t.Run(tc.key, func(t *testing.T) {
			for name, want := range tc.valid {
				// --kafka-brokers lets FULL and SAMPLE pass Validate; the TLS files, request and require.
				got, err := ParseServerArgs([]string{"--bucket", "gs://b", "--kafka-brokers", "k:9092",
					"--tls-cert", "/c", "--tls-key", "/k", "--tls-client-ca", "/ca", "--" + tc.flag, name})
				if err != nil {
					t.Errorf("--%s %q: %v", tc.flag, name, err)
					continue
				}
				if v := reflect.ValueOf(tc.field(&got)).Elem().Interface(); v != want {
					t.Errorf("--%s %q set %v, want %v", tc.flag, name, v, want)
				}
			}
			for _, name := range tc.invalid {
				_, err := ParseServerArgs([]string{"--bucket", "gs://b", "--" + tc.flag, name})
				want := fmt.Sprintf("%s (--%s): %q is not %s", tc.key, tc.flag, name, tc.list)
				if err == nil || err.Error() != want {
					t.Errorf("--%s %q: got %v, want %q", tc.flag, name, err, want)
				}
			}
		})
	}
}

func TestChoiceFlagErrorsComeWithValidatesProblems(t *testing.T) {
	_, err := ParseServerArgs([]string{"--kafka-acks", "ALL", "--log-format", "xml", "--poll-interval", "1ms"})
	for _, want := range []string{`kafka.acks (--kafka-acks): "ALL" is not all, leader or none`,
		`log_format (--log-format): "xml" is not text or json`, "bucket (--bucket): required", "poll_interval (--poll-interval): 1ms"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want an error containing %q", err, want)
		}
	}
}

func TestChoicesInTheConfigFileSetTheFieldOrNameTheirKeyAndLine(t *testing.T) {
	// block writes key: value in block style, one level a line, after a
	// first line; the value is on line len(path)+1.
	block := func(path []string, value string) string {
		var b strings.Builder
		b.WriteString("bucket: gs://b\n")
		for i, k := range path {
			fmt.Fprintf(&b, "%s%s:", strings.Repeat("  ", i), k)
			if i < len(path)-1 {
				b.WriteString("\n")
			}
		}
		fmt.Fprintf(&b, " %q\n", value)
		return b.String()
	}
	for _, tc := range choiceCases() {
		t.Run(tc.key, func(t *testing.T) {
			path := strings.Split(tc.key, ".")
			for name, want := range tc.valid {
				s := DefaultServer()
				if err := loadServerFile(writeYAML(t, block(path, name)), &s); err != nil {
					t.Errorf("%q: %v", name, err)
					continue
				}
				if v := reflect.ValueOf(tc.field(&s)).Elem().Interface(); v != want {
					t.Errorf("%q set %v, want %v", name, v, want)
				}
			}
			for _, name := range tc.invalid {
				_, err := ParseServerArgs([]string{"--config", writeYAML(t, block(path, name))})
				want := fmt.Sprintf("line %d: %s: %q is not %s", len(path)+1, tc.key, name, tc.list)
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("%q: got %v, want an error containing %q", name, err, want)
				}
			}
		})
	}
}

func TestChoicesInOneFlowMappingEachNameTheirKey(t *testing.T) {
	file := writeYAML(t, "bucket: gs://b\n"+
		"kafka: {brokers: [k:9092], acks: one, sasl: {username: u, mechanism: plain}, compression: gzip}\n"+
		"tls: {cert_file: /c, key_file: /k, client_auth: yes}\n")
	_, err := ParseServerArgs([]string{"--config", file})
	for _, want := range []string{`line 2: kafka.acks: "one" is not all, leader or none`,
		`line 2: kafka.sasl.mechanism: "plain" is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512`,
		`line 3: tls.client_auth: "yes" is not none, request or require`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want an error containing %q", err, want)
		}
	}
}

func TestChoiceInTheFileIsReadBeforeTheFlagOverridesIt(t *testing.T) {
	file := writeYAML(t, "bucket: gs://b\nkafka:\n  acks: leader\n  compression:\n")
	got, err := ParseServerArgs([]string{"--config", file})
	if err != nil || got.Kafka.Acks != AcksLeader || got.Kafka.Compression != CompressionSnappy {
		t.Errorf("got acks %v, compression %v (an empty value keeps the default), %v", got.Kafka.Acks, got.Kafka.Compression, err)
	}
	if got, err = ParseServerArgs([]string{"--config", file, "--kafka-acks", "none"}); err != nil || got.Kafka.Acks != AcksNone {
		t.Errorf("with --kafka-acks none: got %v, %v", got.Kafka.Acks, err)
	}
}

func TestChoiceValuesNoConstantHasShowTheirTypeAndDoNotMarshal(t *testing.T) {
	for _, v := range []interface {
		fmt.Stringer
		encoding.TextMarshaler
	}{Acks(3), Compression(5), Encoding(2), ClientAuth(3), LogFormat(2), PredictionLogLevel(3), KeyBy(2), SASLMechanism(4)} {
		want := fmt.Sprintf("%T(%d)", v, reflect.ValueOf(v).Uint())
		if got := v.String(); got != want {
			t.Errorf("String %q, want %q", got, want)
		}
		if b, err := v.MarshalText(); err == nil {
			t.Errorf("%s marshals as %q", want, b)
		}
	}
}

func TestChoiceFlagsShowTheirDefaultByName(t *testing.T) {
	var buf bytes.Buffer
	PrintServerUsage(&buf)
	for flag, def := range map[string]string{"kafka-acks": "all", "kafka-compression": "snappy", "kafka-encoding": "proto",
		"tls-client-auth": "none", "log-format": "text", "log-level": "info", "prediction-log-level": "NONE",
		"prediction-log-key-by": "key_features"} {
		i := strings.Index(buf.String(), "  -"+flag+" ")
		if i < 0 {
			t.Errorf("no -%s", flag)
			continue
		}
		entry, _, _ := strings.Cut(buf.String()[i+3:], "\n  -")
		if !strings.HasSuffix(strings.TrimSpace(entry), fmt.Sprintf("(default %q)", def)) {
			t.Errorf("-%s: %q does not end with its default %q", flag, entry, def)
		}
	}
}

func TestKafkaClientFlagsReadTheMechanism(t *testing.T) {
	parse := func(args ...string) (Kafka, error) {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		kafka := KafkaClientFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return kafka()
	}
	k, err := parse("--kafka-sasl-mechanism", "SCRAM-SHA-256", "--kafka-sasl-username", "u")
	if err != nil || k.SASL.Mechanism != SASLScramSHA256 {
		t.Errorf("got %v, %v", k.SASL.Mechanism, err)
	}
	_, err = parse("--kafka-sasl-mechanism", "scram-sha-256", "--kafka-tls-ca-file", "/ca")
	for _, want := range []string{`kafka.sasl.mechanism (--kafka-sasl-mechanism): "scram-sha-256" is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512`,
		"kafka.tls.enabled (--kafka-tls-enabled): is false"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want an error containing %q", err, want)
		}
	}
	file := writeYAML(t, "kafka:\n  sasl: {mechanism: GSSAPI}\n")
	if _, err = parse("--config", file); err == nil || !strings.Contains(err.Error(), `line 2: kafka.sasl.mechanism: "GSSAPI" is not PLAIN`) {
		t.Errorf("config file: got %v", err)
	}
}
