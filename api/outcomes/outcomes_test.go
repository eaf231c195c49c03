package outcomes

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/groveml/grove/api/outcomes/outcomespb"
	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging"
	"github.com/groveml/grove/logging/kafkatest"
	"github.com/groveml/grove/logging/outcome"
	"github.com/groveml/grove/transport/grpcserver"
	"github.com/groveml/grove/transport/httpserver"
)

const topic = "grove.outcomes"

// received is the injected clock's time: the event_time of outcomes
// without one.
var received = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// tokens are one caller per role the tests use.
var tokens = map[auth.Role]string{auth.RoleInfer: "tok-infer", auth.RoleFeedback: "tok-feedback", auth.RoleManage: "tok-manage"}

// fixture is the protocol served over HTTP and gRPC on loopback, with
// authentication on, producing to a kfake broker.
type fixture struct {
	url    string
	client outcomespb.OutcomesClient
	broker string
	conn   *grpc.ClientConn
}

func serve(t *testing.T, sink func(broker string) Sink, maxBody int64) *fixture {
	t.Helper()
	var doc strings.Builder
	doc.WriteString("tokens:\n")
	for role, tok := range tokens {
		fmt.Fprintf(&doc, "  - {name: only-%s, sha256: %x, roles: [%s]}\n", role, sha256.Sum256([]byte(tok)), role)
	}
	file := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(file, []byte(doc.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	discard := slog.New(slog.DiscardHandler)
	authn, err := auth.New(auth.Config{TokensFile: file, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic), kfake.ListenFn(func(network, _ string) (net.Listener, error) {
		return net.Listen(network, "127.0.0.1:0")
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	broker := c.ListenAddrs()[0]
	h := httpserver.New(httpserver.Options{Logger: discard, Auth: authn, MaxBodyBytes: maxBody})
	g := grpcserver.New(grpcserver.Options{Auth: authn})
	Register(h, g, Options{Sink: sink(broker), Now: func() time.Time { return received }})
	hs := httptest.NewServer(h.Handler())
	t.Cleanup(hs.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return &fixture{url: hs.URL, client: outcomespb.NewOutcomesClient(conn), broker: broker, conn: conn}
}

// kafkaSink is an outcome.Writer over a producer of the fixture's broker.
func kafkaSink(t *testing.T) func(string) Sink {
	return func(broker string) Sink {
		k := conf.DefaultServer().Kafka
		k.Brokers, k.Linger = []string{broker}, time.Millisecond
		p, err := logging.New(k, logging.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close(context.Background()) })
		return outcome.NewWriter(p, topic)
	}
}

// post sends body to POST /v1/outcomes as token's caller.
func (f *fixture) post(t *testing.T, token, contentType, body string) (int, answer, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.url+"/v1/outcomes", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var a answer
	_ = json.Unmarshal(raw, &a)
	return resp.StatusCode, a, string(raw)
}

// report streams outcomes to Report as token's caller.
func (f *fixture) report(t *testing.T, token string, outcomes ...*grovepb.Outcome) (*outcomespb.ReportResponse, error) {
	t.Helper()
	resp, _, err := f.reportTrailer(t, token, outcomes...)
	return resp, err
}

// reportTrailer is report with the trailer the stream ended with.
func (f *fixture) reportTrailer(t *testing.T, token string, outcomes ...*grovepb.Outcome) (*outcomespb.ReportResponse, metadata.MD, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token), 10*time.Second)
	defer cancel()
	stream, err := f.client.Report(ctx)
	if err != nil {
		return nil, nil, err
	}
	for _, o := range outcomes {
		if err := stream.Send(o); err != nil {
			break // the server ended the stream: CloseAndRecv says why
		}
	}
	resp, err := stream.CloseAndRecv()
	return resp, stream.Trailer(), err
}

// records reads the outcome topic, failing t unless it holds exactly n records.
func (f *fixture) records(t *testing.T, n int) []*kgo.Record {
	t.Helper()
	return kafkatest.ReadExactly(t, f.broker, topic, n, 10*time.Second)
}

// checkRecord fails t unless r is want's record: keyed by its join key,
// with the proto headers, its value decoding to want.
func checkRecord(t *testing.T, r *kgo.Record, want *grovepb.Outcome) {
	t.Helper()
	if key := want.RequestId + want.Key; string(r.Key) != key {
		t.Errorf("record key %q, want %q", r.Key, key)
	}
	h := map[string]string{}
	for _, x := range r.Headers {
		h[x.Key] = string(x.Value)
	}
	if h["grove-encoding"] != "proto" || h["grove-schema"] != "grove.v1.Outcome" || h["content-type"] != "application/x-protobuf" {
		t.Errorf("record headers %v", h)
	}
	got, err := outcome.DecodeRecord(r.Value, r.Headers)
	if err != nil || !proto.Equal(got, want) {
		t.Errorf("record value %v, %v; want %v", got, err, want)
	}
}

func TestPostedArrayStoresTheValidOutcomesAndAnswersEachOtherByIndex(t *testing.T) {
	f := serve(t, kafkaSink(t), 1<<20)
	code, a, raw := f.post(t, tokens[auth.RoleFeedback], "application/json", `[
		{"outcome_id":"o1","request_id":"req-1","item":1,"labels":{"click":1},"event_time":"2026-05-01T11:59:00Z"},
		{"outcome_id":"o2","request_id":"req-2","labels":{}},
		{"outcome_id":"o3","key":"u1.ad7","labels":{"conversion":1,"value":12.5},"contract":"ads/ctr/1"},
		{"outcome_id":"o4","request_id":"req-4","labels":{"click":"yes"}},
		7
	]`)
	if code != http.StatusOK || a.Accepted != 2 || len(a.Errors) != 3 {
		t.Fatalf("answer %d %s, want 200 with 2 accepted and 3 errors", code, raw)
	}
	for i, want := range []struct {
		index int64
		text  string
	}{{1, "labels: at least one is required"}, {3, `labels: "click" is "yes", not a number`}, {4, "not a JSON outcome"}} {
		if e := a.Errors[i]; e.Index != want.index || !strings.Contains(e.Error, want.text) {
			t.Errorf("error %d = %+v, want index %d with %q", i, e, want.index, want.text)
		}
	}
	recs := f.records(t, 2)
	checkRecord(t, recs[0], &grovepb.Outcome{OutcomeId: "o1", RequestId: "req-1", Item: 1, Labels: map[string]float64{"click": 1},
		EventTime: timestamppb.New(time.Date(2026, 5, 1, 11, 59, 0, 0, time.UTC))})
	checkRecord(t, recs[1], &grovepb.Outcome{OutcomeId: "o3", Key: "u1.ad7", Labels: map[string]float64{"conversion": 1, "value": 12.5},
		Contract: "ads/ctr/1", EventTime: timestamppb.New(received)})
}

func TestPostedJSONLinesAreOutcomesOneALine(t *testing.T) {
	f := serve(t, kafkaSink(t), 1<<20)
	body := "{\"outcome_id\":\"a\",\"request_id\":\"r\",\"labels\":{\"click\":1}}\n\n{\"outcome_id\":\"b\",\"request_id\":\"r\",\"key\":\"k\",\"labels\":{\"click\":1}}\n" +
		"{\"outcome_id\":\"c\",\"request_id\":\"r\",\"row\":2,\"labels\":{\"click\":0}}\n"
	code, a, raw := f.post(t, tokens[auth.RoleFeedback], "application/x-ndjson; charset=utf-8", body)
	if code != http.StatusOK || a.Accepted != 2 || len(a.Errors) != 1 || a.Errors[0].Index != 1 || !strings.Contains(a.Errors[0].Error, "request_id, key: both are set") {
		t.Fatalf("answer %d %s, want 200, 2 accepted, outcome 1 refused for request_id and key", code, raw)
	}
	recs := f.records(t, 2)
	checkRecord(t, recs[1], &grovepb.Outcome{OutcomeId: "c", RequestId: "r", Row: 2, Labels: map[string]float64{"click": 0}, EventTime: timestamppb.New(received)})
}

func TestPostIsRefused400OnlyWhenNothingParses(t *testing.T) {
	f := serve(t, kafkaSink(t), 1<<20)
	for _, tc := range []struct{ ctype, body, want string }{
		{"", `[{"outcome_id":"","request_id":"r","labels":{"click":1}},{"labels":{"x":1}}]`, `"errors":[{"index":0,"error":"outcome_id: required"}`},
		{"", `{"outcome_id":"a","request_id":"r","labels":{"click":1}}`, `{"error":"the body is JSON object, not an array of outcomes"}`},
		{"", `[]`, `{"error":"no outcomes in the body`},
		{"application/x-ndjson", "\n\n", `{"error":"no outcomes in the body`},
		{"", `[{"outcome_id":"a"`, `{"error":"the body is not a JSON array of outcomes`},
	} {
		if code, _, raw := f.post(t, tokens[auth.RoleFeedback], tc.ctype, tc.body); code != http.StatusBadRequest || !strings.Contains(raw, tc.want) {
			t.Errorf("%q: %d %s, want 400 with %s", tc.body, code, raw, tc.want)
		}
	}
	f.records(t, 0)
}

func TestPostBodyIsHeldToMaxBodyBytes(t *testing.T) {
	f := serve(t, kafkaSink(t), 64)
	body := `[{"outcome_id":"a","request_id":"r","labels":{"click":1}},{"outcome_id":"b","request_id":"r","labels":{"click":1}}]`
	if code, _, raw := f.post(t, tokens[auth.RoleFeedback], "", body); code != http.StatusRequestEntityTooLarge || !strings.Contains(raw, `"error"`) {
		t.Errorf("%d bytes with a limit of 64: %d %s, want 413", len(body), code, raw)
	}
}

func TestReportStreamStoresTheValidOutcomesAndAnswersEachOtherByIndex(t *testing.T) {
	f := serve(t, kafkaSink(t), 1<<20)
	sent := []*grovepb.Outcome{
		{OutcomeId: "g1", RequestId: "req-9", Row: 3, Labels: map[string]float64{"click": 1}},
		{OutcomeId: "g2", RequestId: "req-9", Item: -1, Labels: map[string]float64{"click": 1}},
		{OutcomeId: "g3", Key: "k", Labels: map[string]float64{"value": 2}, EventTime: timestamppb.New(received.Add(-time.Hour))},
	}
	resp, err := f.report(t, tokens[auth.RoleFeedback], sent...)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Accepted != 2 || len(resp.Errors) != 1 || resp.Errors[0].Index != 1 || resp.Errors[0].Error != "item: -1 is negative" {
		t.Fatalf("answer %v, want 2 accepted and outcome 1 refused for its item", resp)
	}
	recs := f.records(t, 2)
	want0 := proto.Clone(sent[0]).(*grovepb.Outcome)
	want0.EventTime = timestamppb.New(received)
	checkRecord(t, recs[0], want0)
	checkRecord(t, recs[1], sent[2])
	if _, err := f.report(t, tokens[auth.RoleFeedback], sent[1]); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "outcome 0: item: -1 is negative") {
		t.Errorf("a stream of no valid outcome: %v, want INVALID_ARGUMENT naming the error", err)
	}
	if _, err := f.report(t, tokens[auth.RoleFeedback]); status.Code(err) != codes.InvalidArgument {
		t.Errorf("an empty stream: %v, want INVALID_ARGUMENT", err)
	}
}

func TestOnlyFeedbackAndManageMayReportOutcomes(t *testing.T) {
	f := serve(t, kafkaSink(t), 1<<20)
	body := `[{"outcome_id":"a","request_id":"r","labels":{"click":1}}]`
	o := &grovepb.Outcome{OutcomeId: "a", RequestId: "r", Labels: map[string]float64{"click": 1}}
	if code, _, raw := f.post(t, tokens[auth.RoleInfer], "", body); code != http.StatusForbidden || !strings.Contains(raw, `{"error":"token \"only-infer\" lacks role feedback"}`) {
		t.Errorf("POST with infer: %d %s, want 403 lacking role feedback", code, raw)
	}
	if _, err := f.report(t, tokens[auth.RoleInfer], o); status.Code(err) != codes.PermissionDenied {
		t.Errorf("Report with infer: %v, want PERMISSION_DENIED", err)
	}
	for _, role := range []auth.Role{auth.RoleFeedback, auth.RoleManage} {
		if code, a, raw := f.post(t, tokens[role], "", body); code != http.StatusOK || a.Accepted != 1 {
			t.Errorf("POST with %s: %d %s, want 200 with 1 accepted", role, code, raw)
		}
		if resp, err := f.report(t, tokens[role], o); err != nil || resp.Accepted != 1 {
			t.Errorf("Report with %s: %v, %v; want 1 accepted", role, resp, err)
		}
	}
	f.records(t, 4)
}

// failingSink refuses every outcome, as a broker that never acknowledges.
type failingSink struct{}

func (failingSink) Write(_ context.Context, os []*grovepb.Outcome) []error {
	errs := make([]error, len(os))
	for i := range errs {
		errs[i] = errors.New("broker unreachable")
	}
	return errs
}

func TestOutcomesNotStoredAreErrorsNotAccepted(t *testing.T) {
	f := serve(t, func(string) Sink { return failingSink{} }, 1<<20)
	code, a, raw := f.post(t, tokens[auth.RoleFeedback], "", `[{"outcome_id":"a","request_id":"r","labels":{"click":1}},{"outcome_id":"b"}]`)
	if code != http.StatusServiceUnavailable || a.Accepted != 0 || len(a.Errors) != 2 || a.Errors[0].Index != 0 ||
		a.Errors[0].Error != "not stored: broker unreachable" {
		t.Errorf("answer %d %s, want 503 with outcome 0 not stored", code, raw)
	}
	_, tr, err := f.reportTrailer(t, tokens[auth.RoleFeedback], &grovepb.Outcome{OutcomeId: "a", RequestId: "r", Labels: map[string]float64{"click": 1}})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "not stored: broker unreachable") {
		t.Errorf("Report: %v, want UNAVAILABLE", err)
	}
	if got := tr.Get("grpc-retry-pushback-ms"); fmt.Sprint(got) != "[1000]" {
		t.Errorf("Report: grpc-retry-pushback-ms %q, want REST's Retry-After, 1000", got)
	}
}

func TestWithKafkaOffEveryCallSaysSo(t *testing.T) {
	f := serve(t, func(string) Sink { return nil }, 1<<20)
	if code, _, raw := f.post(t, tokens[auth.RoleFeedback], "", `[]`); code != http.StatusServiceUnavailable || !strings.Contains(raw, "kafka.brokers") {
		t.Errorf("POST: %d %s, want 503 naming the settings", code, raw)
	}
	_, tr, err := f.reportTrailer(t, tokens[auth.RoleFeedback], &grovepb.Outcome{})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("Report: %v, want UNAVAILABLE", err)
	}
	if got := tr.Get("grpc-retry-pushback-ms"); fmt.Sprint(got) != "[60000]" {
		t.Errorf("Report: grpc-retry-pushback-ms %q, want REST's Retry-After, 60000", got)
	}
}

// wireCodec sends messages already encoded ([]byte) as they are, so that
// a test can send bytes a proto client would refuse to encode.
type wireCodec struct{}

func (wireCodec) Marshal(v any) ([]byte, error)      { return v.([]byte), nil }
func (wireCodec) Unmarshal(data []byte, v any) error { return proto.Unmarshal(data, v.(proto.Message)) }
func (wireCodec) Name() string                       { return "proto" }

func TestReportAnswersAnOutcomeThatDoesNotDecodeByIndex(t *testing.T) {
	f := serve(t, kafkaSink(t), 1<<20)
	good, err := proto.Marshal(&grovepb.Outcome{OutcomeId: "w1", RequestId: "req-1", Labels: map[string]float64{"click": 1}})
	if err != nil {
		t.Fatal(err)
	}
	// outcome_id "w2", request_id "r\xff": a string that is not UTF-8.
	bad := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "w2")
	bad = protowire.AppendString(protowire.AppendTag(bad, 2, protowire.BytesType), "r\xff")
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+tokens[auth.RoleFeedback]), 10*time.Second)
	defer cancel()
	stream, err := f.conn.NewStream(ctx, &outcomespb.Outcomes_ServiceDesc.Streams[0], outcomespb.Outcomes_Report_FullMethodName, grpc.ForceCodec(wireCodec{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range [][]byte{good, bad} {
		if err := stream.SendMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	resp := new(outcomespb.ReportResponse)
	if err := stream.RecvMsg(resp); err != nil {
		t.Fatalf("a stream with one outcome that does not decode: %v, want outcome 0 stored and outcome 1 refused", err)
	}
	if resp.Accepted != 1 || len(resp.Errors) != 1 || resp.Errors[0].Index != 1 || !strings.Contains(resp.Errors[0].Error, "UTF-8") {
		t.Fatalf("answer %v, want 1 accepted and outcome 1 refused for its invalid UTF-8", resp)
	}
	f.records(t, 1)
}
