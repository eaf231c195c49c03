package processor

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/groveml/grove/conf"
)

// deepRecDemo is the config of DeepRec's end-to-end demo, with a local
// store.
const deepRecDemo = `{
  "omp_num_threads": 4, "kmp_blocktime": 0, "feature_store_type": "local", "serialize_protocol": "protobuf",
  "inter_op_parallelism_threads": 10, "intra_op_parallelism_threads": 10, "init_timeout_minutes": 1,
  "signature_name": "serving_default", "model_store_type": "local",
  "checkpoint_dir": "/tmp/checkpoint/", "savedmodel_dir": "/tmp/saved_model/"}`

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		name, entry, json string
		check             func(t *testing.T, c Config)
	}{
		{name: "DeepRec demo", json: deepRecDemo, check: func(t *testing.T, c Config) {
			want := Config{StoreType: "local", ModelDir: "/tmp/checkpoint/", BucketURL: "file:///tmp", ModelPath: "checkpoint/",
				Replicas: 1, Policy: PolicyMOD, IntraOpThreads: 10, OMPThreads: 4, SignatureName: "serving_default",
				InitTimeout: time.Minute, PollInterval: 60 * time.Second}
			if c.StoreType != want.StoreType || c.ModelDir != want.ModelDir || c.BucketURL != want.BucketURL || c.ModelPath != want.ModelPath ||
				c.Replicas != 1 || c.Policy != PolicyMOD || c.IntraOpThreads != 10 || c.OMPThreads != 4 || c.SignatureName != want.SignatureName ||
				c.InitTimeout != want.InitTimeout || c.PollInterval != want.PollInterval || c.HasPredictionLog {
				t.Fatalf("got %+v", c)
			}
			if !slices.Equal(c.Ignored, []string{"inter_op_parallelism_threads", "kmp_blocktime"}) {
				t.Fatalf("ignored %v", c.Ignored)
			}
		}},
		{name: "minimal savedmodel_dir", json: `{"savedmodel_dir": "/m/pctr"}`, check: func(t *testing.T, c Config) {
			if c.BucketURL != "file:///m" || c.ModelPath != "pctr/" || c.IntraOpThreads != 1 || c.Policy != PolicyMOD || len(c.Ignored) != 0 {
				t.Fatalf("got %+v", c)
			}
		}},
		{name: "omp threads are the intra-op default", json: `{"savedmodel_dir": "/m/p", "omp_num_threads": "3"}`, check: func(t *testing.T, c Config) {
			if c.IntraOpThreads != 3 || c.OMPThreads != 3 {
				t.Fatalf("got %+v", c)
			}
		}},
		{name: "checkpoint_dir wins", json: `{"checkpoint_dir": "/m/ck/", "savedmodel_dir": "/m/sm/"}`, check: func(t *testing.T, c Config) {
			if c.ModelPath != "ck/" {
				t.Fatalf("got %+v", c)
			}
		}},
		{name: "gs", json: `{"model_store_type": "gs", "checkpoint_dir": "gs://bkt/a/b/ckpt/"}`, check: func(t *testing.T, c Config) {
			if c.BucketURL != "gs://bkt/a/b" || c.ModelPath != "ckpt/" {
				t.Fatalf("got %+v", c)
			}
		}},
		{name: "s3 at the bucket's top", json: `{"model_store_type": "s3", "checkpoint_dir": "s3://bkt/ckpt"}`, check: func(t *testing.T, c Config) {
			if c.BucketURL != "s3://bkt" || c.ModelPath != "ckpt/" {
				t.Fatalf("got %+v", c)
			}
		}},
		{name: "warm-up file after the entry", entry: "/srv/", json: `{"savedmodel_dir": "/m/p", "warmup_file_name": "w.bin"}`, check: func(t *testing.T, c Config) {
			if c.WarmUpFile != "/srv/w.bin" {
				t.Fatalf("got %q", c.WarmUpFile)
			}
		}},
		{name: "session group and Grove keys", json: `{"savedmodel_dir": "/m/p", "session_num": 4, "select_session_policy": "RR",
			"grove_poll_interval": "2s", "grove_gomaxprocs": 3, "init_timeout_minutes": 5, "cpusets": "0-1;2-3", "ev_storage_size": [1, 2],
			"oss_endpoint": null}`, check: func(t *testing.T, c Config) {
			if c.Replicas != 4 || c.Policy != PolicyRR || c.PollInterval != 2*time.Second || c.GOMAXPROCS != 3 || c.InitTimeout != 5*time.Minute {
				t.Fatalf("got %+v", c)
			}
			if !slices.Equal(c.Ignored, []string{"cpusets", "ev_storage_size"}) {
				t.Fatalf("ignored %v (a null is absent)", c.Ignored)
			}
		}},
		{name: "prediction log", json: `{"savedmodel_dir": "/m/p", "grove_prediction_log": {"kafka": {"brokers": ["127.0.0.1:9092"], "linger": "1ms"},
			"prediction_log": {"default_level": "FULL"}}}`, check: func(t *testing.T, c Config) {
			if !c.HasPredictionLog || c.Kafka.Brokers[0] != "127.0.0.1:9092" || c.Kafka.Linger != time.Millisecond ||
				c.PredictionLog.DefaultLevel != conf.PredictionLogFull || c.Kafka.Topic != "grove.predictions" {
				t.Fatalf("got %+v %+v", c.Kafka, c.PredictionLog)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig(tc.entry, []byte(tc.json))
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct{ json, want string }{
		{``, "not a JSON object"},
		{`null`, "not a JSON object"},
		{`[1]`, "not a JSON object"},
		{`{} {}`, "text after"},
		{`{}`, "no model directory"},
		{`{"savedmodel_dir": "/m/p", "model_store_type": "oss"}`, `"model_store_type": "oss": no such driver`},
		{`{"savedmodel_dir": "/m/p", "model_store_type": "hdfs"}`, `no such driver`},
		{`{"savedmodel_dir": "/m/p", "feature_store_type": "redis"}`, `"feature_store_type": "redis": Grove has no Redis feature store`},
		{`{"savedmodel_dir": "/m/p", "feature_store_type": "cluster_redis"}`, `no Redis feature store`},
		{`{"savedmodel_dir": "/m/p", "session_num": 0}`, `"session_num": 0 is out of range 1..64`},
		{`{"savedmodel_dir": "/m/p", "session_num": 1.5}`, `"session_num": 1.5 is not an integer`},
		{`{"savedmodel_dir": "/m/p", "session_num": true}`, `"session_num": true is not an integer`},
		{`{"savedmodel_dir": "/m/p", "select_session_policy": "LEAST"}`, `"LEAST" is not "MOD" or "RR"`},
		{`{"savedmodel_dir": "/m/p", "grove_poll_interval": 60}`, `"grove_poll_interval": 60 is not a string`},
		{`{"savedmodel_dir": "/m/p", "grove_poll_interval": "1 minute"}`, `not a Go duration`},
		{`{"savedmodel_dir": "/m/p", "grove_poll_interval": "10ms"}`, `shorter than 1s`},
		{`{"savedmodel_dir": "/m/p", "grove_gomaxprocs": 0}`, `"grove_gomaxprocs": 0 is out of range`},
		{`{"savedmodel_dir": "/m/p", "grove_prediction_log": "FULL"}`, `"grove_prediction_log": not an object`},
		{`{"savedmodel_dir": "/m/p", "grove_prediction_log": {"kafka": {"nope": 1}}}`, `line 1: unknown key "nope"`},
		{`{"savedmodel_dir": "/m/p", "grove_prediction_log": {"kafka": {"brokers": ["k:9092"], "acks": "ALL", "compression": "gzip"}}}`,
			`line 1: kafka.acks: "ALL" is not all, leader or none`},
		{`{"savedmodel_dir": "/m/p", "grove_prediction_log": {"prediction_log": {"default_level": "FULL"}}}`, `needs Kafka`},
		{`{"savedmodel_dir": "/m/p", "grove_polling": "1s"}`, `unknown key "grove_polling"`},
		{`{"savedmodel_dir": "/m/p", "b": 1, "a": 2}`, `unknown key "a", "b"`},
		{`{"savedmodel_dir": ""}`, `"savedmodel_dir": is empty`},
		{`{"savedmodel_dir": "/m/p", "signature_name": ""}`, `"signature_name": is empty`},
		{`{"savedmodel_dir": "/"}`, `root directory`},
		{`{"savedmodel_dir": "oss://b/m/"}`, `model_store_type is local`},
		{`{"model_store_type": "gs", "savedmodel_dir": "/m/p"}`, `the directory is a gs:// URL`},
		{`{"model_store_type": "s3", "savedmodel_dir": "s3://bkt/"}`, `names a bucket, not a directory`},
		{`{"savedmodel_dir": "/m/p", "serialize_protocol": "json"}`, `"json": the protocol is "protobuf"`},
		{`{"savedmodel_dir": "/m/p", "init_timeout_minutes": -1}`, `out of range 1..1440`},
	} {
		_, err := ParseConfig("", []byte(tc.json))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseConfig(%s) = %v, want an error with %q", tc.json, err, tc.want)
		}
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add(deepRecDemo)
	f.Add(`{"savedmodel_dir": "/m/p", "session_num": "2", "grove_prediction_log": {"kafka": {"embedded": true}}}`)
	f.Add(`{"model_store_type": "s3", "checkpoint_dir": "s3://b/x/", "grove_poll_interval": "1s"}`)
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseConfig("/e/", []byte(s))
		if err != nil {
			return
		}
		if c.ModelPath == "" || !strings.HasSuffix(c.ModelPath, "/") || c.BucketURL == "" {
			t.Fatalf("accepted %q with model path %q in %q", s, c.ModelPath, c.BucketURL)
		}
		if c.Replicas < 1 || c.IntraOpThreads < 1 || c.PollInterval < time.Second || c.InitTimeout <= 0 {
			t.Fatalf("accepted %q with %+v", s, c)
		}
		if c.Policy != PolicyMOD && c.Policy != PolicyRR {
			t.Fatalf("accepted %q with policy %q", s, c.Policy)
		}
	})
}
