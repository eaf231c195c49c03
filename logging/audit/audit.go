// Package audit is Grove's audit trail of management writes: who changed
// the model config, the contract state or the registered models, when,
// through which route, what the change was (before and after) and how it
// ended. The management API, the sidecar's RegisterModel and DeleteModel
// and OIP's repository load and unload begin a Write for each call (Begin);
// the backend notes what it changed on the Write the call's context
// carries (FromContext, Change); the API finishes it with the answer
// (Finish), which hands the Entry to a Recorder. Trail, the Recorder the
// server runs, writes each entry as one log record and as one object in
// the bucket, beside the model config, so the writes of every replica are
// in one place, and lists them back (List, GET /v1/audit).
//
// It lives under logging because it is a log (of changes, where package
// logging is the log of predictions) that the actors and every API use, so
// it must sit below both.
package audit

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"github.com/groveml/grove/auth"
)

// Anonymous is the caller's name in the entries of calls that carry no
// identity: when authentication is not configured.
const Anonymous = "anonymous"

// The results of an entry.
const (
	// ResultOK is a write that succeeded.
	ResultOK = "ok"
	// ResultError is a write that failed or was refused; Entry.Error says why.
	ResultError = "error"
)

// Entry is one management write, as recorded. In JSON (the bucket object,
// the log record and GET /v1/audit):
//
//	{"id": "5f0c2a9e41d7b3c8-000003", "time": "2026-11-25T03:04:31.123456789Z",
//	 "replica": "grove-7d9f/1", "who": "release-bot", "auth": "token", "remote": "10.0.0.7:51234",
//	 "api": "manage", "route": "PUT /{org}/{project}/{n}/{rv}/policy", "path": "/ads/pctr/1/v2/policy",
//	 "target": "ads/pctr/1/v2",
//	 "before": {"model_config": {...}}, "after": {"model_config": {...}},
//	 "result": "ok", "status": "200"}
type Entry struct {
	// ID is unique among the entries of the replica that wrote it (a
	// random token of the process and a sequence number).
	ID string `json:"id"`
	// Time is when the write finished (UTC).
	Time time.Time `json:"time"`
	// Replica names the process that served the call (host/pid).
	Replica string `json:"replica,omitempty"`
	// Who is the caller's identity name; without one, the name of its
	// verified client certificate (Op.Cert); else Anonymous.
	Who string `json:"who"`
	// Auth is how the caller proved who it is (auth.Identity.Method):
	// "token", "jwt", "certificate", or "none".
	Auth string `json:"auth"`
	// Remote is the caller's network address.
	Remote string `json:"remote,omitempty"`
	// API is the API called: "manage", "sidecar" or "oip".
	API string `json:"api"`
	// Route is the HTTP route pattern ("POST /servable") or the full gRPC
	// method name.
	Route string `json:"route"`
	// Path is the HTTP request path; empty over gRPC.
	Path string `json:"path,omitempty"`
	// Target is what the write addresses, when known: a contract
	// ("org/project/n"), a release ("org/project/n/rv"), a model path or
	// an OIP model name.
	Target string `json:"target,omitempty"`
	// Before and After are what the write changed, by section, as it was
	// before and after: "model_config" (the model_metadata and contracts
	// entries that changed, in the model config's JSON form),
	// "contract_state" (a release's shared record: created, valid_since,
	// metrics) and "registered_model" (a Model). A section absent from
	// Before did not exist before; absent from After, it is gone. Both are
	// empty for a write that changed nothing (a failure).
	Before map[string]json.RawMessage `json:"before,omitempty"`
	After  map[string]json.RawMessage `json:"after,omitempty"`
	// Result is ResultOK or ResultError.
	Result string `json:"result"`
	// Status is the answer's HTTP status code or gRPC code name.
	Status string `json:"status,omitempty"`
	// Error is why the write failed, as the caller was told; empty if it
	// succeeded.
	Error string `json:"error,omitempty"`
}

// Recorder keeps the entries of management writes. Record must not fail
// or hold up the write beyond a short bound: a recorder that cannot keep
// an entry says so in its own log and metrics.
type Recorder interface {
	// Record keeps e, completed with its ID, Time and Replica. It returns
	// once e is durable, or when the recorder's bound on waiting passes,
	// or ctx is done; the entry is kept either way if it can be.
	Record(ctx context.Context, e Entry)
}

// Model describes a registered model's content in the "registered_model"
// section of an entry.
type Model struct {
	// Path is the model path.
	Path string `json:"model_path"`
	// Checksum is the checksum of the content loaded (lowercase hex SHA-256
	// over the files in path order).
	Checksum string `json:"checksum,omitempty"`
	// Runtime is the runtime that loaded it.
	Runtime string `json:"runtime,omitempty"`
	// Files are the files sent, with their sizes in bytes.
	Files map[string]int `json:"files,omitempty"`
	// WarmUp reports whether a warm-up request came with it.
	WarmUp bool `json:"warm_up,omitempty"`
}

// Op describes the call a Write records.
type Op struct {
	// API, Route, Path, Target and Remote are copied into the Entry.
	API, Route, Path, Target, Remote string
	// Cert is the name (auth.CertificateName) of the client certificate
	// the TLS layer verified, if any: the caller's name when the call
	// carries no identity (tls.client_auth require without auth).
	Cert string
}

// HTTPOp is the Op of HTTP request r to route (its pattern) of api.
func HTTPOp(r *http.Request, api, route string) Op {
	return Op{API: api, Route: route, Path: r.URL.Path, Remote: r.RemoteAddr, Cert: certName(r.TLS)}
}

// certName is the name of the verified client certificate of a
// connection, or "".
func certName(st *tls.ConnectionState) string {
	if st == nil || len(st.VerifiedChains) == 0 || len(st.VerifiedChains[0]) == 0 {
		return ""
	}
	return auth.CertificateName(st.VerifiedChains[0][0])
}

// GRPCOp is the Op of the gRPC call ctx serves, of api, on target.
func GRPCOp(ctx context.Context, api, target string) Op {
	op := Op{API: api, Target: target}
	op.Route, _ = grpc.Method(ctx)
	if p, ok := peer.FromContext(ctx); ok {
		if p.Addr != nil {
			op.Remote = p.Addr.String()
		}
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			op.Cert = certName(&ti.State)
		}
	}
	return op
}

// Write is one management write being recorded. Its methods are safe for
// concurrent use, and do nothing on a nil *Write (a call not recorded).
type Write struct {
	rec Recorder
	mu  sync.Mutex
	e   Entry
	err error
}

type ctxKey struct{}

// Begin starts the record of a call described by op, made by ctx's caller
// (auth.FromContext; without one, the verified client certificate's name
// op.Cert with the method "certificate", else Anonymous). The context it returns
// carries the Write for the backend's Change calls. With a nil rec nothing
// is recorded and the Write is nil.
func Begin(ctx context.Context, rec Recorder, op Op) (context.Context, *Write) {
	if rec == nil {
		return ctx, nil
	}
	who, method := Anonymous, "none"
	if op.Cert != "" {
		who, method = op.Cert, "certificate"
	}
	if id, ok := auth.FromContext(ctx); ok {
		if id.Name != "" {
			who = id.Name
		}
		if id.Method != "" {
			method = id.Method
		}
	}
	w := &Write{rec: rec, e: Entry{Who: clip(who), Auth: method, API: op.API, Route: clip(op.Route), Path: clip(op.Path),
		Target: clip(op.Target), Remote: op.Remote}}
	return context.WithValue(ctx, ctxKey{}, w), w
}

// maxField is the longest a caller-given field of an entry is kept (a
// path, a model name, an error), in bytes, so that a caller cannot make
// entries of any size.
const maxField = 2048

// clip returns s cut to maxField bytes (on a UTF-8 boundary), marked "…".
func clip(s string) string {
	if len(s) <= maxField {
		return s
	}
	cut := maxField
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// FromContext returns the Write ctx carries, or nil.
func FromContext(ctx context.Context) *Write {
	w, _ := ctx.Value(ctxKey{}).(*Write)
	return w
}

// Target sets what the write addresses, once the call has read it.
func (w *Write) Target(target string) {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.e.Target = clip(target)
	w.mu.Unlock()
}

// Change notes that the write changed section from before to after (each
// marshalled to JSON; nil: it did not exist). A later Change of the same
// section replaces the earlier one's after and keeps its before.
func (w *Write) Change(section string, before, after any) {
	if w == nil {
		return
	}
	b, a := marshalSection(before), marshalSection(after)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.e.Before == nil {
		w.e.Before, w.e.After = map[string]json.RawMessage{}, map[string]json.RawMessage{}
	}
	if _, seen := w.e.Before[section]; !seen && b != nil {
		w.e.Before[section] = b
	}
	delete(w.e.After, section)
	if a != nil {
		w.e.After[section] = a
	}
}

// marshalSection marshals v, nil for nil. Every section Grove notes is
// made of plain values; should one not marshal, its error stands in for it.
func marshalSection(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		data, _ = json.Marshal("not recorded: " + err.Error())
	}
	return data
}

// Fail notes why the write failed, in the words the caller is told; it
// takes precedence over the error Finish gets.
func (w *Write) Fail(err error) {
	if w == nil || err == nil {
		return
	}
	w.mu.Lock()
	w.err = err
	w.mu.Unlock()
}

// Finish records the write with status, the answer's HTTP status code or
// gRPC code name, and err, its failure (nil: it succeeded), through the
// Recorder given to Begin; it returns once Record does.
func (w *Write) Finish(ctx context.Context, status string, err error) {
	if w == nil {
		return
	}
	w.mu.Lock()
	e := w.e
	if w.err != nil {
		err = w.err
	}
	w.mu.Unlock()
	e.Status, e.Result = status, ResultOK
	if err != nil {
		e.Result, e.Error = ResultError, clip(err.Error())
	}
	if len(e.Before) == 0 {
		e.Before = nil
	}
	if len(e.After) == 0 {
		e.After = nil
	}
	w.rec.Record(ctx, e)
}
