package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/internal/certtest"
	"github.com/groveml/grove/logging"
)

// TestLogsTailReadsKafkaWithTheServersTLSAndSASL runs grove logs tail
// against a kfake broker that requires TLS and SCRAM-SHA-256, with the
// settings given as flags and as grove serve's config file, and checks
// that a missing or wrong setting is refused with an error that names it
// and never quotes the password.
func TestLogsTailReadsKafkaWithTheServersTLSAndSASL(t *testing.T) {
	dir := t.TempDir()
	ca := certtest.NewCA(t, "kafka-ca")
	caFile := ca.WriteCA(t, dir)
	const password = "s3cret-kafka-pw"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.TLS(&tls.Config{Certificates: []tls.Certificate{ca.Server(t, "kafka").TLS(t)}}),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "grove", password), kfake.SeedTopics(1, "grove.predictions"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	broker := c.ListenAddrs()[0]

	// The server's producer logs one event with the same settings.
	k := conf.DefaultServer().Kafka
	k.Brokers = []string{broker}
	k.TLS = conf.KafkaTLS{Enabled: true, CAFile: caFile}
	k.SASL = conf.KafkaSASL{Mechanism: conf.SASLScramSHA256, Username: "grove", Password: password}
	p, err := logging.New(k)
	if err != nil {
		t.Fatal(err)
	}
	p.Log(&grovepb.PredictionEvent{ModelPath: "pctr_v1/", Served: true}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil || p.Stats().Delivered != 1 {
		t.Fatalf("the producer did not deliver the event: %v, %+v", err, p.Stats())
	}

	cfg := filepath.Join(dir, "grove.yaml")
	yaml := fmt.Sprintf("kafka:\n  brokers: [%q]\n  tls: {enabled: true, ca_file: %q}\n  sasl: {mechanism: SCRAM-SHA-256, username: grove, password: %q}\n",
		broker, caFile, password)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--brokers", broker, "--kafka-tls-enabled", "--kafka-tls-ca-file", caFile,
		"--kafka-sasl-mechanism", "SCRAM-SHA-256", "--kafka-sasl-username", "grove"}
	with := func(extra ...string) []string { return append(append([]string{}, flags...), extra...) }
	for _, tc := range []struct {
		name    string
		args    []string
		env     string // $GROVE_KAFKA_SASL_PASSWORD
		code    int
		out     string
		errText string
	}{
		{"flags, password from the environment", with(), password, 0, `"model_path":"pctr_v1/"`, ""},
		{"flags, password flag", with("--kafka-sasl-password", password), "", 0, `"model_path":"pctr_v1/"`, ""},
		{"the server's config file", []string{"--config", cfg}, "", 0, `"model_path":"pctr_v1/"`, ""},
		{"config file, a flag overrides it", []string{"--config", cfg, "--kafka-sasl-password", "wrong"}, "", 1, "", "cannot reach the Kafka broker"},
		{"no TLS", []string{"--brokers", broker, "--kafka-sasl-mechanism", "SCRAM-SHA-256", "--kafka-sasl-username", "grove"}, password, 1, "", "cannot reach the Kafka broker"},
		{"TLS without the broker's CA", []string{"--brokers", broker, "--kafka-tls-enabled", "--kafka-sasl-mechanism", "SCRAM-SHA-256", "--kafka-sasl-username", "grove"}, password, 1, "", "certificate"},
		{"no SASL", []string{"--brokers", broker, "--kafka-tls-enabled", "--kafka-tls-ca-file", caFile}, "", 1, "", "cannot reach the Kafka broker"},
		{"wrong password", with("--kafka-sasl-password", "wrong"), "", 1, "", "cannot reach the Kafka broker"},
		{"CA file without TLS", []string{"--brokers", broker, "--kafka-tls-ca-file", caFile}, "", 1, "", "kafka.tls.enabled (--kafka-tls-enabled): is false but other kafka.tls keys are set"},
		{"unknown mechanism", with("--kafka-sasl-mechanism", "GSSAPI"), password, 1, "", `kafka.sasl.mechanism (--kafka-sasl-mechanism): "GSSAPI" is not PLAIN`},
		{"missing CA file", with("--kafka-tls-ca-file", filepath.Join(dir, "nope.pem")), password, 1, "", "kafka.tls.ca_file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(conf.KafkaPasswordEnv, tc.env)
			var out, errb bytes.Buffer
			args := append([]string{"tail", "--from-beginning", "--timeout", "3s"}, tc.args...)
			code := logs(args, &out, &errb)
			if code != tc.code || !strings.Contains(out.String(), tc.out) || !strings.Contains(errb.String(), tc.errText) {
				t.Errorf("grove logs %s: exit %d, stdout %q, stderr %q; want exit %d, stdout with %q, stderr with %q",
					strings.Join(args, " "), code, out.String(), errb.String(), tc.code, tc.out, tc.errText)
			}
			if strings.Contains(errb.String(), password) {
				t.Errorf("stderr quotes the password: %s", errb.String())
			}
		})
	}
}

// TestReplayTakesTheKafkaTLSAndSASLFlags checks that grove replay reads
// Kafka with the same flags as grove logs tail (they share logSource).
func TestReplayTakesTheKafkaTLSAndSASLFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if code := replay([]string{"-h"}, &out, &errb); code != 0 {
		t.Fatalf("grove replay -h: exit %d: %s", code, errb.String())
	}
	help := out.String() + errb.String()
	for _, f := range []string{"-config", "-kafka-tls-enabled", "-kafka-tls-ca-file", "-kafka-tls-cert-file", "-kafka-tls-key-file",
		"-kafka-tls-insecure-skip-verify", "-kafka-sasl-mechanism", "-kafka-sasl-username", "-kafka-sasl-password"} {
		if !strings.Contains(help, "\n  "+f+" ") && !strings.Contains(help, "\n  "+f+"\n") {
			t.Errorf("grove replay -h lists no %s", f)
		}
	}
}
