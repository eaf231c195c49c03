// Package outcomes is Grove's way in for outcomes, what happened after
// predictions (grove.v1.Outcome, docs/outcomes.md): POST /v1/outcomes on
// the scoring HTTP listener (a JSON array of outcomes, or JSON lines with
// Content-Type application/x-ndjson) and the gRPC client stream
// grove.v1.Outcomes/Report, both needing role feedback (a caller holding
// manage may call them too: auth.Identity.May). Each outcome is read and
// checked by package logging/outcome and the valid ones are produced to
// the outcome topic through a Sink (outcome.Writer), which waits for the
// broker's acknowledgement: an outcome counts as accepted only once it is
// stored, and one that fails to produce is answered as an error.
//
// The package holds no state: the producer is the Sink's.
package outcomes

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/groveml/grove/api/outcomes/outcomespb"
	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging/outcome"
	"github.com/groveml/grove/transport/grpcserver"
	"github.com/groveml/grove/transport/httpserver"
)

// API is the label of POST /v1/outcomes in metrics and refusals.
const API = "outcomes"

// Route is the HTTP route.
const Route = "POST /v1/outcomes"

// ContentTypeLines is the media type of a body of JSON lines.
const ContentTypeLines = "application/x-ndjson"

// WriteTimeout bounds the wait for the broker's acknowledgement of a
// call's outcomes when the call itself has no earlier deadline: outcomes
// not acknowledged by then are answered as errors.
const WriteTimeout = 30 * time.Second

// Sink stores outcomes: Write produces each (already validated) and
// returns, for each, nil once it is stored or why it is not;
// *outcome.Writer is one.
type Sink interface {
	Write(ctx context.Context, outcomes []*grovepb.Outcome) []error
}

// Options configure the protocol.
type Options struct {
	// Sink receives the valid outcomes; nil when Kafka is off, and every
	// call is then answered 503 (UNAVAILABLE over gRPC), naming the
	// settings that turn it on.
	Sink Sink
	// Now is the clock of the event_time an outcome without one gets;
	// nil is time.Now.
	Now func() time.Time
}

// Register serves the protocol on h (POST /v1/outcomes, whose refusals
// and whole-body errors are {"error": ...}) and g
// (grove.v1.Outcomes/Report), both needing role feedback.
func Register(h *httpserver.Server, g grpcserver.Registrar, opts Options) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	r := &rest{h: h, opts: opts}
	h.Handle(Route, auth.RoleFeedback, API, r.report)
	h.SetErrorWriter(API, httpserver.JSONError)
	g.Register(&outcomespb.Outcomes_ServiceDesc, &service{opts: opts}, map[string]auth.Role{"Report": auth.RoleFeedback})
}

// kafkaOff is the answer to every call when there is no Sink.
const kafkaOff = "outcomes are produced to Kafka, which is off: set kafka.brokers (--kafka-brokers) or kafka.embedded (--kafka-embedded)"

// The waits a caller is told (REST's Retry-After, gRPC's retry pushback)
// before it sends again outcomes refused because Kafka is off, or because
// none could be stored.
const (
	kafkaOffRetry  = time.Minute
	notStoredRetry = time.Second
)

// batch is the outcomes of one call being reported: the valid ones, and
// the answer so far.
type batch struct {
	valid   []*grovepb.Outcome
	index   []int // the position of each valid outcome in the call
	checked int   // outcomes that passed Validate, produced or not
	resp    *outcomespb.ReportResponse
}

func newBatch() *batch { return &batch{resp: &outcomespb.ReportResponse{}} }

// add checks the outcome at position i (or takes err, why it could not be
// read), keeping it to be written when it is valid.
func (b *batch) add(i int, o *grovepb.Outcome, err error, now time.Time) {
	if err == nil {
		err = outcome.Validate(o, now)
	}
	if err != nil {
		b.fail(i, err)
		return
	}
	b.checked++
	b.valid, b.index = append(b.valid, o), append(b.index, i)
}

func (b *batch) fail(i int, err error) {
	b.resp.Errors = append(b.resp.Errors, &outcomespb.ReportError{Index: int64(i), Error: err.Error()})
}

// flush writes the valid outcomes kept so far to sink, counting those
// stored and answering the others with their error.
func (b *batch) flush(ctx context.Context, sink Sink) {
	if len(b.valid) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, WriteTimeout)
	defer cancel()
	for j, err := range sink.Write(ctx, b.valid) {
		if err != nil {
			b.fail(b.index[j], fmt.Errorf("not stored: %w", err))
			continue
		}
		b.resp.Accepted++
	}
	b.valid, b.index = b.valid[:0], b.index[:0]
}

// finish orders the errors by position (a write's come after the
// validation errors of the outcomes read after it).
func (b *batch) finish() *outcomespb.ReportResponse {
	slices.SortStableFunc(b.resp.Errors, func(x, y *outcomespb.ReportError) int { return int(x.Index - y.Index) })
	return b.resp
}

// summary is the first few errors of resp, for a status message.
func summary(resp *outcomespb.ReportResponse) string {
	var parts []string
	for _, e := range resp.Errors[:min(len(resp.Errors), 5)] {
		parts = append(parts, fmt.Sprintf("outcome %d: %s", e.Index, e.Error))
	}
	if n := len(resp.Errors) - len(parts); n > 0 {
		parts = append(parts, fmt.Sprintf("and %d more", n))
	}
	return strings.Join(parts, "; ")
}
