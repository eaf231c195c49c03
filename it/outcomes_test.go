package it

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/groveml/grove/api/outcomes/outcomespb"
	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging/outcome"
)

// brokersLog reads the prediction log's brokers from grove's start-up line.
var brokersLog = regexp.MustCompile(`msg="prediction log on Kafka" brokers=\[([^\] ]+)\]`)

// TestOutcomesReachTheOutcomeTopicExactlyAsAccepted drives the real
// binary with the embedded Kafka broker (kafka.embedded on a free port):
// POST /v1/outcomes with a JSON array of good and bad outcomes, then JSON
// lines, then a grove.v1.Outcomes/Report stream, each answered with the
// accepted count and the refused outcomes by index; a franz-go consumer
// of grove.outcomes then finds exactly the accepted outcomes, each keyed
// by its join key, with the proto headers, decoding to what was sent
// (event_time filled in when it was left out). Budget: 15 s.
func TestOutcomesReachTheOutcomeTopicExactlyAsAccepted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "model_config.json"), []byte(`{"model_metadata": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Second)
	g := startGrove(t, "file://"+dir, nil, "--kafka-embedded", "--kafka-embedded-addr", "127.0.0.1:0")
	m := brokersLog.FindStringSubmatch(g.logs.String())
	if m == nil {
		t.Fatalf("no prediction log brokers in the logs")
	}
	broker := m[1]

	post := func(contentType, body string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, g.url+"/v1/outcomes", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", contentType)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	type answer struct {
		Accepted int `json:"accepted"`
		Errors   []struct {
			Index int    `json:"index"`
			Error string `json:"error"`
		} `json:"errors"`
	}
	check := func(what string, code int, body string, accepted int, refused ...int) {
		t.Helper()
		var a answer
		if err := json.Unmarshal([]byte(body), &a); err != nil || code != http.StatusOK {
			t.Fatalf("%s: %d %s", what, code, body)
		}
		var idx []int
		for _, e := range a.Errors {
			idx = append(idx, e.Index)
		}
		if a.Accepted != accepted || !slices.Equal(idx, refused) {
			t.Errorf("%s: %s, want %d accepted and %v refused", what, body, accepted, refused)
		}
	}

	code, body := post("application/json", `[
		{"outcome_id":"a1","request_id":"req-1","labels":{"click":1},"event_time":"2026-05-01T10:00:00Z"},
		{"outcome_id":"a2","request_id":"req-2","key":"both","labels":{"click":1}},
		{"outcome_id":"a3","key":"u1.ad7","labels":{"conversion":1,"value":12.5}},
		{"outcome_id":"a4","request_id":"req-4","labels":{"click":NaN}},
		{"outcome_id":"a5","request_id":"req-5","item":2,"row":1,"labels":{"click":0}}
	]`)
	if code != http.StatusBadRequest || !strings.Contains(body, "not a JSON array") {
		t.Errorf("an array that is not JSON: %d %s, want 400", code, body)
	}
	code, body = post("application/json", `[
		{"outcome_id":"a1","request_id":"req-1","labels":{"click":1},"event_time":"2026-05-01T10:00:00Z"},
		{"outcome_id":"a2","request_id":"req-2","key":"both","labels":{"click":1}},
		{"outcome_id":"a3","key":"u1.ad7","labels":{"conversion":1,"value":12.5}},
		{"outcome_id":"a4","request_id":"req-4","labels":{"click":"1"}},
		{"outcome_id":"a5","request_id":"req-5","item":2,"row":1,"labels":{"click":0}}
	]`)
	check("the array", code, body, 3, 1, 3)
	code, body = post("application/x-ndjson", "{\"outcome_id\":\"n1\",\"request_id\":\"req-6\",\"labels\":{\"click\":1}}\n"+
		"{\"outcome_id\":\"n2\",\"labels\":{\"click\":1}}\n\n{\"outcome_id\":\"n3\",\"key\":\"u2.ad1\",\"labels\":{\"click\":1}}\n")
	check("the lines", code, body, 2, 1)

	conn, err := grpc.NewClient(g.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	stream, err := outcomespb.NewOutcomesClient(conn).Report(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []*grovepb.Outcome{
		{OutcomeId: "g1", RequestId: "req-7", Labels: map[string]float64{"click": 1}},
		{OutcomeId: "g2", RequestId: "req-8", Labels: map[string]float64{"": 1}},
		{OutcomeId: "g3", Key: "u3.ad2", Labels: map[string]float64{"value": 3}},
	} {
		if err := stream.Send(o); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := stream.CloseAndRecv()
	if err != nil || resp.Accepted != 2 || len(resp.Errors) != 1 || resp.Errors[0].Index != 1 {
		t.Fatalf("Report: %v, %v; want 2 accepted, outcome 1 refused", resp, err)
	}

	// The topic holds exactly the accepted outcomes.
	want := map[string]string{"a1": "req-1", "a3": "u1.ad7", "a5": "req-5", "n1": "req-6", "n3": "u2.ad1", "g1": "req-7", "g3": "u3.ad2"}
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumeTopics("grove.outcomes"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[string]*grovepb.Outcome{}
	poll, cancelPoll := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancelPoll()
	for len(got) < len(want) && poll.Err() == nil {
		for _, r := range cl.PollFetches(poll).Records() {
			o, err := outcome.DecodeRecord(r.Value, r.Headers)
			if err != nil {
				t.Fatalf("record %q: %v", r.Key, err)
			}
			if _, dup := got[o.OutcomeId]; dup {
				t.Errorf("outcome %s twice on the topic", o.OutcomeId)
			}
			got[o.OutcomeId] = o
			if key := want[o.OutcomeId]; string(r.Key) != key {
				t.Errorf("outcome %s keyed %q, want %q", o.OutcomeId, r.Key, key)
			}
		}
	}
	more, cancelMore := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancelMore()
	for _, r := range cl.PollFetches(more).Records() {
		t.Errorf("an extra record on the topic: key %q", r.Key)
	}
	if len(got) != len(want) {
		t.Fatalf("the topic holds %d outcomes, want %d: %v", len(got), len(want), got)
	}
	for id := range want {
		if got[id] == nil {
			t.Errorf("outcome %s is not on the topic", id)
		}
	}
	if a1 := got["a1"]; !a1.EventTime.AsTime().Equal(time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("a1's event_time %v, want the one given", a1.EventTime.AsTime())
	}
	if a5 := got["a5"]; a5.Item != 2 || a5.Row != 1 || a5.Labels["click"] != 0 {
		t.Errorf("a5 = %v", a5)
	}
	for _, id := range []string{"a3", "n1", "g1"} { // event_time left out: when grove received it
		if et := got[id].GetEventTime().AsTime(); et.Before(start) || et.After(time.Now()) {
			t.Errorf("%s's event_time %v is not when it was received", id, et)
		}
	}
}
