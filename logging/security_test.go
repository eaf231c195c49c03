package logging

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/internal/certtest"
)

// deliverOne logs one event through a producer for cfg and reports
// whether it was delivered within wait.
func deliverOne(t *testing.T, cfg conf.Kafka, wait time.Duration) bool {
	t.Helper()
	p := newProducer(t, cfg)
	p.Log(event(1), nil)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	return p.Flush(ctx) == nil && p.Stats().Delivered == 1
}

func TestProducerAuthenticatesWithSASL(t *testing.T) {
	t.Parallel()
	for _, mech := range []conf.SASLMechanism{conf.SASLPlain, conf.SASLScramSHA256, conf.SASLScramSHA512} {
		t.Run(mech.String(), func(t *testing.T) {
			t.Parallel()
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser(mech.String(), "grove", "s3cret"),
				kfake.SeedTopics(1, "grove.predictions"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			cfg := kafkaConfig(c.ListenAddrs()...)
			cfg.SASL = conf.KafkaSASL{Mechanism: mech, Username: "grove", Password: "s3cret"}
			if !deliverOne(t, cfg, 10*time.Second) {
				t.Error("not delivered with the right password")
			}
			cfg.SASL.Password = "wrong"
			if deliverOne(t, cfg, time.Second) {
				t.Error("delivered with a wrong password")
			}
		})
	}
}

// brokerTLS writes a test CA to dir and returns its file and the TLS
// config of a broker whose certificate it signed for 127.0.0.1.
func brokerTLS(t *testing.T, dir string) (caFile string, server *tls.Config) {
	t.Helper()
	ca := certtest.NewCA(t, "kafka test CA")
	return ca.WriteCA(t, dir), &tls.Config{Certificates: []tls.Certificate{ca.Server(t, "kfake").TLS(t)}, MinVersion: tls.VersionTLS12}
}

func TestProducerUsesTLS(t *testing.T) {
	t.Parallel()
	caFile, serverTLS := brokerTLS(t, t.TempDir())
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.TLS(serverTLS), kfake.SeedTopics(1, "grove.predictions"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg := kafkaConfig(c.ListenAddrs()...)
	cfg.TLS = conf.KafkaTLS{Enabled: true, CAFile: caFile}
	if !deliverOne(t, cfg, 10*time.Second) {
		t.Error("not delivered over TLS with the CA")
	}
	cfg.TLS = conf.KafkaTLS{Enabled: true} // system roots: the certificate is not trusted
	if deliverOne(t, cfg, time.Second) {
		t.Error("delivered to an untrusted broker")
	}
	cfg.TLS = conf.KafkaTLS{Enabled: true, InsecureSkipVerify: true}
	if !deliverOne(t, cfg, 10*time.Second) {
		t.Error("not delivered with insecure_skip_verify")
	}
}

func TestProducerNeverBlocksOnABrokerThatDoesNotAnswer(t *testing.T) {
	// A "broker" that accepts connections and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	cfg := kafkaConfig(ln.Addr().String())
	cfg.BufferRecords = 10
	p := newProducer(t, cfg)
	start := time.Now()
	for i := range 100 {
		p.Log(event(i), nil)
	}
	if took := time.Since(start); took > 200*time.Millisecond {
		t.Errorf("100 Log calls took %v", took)
	}
	time.Sleep(200 * time.Millisecond)
	if s := p.Stats(); s.Buffered != 10 || s.Dropped != 90 || s.Delivered != 0 || s.Failed != 0 {
		t.Errorf("stats %+v", s)
	}
}
