package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/logging"
	"github.com/groveml/grove/logging/kafkatest"
	"github.com/groveml/grove/routing/quality"
	"github.com/groveml/grove/servables"
)

func TestEventCarriesRequestAnswerAndCleanedConfigs(t *testing.T) {
	x, _ := servables.NewTensor("", servables.Float32, []int64{1, 2})
	copy(x.Float32s(), []float32{1, 2})
	y, _ := servables.NewTensor("output_0", servables.Float64, []int64{1})
	y.Float64s()[0] = 0.5
	req := &Request{API: "ba", ModelPath: "m/", RequestID: "r1", Inputs: []servables.Tensor{x},
		Configs: map[string]string{"user_id": "u\xff1"}}
	res := &Result{ModelPath: "m/", Checksum: "abc", Outputs: []servables.Tensor{y}, Queued: time.Millisecond, Compute: 2 * time.Millisecond}
	ev := PredictionEvent(req, res, true)
	if ev.GetModelPath() != "m/" || ev.GetModelChecksum() != "abc" || !ev.GetServed() || ev.GetApi() != "ba" || ev.GetRequestId() != "r1" {
		t.Fatalf("event %v", ev)
	}
	if got := ev.GetInputs()[0].GetFloatData(); len(got) != 2 || got[1] != 2 {
		t.Errorf("inputs %v", ev.GetInputs())
	}
	if got := ev.GetOutputs()[0].GetDoubleData(); len(got) != 1 || got[0] != 0.5 {
		t.Errorf("outputs %v", ev.GetOutputs())
	}
	if ev.GetConfigs()["user_id"] != "u\uFFFD1" {
		t.Errorf("config not cleaned to valid UTF-8: %q", ev.GetConfigs()["user_id"])
	}
	if ev.GetComputeLatency().AsDuration() != 2*time.Millisecond || ev.GetError() != nil {
		t.Errorf("latency %v error %v", ev.GetComputeLatency(), ev.GetError())
	}
	if ev.GetRequestTimestamp() != nil {
		t.Errorf("request_timestamp %v for a request with no time", ev.GetRequestTimestamp())
	}
	req.Received = time.Date(2026, 5, 1, 12, 0, 0, 7, time.UTC)
	if got := PredictionEvent(req, res, true).GetRequestTimestamp().AsTime(); !got.Equal(req.Received) {
		t.Errorf("request_timestamp %v, want the request's time %v", got, req.Received)
	}
}

func TestEventCarriesTheRequestsBatchItemInProtoAndJSON(t *testing.T) {
	y, _ := servables.NewTensor("output_0", servables.Float64, []int64{1})
	for _, item := range []int{0, 1, 2} {
		ev := PredictionEvent(&Request{API: "ba", ModelPath: "m/", RequestID: "r1", Item: item}, &Result{ModelPath: "m/", Outputs: []servables.Tensor{y}}, true)
		if ev.GetItem() != int64(item) {
			t.Errorf("item %d: event's item %d", item, ev.GetItem())
		}
		js, err := logging.Encode(ev, conf.EncodingJSON)
		if err != nil {
			t.Fatal(err)
		}
		// protojson leaves a default out and writes an int64 as a string.
		var fields map[string]any
		if err := json.Unmarshal(js, &fields); err != nil {
			t.Fatal(err)
		}
		if v, ok := fields["item"]; ok != (item != 0) || (ok && v != strconv.Itoa(item)) {
			t.Errorf("item %d: JSON %s", item, js)
		}
		back, err := logging.Decode(js, []kgo.RecordHeader{{Key: logging.HeaderEncoding, Value: []byte(logging.EncodingJSON)}})
		if err != nil || back.GetItem() != int64(item) {
			t.Errorf("item %d: decoded back %v, %v", item, back.GetItem(), err)
		}
	}
}

func TestEventClassifiesErrorsWithTheB_ATypes(t *testing.T) {
	for err, want := range map[error]string{
		fmt.Errorf("%w: x", ErrModelNotFound):          "MODEL_NOT_FOUND",
		fmt.Errorf("%w: x", servables.ErrInvalidInput): "INPUT_PARSING",
		fmt.Errorf("%w: x", servables.ErrOutput):       "OUTPUT_PARSING",
		fmt.Errorf("%w: x", ErrModelCrashed):           "MODEL_EXECUTION",
		fmt.Errorf("%w: x", ErrOverloaded):             "MODEL_EXECUTION",
		fmt.Errorf("%w: x", servables.ErrExecution):    "MODEL_EXECUTION",
		fmt.Errorf("x: %w", context.DeadlineExceeded):  "MODEL_EXECUTION",
		fmt.Errorf("%w: x", ErrStopped):                "MODEL_EXECUTION",
	} {
		ev := PredictionEvent(&Request{}, &Result{Err: err}, true)
		if ev.GetError().GetType() != want || ev.GetError().GetMessage() != err.Error() {
			t.Errorf("%v: error %v, want type %s", err, ev.GetError(), want)
		}
	}
}

func TestANilPredictionLogOrOneWithoutProducerLogsNothing(t *testing.T) {
	var s *PredictionLog
	s.LogPrediction(&Request{}, &Result{}, true) // must not panic
	(&PredictionLog{Direct: logging.Policy{Level: logging.LevelFull}}).LogPrediction(&Request{}, &Result{}, true)
}

// A compared shadow execution's event names the answer it was compared
// with and carries the comparison's figures, through both encodings.
func TestShadowEventCarriesItsComparison(t *testing.T) {
	y, _ := servables.NewTensor("p", servables.Float32, []int64{2, 1})
	req := &Request{API: "forestflow", ModelPath: "b/", RequestID: "r7", Contract: "ads/p/1", Release: "v2"}
	res := &Result{ModelPath: "b/", Outputs: []servables.Tensor{y}, Comparison: &ShadowComparison{
		RequestID: "r7", Release: "v1", ChampionCompute: 3 * time.Millisecond, Tolerance: 0.01,
		Outputs: []quality.OutputDiff{{Name: "p", Rows: 2, Elements: 2, SumAbsDiff: 0.4, MaxAbsDiff: 0.2, Score: true, Agree: 1},
			{Name: "extra", Mismatch: "the champion has no such output"}}}}
	ev := PredictionEvent(req, res, false)
	for _, enc := range []conf.Encoding{conf.EncodingProto, conf.EncodingJSON} {
		v, err := logging.Encode(ev, enc)
		if err != nil {
			t.Fatal(enc, err)
		}
		got, err := logging.Decode(v, nil)
		if err != nil {
			t.Fatal(enc, err)
		}
		c := got.GetComparison()
		if got.GetServed() || got.GetComparedRequestId() != "r7" || got.GetComparedReleaseVersion() != "v1" || c.GetChampionFailed() ||
			c.GetChampionComputeLatency().AsDuration() != 3*time.Millisecond || c.GetTolerance() != 0.01 || len(c.GetOutputs()) != 2 {
			t.Fatalf("%s: decoded %v", enc, got)
		}
		p, extra := c.GetOutputs()[0], c.GetOutputs()[1]
		if p.GetName() != "p" || p.GetRows() != 2 || p.GetMeanAbsDiff() != 0.2 || p.GetMaxAbsDiff() != 0.2 || !p.GetScore() ||
			p.GetRowsAgreeing() != 1 || p.GetRowsWithinTolerance() != 0 || p.GetMismatch() != "" {
			t.Errorf("%s: output p %v", enc, p)
		}
		if extra.GetName() != "extra" || extra.GetMismatch() != "the champion has no such output" {
			t.Errorf("%s: output extra %v", enc, extra)
		}
	}
	// A served event, and a shadow event not compared, carry none of it.
	res.Comparison = nil
	if ev := PredictionEvent(req, res, false); ev.GetComparedRequestId() != "" || ev.GetComparison() != nil {
		t.Errorf("uncompared event %v", ev)
	}
}

// With prediction_log.key_by request_id every event, direct or through a
// contract, is keyed by its request id; with key_features (the default)
// by the key features, as before; an event without a request id has no
// key.
func TestKeyByChoosesTheRecordKeyOfEveryEvent(t *testing.T) {
	e := startEmbeddedKafka(t)
	p := newKafkaProducer(t, e.Addr())
	direct := logging.Policy{Level: logging.LevelFull, KeyFeatures: []string{"user"}, Separator: "."}
	contract := &modelconfig.ServableLogging{Level: modelconfig.LogLevelFull, KeyFeatures: []string{"site"}}
	configs := map[string]string{"user": "u1", "site": "s9"}
	log := func(keyBy conf.KeyBy, id string, logging *modelconfig.ServableLogging) {
		s := &PredictionLog{Producer: p, Direct: direct, KeyBy: keyBy}
		s.LogPrediction(&Request{ModelPath: "m/", RequestID: id, Configs: configs, Logging: logging}, &Result{}, true)
	}
	log(conf.KeyByRequestID, "req-1", nil)
	log(conf.KeyByRequestID, "req-2", contract)
	log(conf.KeyByRequestID, "", nil)
	log(conf.KeyByKeyFeatures, "req-3", nil)
	log(conf.KeyByKeyFeatures, "req-4", contract)
	want := []string{"req-1", "req-2", "", "u1", "s9"}
	recs := kafkatest.ReadExactly(t, e.Addr(), "grove.predictions", len(want), 10*time.Second)
	for i, r := range recs {
		if string(r.Key) != want[i] || (want[i] == "") != (r.Key == nil) {
			t.Errorf("record %d key %q, want %q", i, r.Key, want[i])
		}
	}
}

// startEmbeddedKafka starts the embedded broker with the prediction log's
// topic on a free loopback port, closed when the test ends.
func startEmbeddedKafka(t *testing.T) *logging.Embedded {
	t.Helper()
	e, err := logging.StartEmbedded("127.0.0.1:0", "grove.predictions")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// newKafkaProducer is a prediction log producer to the broker at addr,
// closed when the test ends.
func newKafkaProducer(t *testing.T, addr string) *logging.Producer {
	t.Helper()
	k := conf.DefaultServer().Kafka
	k.Brokers, k.Linger = []string{addr}, time.Millisecond
	p, err := logging.New(k, logging.WithInstanceID("test/1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = p.Close(ctx)
	})
	return p
}
