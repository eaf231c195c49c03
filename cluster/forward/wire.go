package forward

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/cluster/forward/forwardpb"
	"github.com/groveml/grove/servables"
)

// hopsForwarded is the hop count of every request a Client sends: it left
// the node that took it from the client once.
const hopsForwarded = 1

var priorities = map[Priority]forwardpb.Priority{User: forwardpb.Priority_PRIORITY_USER, Shadow: forwardpb.Priority_PRIORITY_SHADOW}

// checkRequest says what is wrong with a request before it is sent.
func checkRequest(r *Request) error {
	if r.ModelPath == "" {
		return errors.New("the request names no model path")
	}
	if _, ok := priorities[r.Priority]; !ok {
		return fmt.Errorf("priority %v is not user or shadow", r.Priority)
	}
	return nil
}

// encodeRequest returns r on the wire; the tensors' data is shared, not
// copied.
func encodeRequest(r *Request) *forwardpb.PredictRequest {
	m := &forwardpb.PredictRequest{
		ModelPath:  r.ModelPath,
		Inputs:     encodeTensors(r.Inputs),
		Positional: r.Positional,
		TypeNamed:  r.TypeNamed,
		RequestId:  r.RequestID,
		Priority:   priorities[r.Priority],
		Hops:       hopsForwarded,
		Api:        r.API,
		Configs:    r.Configs,
		Contract:   r.Contract,
		Release:    r.Release,
		// A Client sets it again when it sends the call.
		StartWithinNanos: startWithin(r.StartBy, time.Now()),
	}
	if r.Caller.Name != "" || r.Caller.Method != "" || len(r.Caller.Roles) > 0 {
		c := &forwardpb.Caller{Name: r.Caller.Name, Method: r.Caller.Method, Roles: make([]string, len(r.Caller.Roles))}
		for i, role := range r.Caller.Roles {
			c.Roles[i] = string(role)
		}
		m.Caller = c
	}
	return m
}

// startWithin is the start_within_nanos of a request to start by startBy,
// sent at now: 0 for a zero startBy (no bound), at least 1 otherwise, so
// that a copy already late still says so (the serving node drops it
// unrun) rather than saying it has no bound.
func startWithin(startBy, now time.Time) int64 {
	if startBy.IsZero() {
		return 0
	}
	return max(int64(startBy.Sub(now)), 1)
}

// decodeRequest returns the request m carries, received at now, or an
// error naming what is wrong with it (the hop count is the Server's to
// check).
func decodeRequest(m *forwardpb.PredictRequest, now time.Time) (Request, error) {
	r := Request{
		ModelPath:  m.GetModelPath(),
		Positional: m.GetPositional(),
		TypeNamed:  m.GetTypeNamed(),
		RequestID:  m.GetRequestId(),
		API:        m.GetApi(),
		Configs:    m.GetConfigs(),
		Contract:   m.GetContract(),
		Release:    m.GetRelease(),
	}
	if n := m.GetStartWithinNanos(); n != 0 {
		r.StartBy = now.Add(time.Duration(n))
	}
	if r.ModelPath == "" {
		return Request{}, errors.New("model_path is empty")
	}
	switch m.GetPriority() {
	case forwardpb.Priority_PRIORITY_USER:
		r.Priority = User
	case forwardpb.Priority_PRIORITY_SHADOW:
		r.Priority = Shadow
	default:
		return Request{}, fmt.Errorf("priority %v is not PRIORITY_USER or PRIORITY_SHADOW", m.GetPriority())
	}
	if c := m.GetCaller(); c != nil {
		r.Caller = auth.Identity{Name: c.GetName(), Method: c.GetMethod()}
		for _, s := range c.GetRoles() {
			role, err := auth.ParseRole(s)
			if err != nil {
				return Request{}, fmt.Errorf("caller %q: %w", c.GetName(), err)
			}
			r.Caller.Roles = append(r.Caller.Roles, role)
		}
	}
	var err error
	if r.Inputs, err = decodeTensors("input", m.GetInputs()); err != nil {
		return Request{}, err
	}
	return r, nil
}

// encodeAnswer returns a on the wire, answered by node.
func encodeAnswer(a *Answer, node string) *forwardpb.PredictResponse {
	return &forwardpb.PredictResponse{
		Node:           node,
		Checksum:       a.Checksum,
		Outputs:        encodeTensors(a.Outputs),
		UnnamedOutputs: a.UnnamedOutputs,
		QueuedNanos:    int64(a.Queued),
		ComputeNanos:   int64(a.Compute),
	}
}

// decodeAnswer returns the answer m carries, or an error naming what is
// wrong with it.
func decodeAnswer(m *forwardpb.PredictResponse) (Answer, error) {
	a := Answer{
		Node:           m.GetNode(),
		Checksum:       m.GetChecksum(),
		UnnamedOutputs: m.GetUnnamedOutputs(),
		Queued:         time.Duration(m.GetQueuedNanos()),
		Compute:        time.Duration(m.GetComputeNanos()),
	}
	var err error
	a.Outputs, err = decodeTensors("output", m.GetOutputs())
	return a, err
}

func encodeTensors(ts []servables.Tensor) []*forwardpb.Tensor {
	if len(ts) == 0 {
		return nil
	}
	out := make([]*forwardpb.Tensor, len(ts))
	vals := make([]forwardpb.Tensor, len(ts))
	for i, t := range ts {
		v := &vals[i]
		v.Name, v.Datatype, v.Shape, v.Data = t.Name, t.DType.String(), t.Shape, t.Data
		out[i] = v
	}
	return out
}

// decodeTensors returns the tensors ms carries (what names them in errors:
// "input" or "output"), each checked: a known type, a valid shape, data
// that fills it exactly (BYTES framing, BOOL values). Data is used in
// place when 8-byte aligned, else copied to aligned memory (servables'
// typed views expect it).
func decodeTensors(what string, ms []*forwardpb.Tensor) ([]servables.Tensor, error) {
	if len(ms) == 0 {
		return nil, nil
	}
	out := make([]servables.Tensor, len(ms))
	for i, m := range ms {
		dt, ok := servables.ParseDType(m.GetDatatype())
		if !ok {
			return nil, fmt.Errorf("%s %d (%q): unknown datatype %q", what, i, m.GetName(), m.GetDatatype())
		}
		t := servables.Tensor{Name: m.GetName(), DType: dt, Shape: m.GetShape(), Data: m.GetData()}
		if err := t.Validate(); err != nil {
			return nil, fmt.Errorf("%s %d (%q): %w", what, i, m.GetName(), err)
		}
		if dt == servables.Bool {
			if err := servables.CheckBools(t.Data); err != nil {
				return nil, fmt.Errorf("%s %d (%q): %w", what, i, m.GetName(), err)
			}
		}
		if dt != servables.Bytes && len(t.Data) > 0 && uintptr(unsafe.Pointer(&t.Data[0]))%8 != 0 {
			a, err := servables.NewTensor(t.Name, dt, t.Shape)
			if err != nil {
				return nil, fmt.Errorf("%s %d (%q): %w", what, i, m.GetName(), err)
			}
			copy(a.Data, t.Data)
			t.Data = a.Data
		}
		out[i] = t
	}
	return out, nil
}
