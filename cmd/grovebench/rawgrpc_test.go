package main

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/api/oip/oippb"
)

// rawCall makes one ModelInfer call on c's connection with c's message
// replaced by req, and decodes the answer.
func rawCall(t *testing.T, ctx context.Context, c *rawGRPCClient, req *oippb.ModelInferRequest) (*oippb.ModelInferResponse, error) {
	t.Helper()
	msg, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	c.msg = grpcFrame(msg)
	raw, err := c.do(ctx)
	if err != nil {
		return nil, err
	}
	var resp oippb.ModelInferResponse
	if err := proto.Unmarshal(raw, &resp); err != nil {
		t.Fatalf("answer does not unmarshal: %v", err)
	}
	return &resp, nil
}

// TestRawGRPCClientCallsAcrossFlowControlWindows sends requests and gets
// answers larger than HTTP/2's initial 64 KiB windows and its 16 KiB
// frames, often enough that the client must give its receive window back,
// on one connection, and checks every answer.
func TestRawGRPCClientCallsAcrossFlowControlWindows(t *testing.T) {
	ctx := context.Background()
	g := &grpcTarget{addr: startSumServer(t, &sumServer{}), input: "x", width: 3}
	rows := make([][]float64, 20000) // 240 KB in, 80 KB out
	for i := range rows {
		rows[i] = []float64{float64(i), 1, 0.5}
	}
	c := newRawGRPCClient(g.addr, modelInferMethod, nil, 5*time.Second)
	defer c.close()
	calls := 3 * rawRecvWindow / (4 * len(rows)) / 2 // 1.5 receive windows of answers
	for n := range calls {
		resp, err := rawCall(t, ctx, c, g.request(rows))
		if err != nil {
			t.Fatalf("call %d: %v", n, err)
		}
		got, err := rawOutputs(resp)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(rows) || got[0] != 1.5 || got[len(got)-1] != float64(len(rows)-1)+1.5 {
			t.Fatalf("call %d: %d outputs, first %v, last %v", n, len(got), got[0], got[len(got)-1])
		}
	}
	if c.stream != uint32(2*calls-1) {
		t.Errorf("%d calls used stream %d last: the connection was not kept", calls, c.stream)
	}
}

// TestRawGRPCClientReturnsStatusAndKeepsConnection checks that a call
// answered with an error status returns that status and message, and the
// next call goes on the same connection.
func TestRawGRPCClientReturnsStatusAndKeepsConnection(t *testing.T) {
	ctx := context.Background()
	g := &grpcTarget{addr: startSumServer(t, &sumServer{}), input: "x", width: 3}
	c := newRawGRPCClient(g.addr, modelInferMethod, nil, 5*time.Second)
	defer c.close()
	req := g.request([][]float64{{1, 2, 3}})
	req.ModelName = "missing"
	_, err := rawCall(t, ctx, c, req)
	var st *grpcStatusError
	if !errors.As(err, &st) || st.code != 5 || st.msg != `no model "missing"` {
		t.Fatalf("error %v, want gRPC status 5 (NotFound) with the server's message", err)
	}
	conn := c.conn
	req.ModelName = "m"
	resp, err := rawCall(t, ctx, c, req)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := rawOutputs(resp); len(got) != 1 || math.Abs(got[0]-6) > 1e-6 {
		t.Errorf("answer %v, want [6]", got)
	}
	if c.conn != conn {
		t.Error("the connection was replaced after an error status")
	}
}

// TestRawGRPCClientStopsWithContext checks that ending the context fails a
// call the server has not answered, at once.
func TestRawGRPCClientStopsWithContext(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	g := &grpcTarget{addr: startSumServer(t, &sumServer{block: block}), input: "x", width: 3}
	c := newRawGRPCClient(g.addr, modelInferMethod, nil, time.Minute)
	defer c.close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := rawCall(t, ctx, c, g.request([][]float64{{1, 2, 3}}))
	if !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second {
		t.Errorf("after %v: error %v, want context.Canceled soon after 100ms", time.Since(start), err)
	}
}

// TestCheckRawOutputs checks the in-place reading of answers.
func TestCheckRawOutputs(t *testing.T) {
	for _, tc := range []struct {
		name string
		resp *oippb.ModelInferResponse
		ok   bool
	}{
		{"one output of 4 rows", &oippb.ModelInferResponse{ModelName: "m", RawOutputContents: [][]byte{make([]byte, 16)}}, true},
		{"short", &oippb.ModelInferResponse{RawOutputContents: [][]byte{make([]byte, 12)}}, false},
		{"two outputs", &oippb.ModelInferResponse{RawOutputContents: [][]byte{make([]byte, 16), make([]byte, 16)}}, false},
		{"none", &oippb.ModelInferResponse{ModelName: "m"}, false},
	} {
		b, err := proto.Marshal(tc.resp)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkRawOutputs(b, 4); (err == nil) != tc.ok {
			t.Errorf("%s: error %v", tc.name, err)
		}
	}
	if err := checkRawOutputs([]byte{0x32, 0x10, 1}, 4); err == nil {
		t.Error("a truncated answer passed")
	}
}
