package modelconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/internal/jsondoc"
	"github.com/groveml/grove/internal/urlspace"
)

// Config is the model config file kept in the bucket: the models to
// serve and the contracts that route traffic among them.
type Config struct {
	// Models are the model_metadata entries, in file order.
	Models []Model
	// Contracts are the contracts entries, in file order; see Contract.
	Contracts []Contract
}

// Model is one model_metadata entry of the model config.
type Model struct {
	// Path is model_path, the model's object name in the bucket; a trailing
	// "/" makes it a directory (every object under the prefix).
	Path string
	// Checksum is the expected checksum (lowercase hex SHA-256), or empty for none.
	Checksum string
	// WarmUpJSON is warm_up_batch_request_json, a batch request sent to the
	// model before it takes traffic, or empty for none.
	WarmUpJSON string
	// EvictionGracePeriod is eviction_grace_period_in_ms: how long a model
	// keeps serving after it is removed from the config or replaced.
	EvictionGracePeriod time.Duration
	// DefaultTimeout is default_timeout_ms: the deadline of a request to
	// the model that comes without one (0: none).
	DefaultTimeout time.Duration
	// QueueTimeout is queue_timeout_ms: a request that waited longer than
	// this in the model's queue is not run (0: no limit). Not to be confused
	// with Serving.MaxQueueDelay. Unlike Serving, the two timeouts apply in
	// place: changing them does not reload the model.
	QueueTimeout time.Duration
	// Serving are the model's Grove-specific execution settings.
	Serving ServingOptions
	// Signature is the declared signature (inputs and outputs); changing
	// it reloads the model.
	Signature Signature
	// VersionPolicy is version_policy: when set, Path is the directory of
	// numbered versions (Path+"1/", Path+"2/", ...) and the policy picks
	// those served, each a model of its own (Expand).
	VersionPolicy *VersionPolicy
	// VersionChecksums is version_checksums: a version's expected
	// checksum by its number.
	VersionChecksums map[int64]string
	// VersionOf is set on a version of a versioned entry (Expand): the
	// entry's path, e.g. "pcvr/" for Path "pcvr/3/". Empty otherwise.
	VersionOf string
	// Version is that version's number, e.g. 3; 0 for a model that is not a version.
	Version int64
	// KeepPreviousFor is keep_previous_for_ms: how long the content an
	// in-place update replaced stays loaded and warm, out of service, so
	// that going back to it needs no reload (and how long a removed model
	// stays loaded at least). nil: the server's keep_previous_for; 0: off
	// for this model. Like the timeouts, it applies without a reload.
	KeepPreviousFor *time.Duration
	// Nodes is nodes: in a cluster, on how many nodes the model is loaded
	// (0: 1; see Placement). Changing it or MinNodes reloads nothing: the
	// cluster controller places the model again.
	Nodes int
	// MinNodes is min_nodes: in a cluster, the fewest nodes the model may
	// be loaded on when fewer than Nodes have the memory (0: 1). For an
	// on-demand entry it is the copies kept loaded while the model takes
	// no request (0: none), and Nodes the most its demand may add.
	MinNodes int
	// Outcomes is outcomes: what direct calls of the model learn from the
	// outcomes reported after their predictions; nil for nothing. It
	// applies without a reload.
	Outcomes *Outcomes
	// Load is load: when the model is loaded (LoadEager or LoadOnDemand);
	// empty: the server's load_policy. It applies without a reload.
	Load Load
}

// Load is a model entry's load: when the model is loaded.
type Load string

// The values of load.
const (
	// LoadEager loads the model as soon as the config lists it, and keeps
	// it loaded while it is listed (Grove's behaviour without the key).
	LoadEager Load = "eager"
	// LoadOnDemand lists the model at once (state unloaded, routable) but
	// loads it only when a request for it arrives, directly or through a
	// contract's pick; a server with a memory budget unloads it again,
	// idle and least valuable first, when another load needs the room.
	LoadOnDemand Load = "on_demand"
)

// loadNames are the values load accepts.
var loadNames = []string{string(LoadEager), string(LoadOnDemand)}

// OnDemand reports whether the model is loaded on demand: its entry says
// so, or it says nothing and the server's policy (def) is LoadOnDemand.
func (m Model) OnDemand(def Load) bool {
	if m.Load != "" {
		return m.Load == LoadOnDemand
	}
	return def == LoadOnDemand
}

// MaxNodes is the largest nodes and min_nodes.
const MaxNodes = 64

// Placement returns the model's nodes and min_nodes with their defaults
// applied, def being the server's load_policy: 1 ≤ minNodes ≤ nodes ≤
// MaxNodes for an eager entry of a config Parse accepted (min_nodes 0
// means 1, as it always has), 0 ≤ minNodes ≤ nodes for an on-demand one,
// whose min_nodes 0 (the default) means no copy while it is idle.
func (m Model) Placement(def Load) (nodes, minNodes int) {
	if m.OnDemand(def) {
		return max(m.Nodes, 1), m.MinNodes
	}
	return max(m.Nodes, 1), max(m.MinNodes, 1)
}

// Signature is a model's declared inputs and outputs (the Grove fields
// inputs and outputs of a model_metadata entry); either may be empty: not
// declared.
type Signature struct {
	Inputs, Outputs []TensorSignature
}

// TensorSignature is one declared input or output, in the Open Inference
// Protocol's terms: {"name": "x", "datatype": "FP32", "shape": [-1, 64]}.
type TensorSignature struct {
	// Name is the tensor's name, unique among the inputs (or outputs).
	Name string
	// Datatype is one of Datatypes.
	Datatype string
	// Shape holds dimensions of 1 or more, or -1 for any size; empty is a scalar.
	Shape []int64
}

// Datatypes are the datatypes a declared signature may name: the Open
// Inference Protocol's (a model whose runtime cannot take one fails to load).
var Datatypes = []string{"BOOL", "UINT8", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64", "BF16", "BYTES"}

// Equal reports whether two signatures declare the same tensors.
func (s Signature) Equal(o Signature) bool {
	eq := func(a, b TensorSignature) bool {
		return a.Name == b.Name && a.Datatype == b.Datatype && slices.Equal(a.Shape, b.Shape)
	}
	return slices.EqualFunc(s.Inputs, o.Inputs, eq) && slices.EqualFunc(s.Outputs, o.Outputs, eq)
}

// IsZero reports whether nothing is declared.
func (s Signature) IsZero() bool { return len(s.Inputs) == 0 && len(s.Outputs) == 0 }

// ServingOptions are a model's execution settings (Grove extensions of the
// B&A model_metadata entry). A zero field means the server's default;
// changing any of them reloads the model (load, warm up, then swap).
type ServingOptions struct {
	// Replicas is replicas: how many model actors run on the loaded
	// weights, each taking the next request when it is the least busy
	// (0: 1). The runtimes allow concurrent forward calls on one model.
	Replicas int
	// MaxBatchRows is max_batch_rows: the most rows dynamic batching puts
	// in one forward call (0: the server's max_batch_rows; 1: no batching).
	MaxBatchRows int
	// MaxQueueDelay is max_queue_delay_us: how long a lone user request may
	// wait for others to batch with (0: not at all, batch only what is
	// already queued).
	MaxQueueDelay time.Duration
	// IntraOpThreads is intra_op_threads: threads one forward call may use
	// (0: the server's intra_op_threads).
	IntraOpThreads int
	// MissingValue is missing_value when HasMissingValue: an input value
	// an XGBoost model takes as missing, as it takes NaN (other runtimes
	// refuse it). Two fields rather than a pointer keep ServingOptions
	// comparable with ==.
	MissingValue    float64
	HasMissingValue bool
}

// Limits of the serving options, the largest values Parse accepts.
const (
	// MaxReplicas is the largest replicas.
	MaxReplicas = 64
	// MaxBatchRowsLimit is the largest max_batch_rows.
	MaxBatchRowsLimit = 1 << 20
	// MaxQueueDelayUs is the largest max_queue_delay_us: a second.
	MaxQueueDelayUs = 1_000_000
	// MaxIntraOpThreads is the largest intra_op_threads.
	MaxIntraOpThreads = 256
)

// MaxTimeoutMs is the largest default_timeout_ms and queue_timeout_ms: an hour.
const MaxTimeoutMs = 3_600_000

// IsDir reports whether the model path names a directory, that is whether it ends in "/".
func (m Model) IsDir() bool { return strings.HasSuffix(m.Path, "/") }

// Error reports a model config, a contract state or a management
// document that was read but could not be accepted: the field it concerns
// and what is wrong.
type Error = jsondoc.Error

// MaxConfigBytes is the largest model config file Grove reads or writes:
// 64 MiB, room for tens of thousands of entries or many inline warm-up
// requests; a larger file is refused unread.
const MaxConfigBytes = 64 << 20

// Parse parses and validates a model config file.
//
// The format is grove.v1.ModelConfig (grovepb/proto/grove/v1/model_config.proto)
// in protobuf's JSON mapping, a superset of the B&A inference model config,
// decoded with protojson after a scan that checks what the mapping does
// not. The choices made where JSON allows several readings:
//
//   - Names: each field in snake_case or lowerCamelCase. A field given
//     twice, under the same or the other spelling, is an error.
//   - Unknown fields are an error naming the object and the key, except an
//     unknown name in a choice object (a validity rule, phase_in,
//     expiration): validation reports it with its contract and release.
//   - Choice objects hold exactly one key: two keys, an empty object or a
//     null value are errors.
//   - null means the field's default, for scalars, objects and lists alike;
//     a null list element is an error.
//   - Integers may be numbers or quoted numbers ("60000"), and integral
//     values may be written with a fraction or an exponent (6e4, 60000.0,
//     "6e4"). Values outside Grove's range for the field, or outside int32
//     or int64, are errors with the value as written ("6e9 is out of range
//     0..2147483647"); so are fractions (1.5) and quoted text that is not
//     a JSON number (" 1", "1s").
//   - Doubles are numbers or quoted numbers and must be finite: protobuf's
//     "NaN", "Infinity" and "-Infinity", and overflowing numbers (1e400),
//     are errors.
//   - Trailing commas before "]" or "}" are tolerated, as the B&A
//     documentation's example has one.
//   - The input must be UTF-8, and a \u escape of half a UTF-16 surrogate
//     pair ("\ud800" alone) is a syntax error, as protobuf has it.
//   - Syntax errors are reported first, with line and column (counted in
//     bytes); the other decoding errors name the field path, line and
//     column, the first in the document first.
//
// Validation rejects entries with an empty, absolute or otherwise unsafe
// model_path, duplicate model paths, checksums that are not 64 lowercase
// hex characters, warm-up requests that are not JSON, and declared inputs
// and outputs (see Signature) without a name, with a name given twice, a
// datatype other than Datatypes or a dimension other than -1 or 1 or
// more, and versioned entries (version_policy, version_checksums) whose
// model_path is not a directory, that also give checksum, or that overlap
// another entry (see VersionPolicy), a min_nodes above nodes (each 0
// to MaxNodes), and a load other than "eager" or "on_demand". The optional
// contracts section is described at Contract; its errors name the contract
// (organization/project/contract_number) and the servable
// (release_version) concerned. All errors are *Error.
func Parse(data []byte) (*Config, error) {
	if !utf8.Valid(data) {
		return nil, &Error{Msg: "model config is not valid UTF-8"}
	}
	s, err := scanModelConfig(jsondoc.BlankTrailingCommas(data), -1)
	if err != nil {
		return nil, err
	}
	input := s.blanked()
	var pb grovepb.ModelConfig
	if err := protojson.Unmarshal(input, &pb); err != nil {
		return nil, s.decodeError(input, err)
	}
	if s.problem != nil {
		return nil, s.problem
	}
	c, err := fromProto(&pb, s.unknown)
	if err != nil {
		return nil, err
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// fromProto converts a decoded config to Grove's types. unknown maps the
// path of each choice object that held an unknown key to that key, which
// becomes the kind of the rule or policy for validation to report.
func fromProto(pb *grovepb.ModelConfig, unknown map[string]string) (*Config, error) {
	c := &Config{}
	for i, m := range pb.GetModelMetadata() {
		at := fmt.Sprintf("model_metadata[%d]", i)
		sums, err := versionChecksumsFromProto(m.GetVersionChecksums(), at)
		if err != nil {
			return nil, err
		}
		outcomes, err := outcomesFromProto(m.GetOutcomes(), at+".outcomes")
		if err != nil {
			return nil, err
		}
		var policy *VersionPolicy
		if p := m.GetVersionPolicy(); p != nil {
			policy = versionPolicyFromProto(p, unknown[at+".version_policy"])
		}
		c.Models = append(c.Models, Model{
			Path:                m.GetModelPath(),
			Checksum:            m.GetChecksum(),
			WarmUpJSON:          m.GetWarmUpBatchRequestJson(),
			EvictionGracePeriod: time.Duration(m.GetEvictionGracePeriodInMs()) * time.Millisecond,
			DefaultTimeout:      time.Duration(m.GetDefaultTimeoutMs()) * time.Millisecond,
			QueueTimeout:        time.Duration(m.GetQueueTimeoutMs()) * time.Millisecond,
			Serving: ServingOptions{
				Replicas:       int(m.GetReplicas()),
				MaxBatchRows:   int(m.GetMaxBatchRows()),
				MaxQueueDelay:  time.Duration(m.GetMaxQueueDelayUs()) * time.Microsecond,
				IntraOpThreads: int(m.GetIntraOpThreads()),
			},
			Signature:        Signature{Inputs: tensorsFromProto(m.GetInputs()), Outputs: tensorsFromProto(m.GetOutputs())},
			VersionPolicy:    policy,
			VersionChecksums: sums,
			Nodes:            int(m.GetNodes()),
			MinNodes:         int(m.GetMinNodes()),
			Outcomes:         outcomes,
			Load:             Load(m.GetLoad()),
		})
		if m.KeepPreviousForMs != nil {
			c.Models[len(c.Models)-1].KeepPreviousFor = new(time.Duration(m.GetKeepPreviousForMs()) * time.Millisecond)
		}
		if m.MissingValue != nil {
			c.Models[len(c.Models)-1].Serving.MissingValue = m.GetMissingValue()
			c.Models[len(c.Models)-1].Serving.HasMissingValue = true
		}
	}
	for i, k := range pb.GetContracts() {
		at := fmt.Sprintf("contracts[%d]", i)
		out := Contract{Organization: k.GetOrganization(), Project: k.GetProject(), Number: int(k.GetContractNumber()),
			Router: RouterFair, StickyKey: k.GetStickyKey()}
		if k.Router != nil {
			out.Router = Router(k.GetRouter())
		}
		if e := k.GetExpiration(); e != nil {
			out.Expiration = expirationFromProto(e, unknown[at+".expiration"])
		}
		var err error
		if out.Outcomes, err = outcomesFromProto(k.GetOutcomes(), at+".outcomes"); err != nil {
			return nil, err
		}
		if out.Bandit, err = banditFromProto(k.GetBandit(), at+".bandit"); err != nil {
			return nil, err
		}
		for j, s := range k.GetServables() {
			out.Servables = append(out.Servables, servableFromProto(s, fmt.Sprintf("%s.servables[%d]", at, j), unknown))
		}
		c.Contracts = append(c.Contracts, out)
	}
	return c, nil
}

// tensorsFromProto converts declared inputs or outputs.
func tensorsFromProto(ts []*grovepb.TensorSignature) []TensorSignature {
	var out []TensorSignature
	for _, t := range ts {
		out = append(out, TensorSignature{Name: t.GetName(), Datatype: t.GetDatatype(), Shape: t.GetShape()})
	}
	return out
}

// expirationFromProto converts an expiration policy; unknown is the key
// it held if it held an unknown one.
func expirationFromProto(e *grovepb.Expiration, unknown string) Expiration {
	switch p := e.GetPolicy().(type) {
	case *grovepb.Expiration_KeepLatest:
		return Expiration{Kind: ExpireKeepLatest, Keep: int(p.KeepLatest)}
	case *grovepb.Expiration_KeepTopRanked:
		return Expiration{Kind: ExpireKeepTopRanked, Keep: int(p.KeepTopRanked.GetN()), Metric: p.KeepTopRanked.GetMetric()}
	}
	return Expiration{Kind: ExpirationKind(unknown)}
}

// ruleFromProto converts a validity rule; unknown is the key it held if
// it held an unknown one.
func ruleFromProto(r *grovepb.ValidityRule, unknown string) ValidityRule {
	switch r := r.GetRule().(type) {
	case *grovepb.ValidityRule_ImmediatelyValid:
		return ValidityRule{Kind: RuleImmediatelyValid}
	case *grovepb.ValidityRule_NeverValid:
		return ValidityRule{Kind: RuleNeverValid}
	case *grovepb.ValidityRule_ValidAfterMs:
		return ValidityRule{Kind: RuleValidAfterMs, After: time.Duration(r.ValidAfterMs.GetMs()) * time.Millisecond}
	case *grovepb.ValidityRule_MinServedEvents:
		return ValidityRule{Kind: RuleMinServedEvents, Count: r.MinServedEvents.GetCount()}
	case *grovepb.ValidityRule_MinMetric:
		return ValidityRule{Kind: RuleMinMetric, Metric: r.MinMetric.GetMetric(), Threshold: r.MinMetric.GetThreshold()}
	case *grovepb.ValidityRule_PromoteWhen:
		p := r.PromoteWhen
		return ValidityRule{Kind: RulePromoteWhen, Promote: PromoteWhen{MinShadowExecutions: p.GetMinShadowExecutions(),
			MaxMeanAbsDiff: p.MaxMeanAbsDiff, MaxErrorRate: p.MaxErrorRate, MaxP99Ratio: p.MaxP99Ratio,
			MinOutcomes: p.GetMinOutcomes(), MaxLogLossDelta: p.MaxLoglossDelta, LogLossConfidence: p.LoglossConfidence,
			MinAUCDelta: p.MinAucDelta, CalibrationBetween: rangeFromProto(p.GetCalibrationBetween())}}
	}
	return ValidityRule{Kind: RuleKind(unknown)}
}

// servableFromProto converts the servable at path, filling in the
// defaults of absent settings.
func servableFromProto(s *grovepb.ContractServable, path string, unknown map[string]string) ContractServable {
	out := ContractServable{ReleaseVersion: s.GetReleaseVersion(), ModelPath: s.GetModelPath(),
		PhaseIn: PhaseIn{Kind: PhaseInImmediate}, Logging: DefaultLogging()}
	for r, v := range s.GetValidity() {
		out.Validity = append(out.Validity, ruleFromProto(v, unknown[fmt.Sprintf("%s.validity[%d]", path, r)]))
	}
	if p := s.GetPhaseIn(); p != nil {
		switch p := p.GetPolicy().(type) {
		case *grovepb.PhaseIn_Immediate:
		case *grovepb.PhaseIn_LinearOverSecs:
			out.PhaseIn = PhaseIn{Kind: PhaseInLinear, Over: time.Duration(p.LinearOverSecs.GetSecs()) * time.Second}
		default:
			out.PhaseIn = PhaseIn{Kind: PhaseInKind(unknown[path+".phase_in"])}
		}
	}
	if rw := s.GetRollbackWhen(); rw != nil {
		out.RollbackWhen = &RollbackWhen{MinRequests: rw.GetMinRequests(), MaxErrorRate: rw.MaxErrorRate, MaxP99Ms: rw.MaxP99Ms,
			MinOutcomes: rw.GetMinOutcomes(), CalibrationBetween: rangeFromProto(rw.GetCalibrationBetween())}
	}
	if sh := s.GetShadow(); sh != nil {
		out.Shadow = &Shadow{SampleRate: 1}
		if sh.SampleRate != nil {
			out.Shadow.SampleRate = sh.GetSampleRate()
		}
	}
	if l := s.GetLogging(); l != nil {
		if l.LogLevel != nil {
			out.Logging.Level = l.GetLogLevel()
		}
		if l.SampleRate != nil {
			out.Logging.SampleRate = l.GetSampleRate()
		}
		if len(l.GetKeyFeatures()) > 0 {
			out.Logging.KeyFeatures = l.GetKeyFeatures()
		}
		if l.KeyFeaturesSeparator != nil {
			out.Logging.KeyFeaturesSeparator = l.GetKeyFeaturesSeparator()
		}
	}
	return out
}

// MaxGracePeriodMs is the largest eviction_grace_period_in_ms and
// keep_previous_for_ms, the int32 maximum.
const MaxGracePeriodMs = math.MaxInt32

// validate checks the parsed config; see Parse.
func (c *Config) validate() error {
	seen := make(map[string]int, len(c.Models))
	for i, m := range c.Models {
		entry := fmt.Sprintf("model_metadata[%d]", i)
		if err := validateObjectPath(m.Path); err != nil {
			return &Error{Field: entry + ".model_path", Msg: err.Error()}
		}
		if j, dup := seen[m.Path]; dup {
			return &Error{Field: entry + ".model_path", Msg: fmt.Sprintf("duplicate model path %q (also in model_metadata[%d])", m.Path, j)}
		}
		seen[m.Path] = i
		if err := validateChecksum(m.Checksum); err != nil {
			return &Error{Field: entry + ".checksum", Msg: err.Error()}
		}
		if m.WarmUpJSON != "" {
			var raw json.RawMessage
			if err := json.Unmarshal([]byte(m.WarmUpJSON), &raw); err != nil {
				return &Error{Field: entry + ".warm_up_batch_request_json", Msg: fmt.Sprintf("not valid JSON: %v", err), Err: err}
			}
		}
		if err := validateTensors(entry+".inputs", m.Signature.Inputs); err != nil {
			return err
		}
		if err := validateTensors(entry+".outputs", m.Signature.Outputs); err != nil {
			return err
		}
		if m.Load != "" && !slices.Contains(loadNames, string(m.Load)) {
			return &Error{Field: entry + ".load", Msg: fmt.Sprintf("load %q is not %s", m.Load, jsondoc.OrList(loadNames))}
		}
		if nodes, minNodes := m.Placement(LoadEager); minNodes > nodes {
			return &Error{Field: entry + ".min_nodes", Msg: fmt.Sprintf("%d is more than nodes (%d)", minNodes, nodes)}
		}
		if o := m.Serving; o.HasMissingValue && !(math.Abs(o.MissingValue) <= math.MaxFloat32) {
			return &Error{Field: entry + ".missing_value", Msg: fmt.Sprintf("%v is not a finite number within float32's range (the value is compared to inputs as a float32)", o.MissingValue)}
		}
		if err := validateVersioning(entry, m); err != nil {
			return err
		}
		if o := m.Outcomes; o != nil {
			if err := o.validate(); err != nil {
				return &Error{Field: entry + ".outcomes" + err.Field, Msg: fmt.Sprintf("model %s: %s", m.Path, err.Msg)}
			}
		}
	}
	if err := validateOverlaps(c.Models); err != nil {
		return err
	}
	return c.validateContracts()
}

// validateTensors checks declared inputs or outputs at field: each has a
// name, unique among them, a datatype of Datatypes and dimensions of 1 or
// more or -1.
func validateTensors(field string, ts []TensorSignature) error {
	seen := make(map[string]int, len(ts))
	for i, t := range ts {
		at := fmt.Sprintf("%s[%d]", field, i)
		if t.Name == "" {
			return &Error{Field: at + ".name", Msg: "a tensor needs a name"}
		}
		if j, dup := seen[t.Name]; dup {
			return &Error{Field: at + ".name", Msg: fmt.Sprintf("tensor %q is declared twice (also %s[%d])", t.Name, field, j)}
		}
		seen[t.Name] = i
		if !slices.Contains(Datatypes, t.Datatype) {
			msg := fmt.Sprintf("tensor %q: datatype %q is not %s", t.Name, t.Datatype, jsondoc.OrList(Datatypes))
			if t.Datatype == "" {
				msg = fmt.Sprintf("tensor %q needs a datatype: %s", t.Name, jsondoc.OrList(Datatypes))
			}
			return &Error{Field: at + ".datatype", Msg: msg}
		}
		for k, d := range t.Shape {
			if d < 1 && d != -1 {
				return &Error{Field: fmt.Sprintf("%s.shape[%d]", at, k), Msg: fmt.Sprintf("tensor %q: dimension %d is %d; dimensions are 1 or more, or -1 for any size", t.Name, k, d)}
			}
		}
	}
	return nil
}

// validateObjectPath checks that p is a usable object name in a bucket:
// non-empty, relative (no leading "/"), with no ".." segments, backslashes or NUL bytes.
// ValidateModelPath checks a model path by the rules of model_path in the
// model config: relative, clean, slash-separated.
func ValidateModelPath(p string) error { return validateObjectPath(p) }

func validateObjectPath(p string) error {
	switch {
	case p == "":
		return errors.New("must not be empty")
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("%q must not start with \"/\"; paths are relative to the bucket", p)
	case strings.ContainsRune(p, '\\'):
		return fmt.Errorf("%q must not contain backslashes; use \"/\" as separator", p)
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("%q must not contain NUL bytes", p)
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == ".." {
			return fmt.Errorf("%q must not contain \"..\" segments", p)
		}
	}
	return nil
}

// validateChecksum accepts the empty string or 64 lowercase hex characters.
func validateChecksum(s string) error {
	if s == "" {
		return nil
	}
	upper := false
	for _, r := range s {
		switch {
		case '0' <= r && r <= '9', 'a' <= r && r <= 'f':
		case 'A' <= r && r <= 'F':
			upper = true
		default:
			return fmt.Errorf("%q is not hex (invalid character %q); checksums are 64 lowercase hex characters", s, r)
		}
	}
	if upper {
		return fmt.Errorf("%q has uppercase letters; checksums are lowercase hex and compared exactly", s)
	}
	if len(s) != 64 {
		return fmt.Errorf("%q has %d characters; a SHA-256 checksum has 64 lowercase hex characters", s, len(s))
	}
	return nil
}

// Contract is one entry of the optional contracts section of the model
// config: a ForestFlow-style contract, addressed by the URL path
// /{organization}/{project}/{contract_number}, that routes each request to
// one of its servables (model releases) and lets others shadow it.
//
// In JSON (each name may also be written in lowerCamelCase; unknown fields
// are errors; null means the default):
//
//	{"organization": "ads", "project": "pctr", "contract_number": 1,
//	 "router": "fair",
//	 "expiration": {"keep_latest": 2},
//	 "sticky_key": "user_id",
//	 "servables": [{"release_version": "v1", "model_path": "pctr_v1/", ...}]}
//
// The fields:
//   - organization, project: required; URL-path-safe names, see below.
//   - contract_number: required, 1 to 2147483647. (organization, project,
//     contract_number) is unique in the file.
//   - router: "fair" (the default) or "latest"; see Router.
//   - expiration: optional, none by default: {"keep_latest": N} or
//     {"keep_top_ranked": {"n": N, "metric": "auc"}}, N ≥ 1; see Expiration.
//   - sticky_key: optional; the name of a request config whose value pins a
//     caller to one servable while the traffic shares are unchanged.
//   - outcomes: optional; what the predictions learn from the outcomes
//     reported after them, see Outcomes. Every servable then needs
//     logging.log_level FULL.
//   - servables: the releases, see ContractServable; may be empty.
//
// Names (organization, project, release_version) are URL-path-safe: made
// only of ASCII letters, digits, "-", "_", "." and "~", and not "." or "..".
// Package routing evaluates a contract: validity, phase-in, traffic
// shares, shadows and expiration.
type Contract struct {
	// Organization is the first segment of the contract's URL path.
	Organization string
	// Project is the second segment of the contract's URL path.
	Project string
	// Number is contract_number, the third segment of the URL path, ≥ 1.
	Number int
	// Router decides how the valid servables share user traffic.
	Router Router
	// Expiration retires old or poor releases; the zero value retires none.
	Expiration Expiration
	// StickyKey is sticky_key, the request config whose value pins a caller
	// to a servable, or empty for none.
	StickyKey string
	// Outcomes is outcomes: what the contract's predictions learn from
	// the outcomes reported after them; nil for nothing.
	Outcomes *Outcomes
	// Bandit is bandit, the settings of a bandit router; nil for none.
	Bandit *Bandit
	// Servables are the contract's releases, in file order.
	Servables []ContractServable
}

// ID returns "organization/project/contract_number", the contract's URL path
// without the leading "/"; it is unique in a valid config.
func (c Contract) ID() string {
	return c.Organization + "/" + c.Project + "/" + strconv.Itoa(c.Number)
}

// Router is a contract's router: how user traffic is split among the valid
// servables, each weighted by its phase-in percentage.
type Router string

// The routers.
const (
	// RouterFair gives each valid servable a traffic share proportional to
	// its phase-in percentage: pct / Σpct.
	RouterFair Router = "fair"
	// RouterLatest gives the newest valid servable exactly its phase-in
	// percentage of the traffic and the previous valid one the rest.
	RouterLatest Router = "latest"
)

// ExpirationKind names an expiration policy; the empty kind is none.
type ExpirationKind string

// The expiration policies.
const (
	// ExpireNone keeps every servable.
	ExpireNone ExpirationKind = ""
	// ExpireKeepLatest ("keep_latest": N) keeps the N most recently valid servables.
	ExpireKeepLatest ExpirationKind = "keep_latest"
	// ExpireKeepTopRanked ("keep_top_ranked": {"n": N, "metric": "auc"})
	// keeps the N servables with the highest value of a metric.
	ExpireKeepTopRanked ExpirationKind = "keep_top_ranked"
)

// Expiration is a contract's expiration policy: which valid servables are
// retired (no traffic, no shadow copies, model unloaded after its grace
// period). Servables that are not valid, such as shadow-only ones with
// never_valid, are never retired by it.
type Expiration struct {
	// Kind is the policy, or ExpireNone.
	Kind ExpirationKind
	// Keep is N, how many servables the policy keeps (≥ 1).
	Keep int
	// Metric is the metric keep_top_ranked ranks by (higher is better): a
	// metric fed by the metrics API, or one of OutcomeMetrics.
	Metric string
}

// ContractServable is one release of a contract: a model of model_metadata
// with its routing, shadowing and logging policy.
//
// In JSON:
//
//	{"release_version": "v2", "model_path": "pctr_v2/",
//	 "validity": [{"valid_after_ms": {"ms": 60000}}, {"min_metric": {"metric": "auc", "threshold": 0.7}}],
//	 "phase_in": {"linear_over_secs": {"secs": 600}},
//	 "shadow": {"sample_rate": 0.1},
//	 "logging": {"log_level": "SAMPLE", "sample_rate": 0.01, "key_features": ["user_id"], "key_features_separator": "."}}
//
// The fields:
//   - release_version: required, URL-path-safe, unique within the contract.
//   - model_path: required; must be the model_path of a model_metadata
//     entry, and is used by one servable of the contract at most. A
//     versioned entry's path (one with a version_policy) names its newest
//     ready version, whichever that is when a request comes; a version's
//     path under it ("pcvr/3/") names that version, which serves while
//     the entry's policy selects it (use "specific" or "all" for the
//     versions a contract routes between).
//   - validity: the rules that must all hold before the servable takes
//     user traffic; see ValidityRule. Empty or absent: valid once loaded.
//   - phase_in: {"immediate": {}} (the default) or
//     {"linear_over_secs": {"secs": N}}, N ≥ 1; see PhaseIn.
//   - shadow: optional; see Shadow. {"shadow": {}} shadows every request.
//   - logging: optional; see ServableLogging.
//   - rollback_when: optional, {"max_error_rate": 0.01, "max_p99_ms": 20,
//     "min_requests": 500, "calibration_between": [0.9, 1.1],
//     "min_outcomes": 20000}: at least one bound. max_error_rate (0 to 1)
//     and max_p99_ms (0 or more) need min_requests (1 to 2^53) and a
//     linear_over_secs phase-in, since they watch the servable while it
//     phases in (under a bandit router, whose phase-in is immediate, as
//     long as it serves); calibration_between ([lo, hi], 0 < lo < hi) needs
//     min_outcomes (1 to 2^53) and the contract's binary outcomes, and is
//     judged whatever the phase-in. See RollbackWhen.
type ContractServable struct {
	// ReleaseVersion names the release within its contract.
	ReleaseVersion string
	// ModelPath is the model_path of the model_metadata entry it serves.
	ModelPath string
	// Validity are the rules that must all hold for it to take user traffic.
	Validity []ValidityRule
	// PhaseIn is how its weight rises once it is valid.
	PhaseIn PhaseIn
	// Shadow, if not nil, makes it receive copies of the contract's
	// requests routed to other servables.
	Shadow *Shadow
	// Logging is its prediction log policy.
	Logging ServableLogging
	// RollbackWhen, if not nil, rolls the servable back when its own
	// traffic breaks a bound while it phases in.
	RollbackWhen *RollbackWhen
}

// RuleKind names a validity rule: its JSON key.
type RuleKind string

// The validity rules. Each list element of "validity" is an object with
// exactly one of these keys (or its lowerCamelCase spelling).
const (
	// RuleImmediatelyValid, {"immediately_valid": {}}, always holds.
	RuleImmediatelyValid RuleKind = "immediately_valid"
	// RuleNeverValid, {"never_valid": {}}, never holds: the servable takes
	// no user traffic (with shadow set, it is a shadow-only challenger).
	RuleNeverValid RuleKind = "never_valid"
	// RuleValidAfterMs, {"valid_after_ms": {"ms": N}}, holds once N
	// milliseconds (0 to 9223372036854) have passed since the model was loaded.
	RuleValidAfterMs RuleKind = "valid_after_ms"
	// RuleMinServedEvents, {"min_served_events": {"count": N}}, holds once
	// the servable has executed N (0 to 2^53) shadow requests.
	RuleMinServedEvents RuleKind = "min_served_events"
	// RuleMinMetric, {"min_metric": {"metric": "auc", "threshold": 0.7}},
	// holds while the servable's metric (fed by the metrics API, or one of
	// OutcomeMetrics, measured from outcomes) is at least the threshold; a
	// missing metric does not hold.
	RuleMinMetric RuleKind = "min_metric"
	// RulePromoteWhen, {"promote_when": {"min_shadow_executions": 10000,
	// "max_mean_abs_diff": 0.01, "max_error_rate": 0.001, "max_p99_ratio":
	// 1.2}}, holds once the servable's shadow answers, compared with the
	// answers callers got, meet every bound, and its outcome bounds
	// (min_outcomes, max_logloss_delta, logloss_confidence, min_auc_delta,
	// calibration_between) hold on its scored predictions; see
	// PromoteWhen. The servable needs a shadow setting.
	RulePromoteWhen RuleKind = "promote_when"
)

// ValidityRule is one validity rule of a servable; which fields matter
// depends on Kind.
type ValidityRule struct {
	// Kind names the rule; a parsed config only has the RuleKind constants.
	Kind RuleKind
	// After is valid_after_ms's "ms", as a duration.
	After time.Duration
	// Count is min_served_events's "count".
	Count int64
	// Metric is min_metric's "metric", the metric's name (non-empty).
	Metric string
	// Threshold is min_metric's "threshold", the lowest value that holds.
	Threshold float64
	// Promote is promote_when's bounds.
	Promote PromoteWhen
}

// PromoteWhen is the promote_when validity rule: a shadow servable is
// promoted (becomes valid, and its phase-in starts) once at least
// MinShadowExecutions of its shadow executions were compared with the
// answers callers got and every bound given is met, and, with
// MinOutcomes, once its outcome bounds hold over at least MinOutcomes
// scored predictions. A nil bound is none.
type PromoteWhen struct {
	// MinShadowExecutions is min_shadow_executions, 1 to MaxEventCount,
	// or 0 (absent) when MinOutcomes is set.
	MinShadowExecutions int64
	// MaxMeanAbsDiff is max_mean_abs_diff: the largest mean absolute
	// difference, over each output, from the champion's values (a BYTES
	// output: the share of its rows that are not equal).
	MaxMeanAbsDiff *float64
	// MaxErrorRate is max_error_rate: the highest share of failed shadow
	// executions, 0 to 1.
	MaxErrorRate *float64
	// MaxP99Ratio is max_p99_ratio: the highest ratio of the shadow's p99
	// latency to the champion's on the same requests.
	MaxP99Ratio *float64
	// MinOutcomes is min_outcomes, 1 to MaxEventCount, or 0 for none: the
	// scored predictions each outcome bound below is judged over. It is
	// set when one of them is.
	MinOutcomes int64
	// MaxLogLossDelta is max_logloss_delta: the highest upper end of the
	// LogLossConfidence interval of the log loss difference (challenger −
	// champion, paired on the same requests).
	MaxLogLossDelta *float64
	// LogLossConfidence is logloss_confidence, strictly between 0 and 1;
	// nil means DefaultLogLossConfidence. Only with MaxLogLossDelta.
	LogLossConfidence *float64
	// MinAUCDelta is min_auc_delta, -1 to 1: the lowest AUC difference
	// (challenger − champion, paired).
	MinAUCDelta *float64
	// CalibrationBetween is calibration_between: the range the
	// challenger's calibration (mean prediction ÷ observed rate) must be
	// in; nil for none.
	CalibrationBetween *Range
}

// DefaultLogLossConfidence is promote_when's logloss_confidence when absent.
const DefaultLogLossConfidence = 0.95

// Confidence returns LogLossConfidence, or its default.
func (p PromoteWhen) Confidence() float64 {
	if p.LogLossConfidence == nil {
		return DefaultLogLossConfidence
	}
	return *p.LogLossConfidence
}

// HasOutcomeBounds reports whether the rule has an outcome bound.
func (p PromoteWhen) HasOutcomeBounds() bool {
	return p.MaxLogLossDelta != nil || p.MinAUCDelta != nil || p.CalibrationBetween != nil
}

// Range is a closed interval [Lo, Hi] of a bound such as
// calibration_between, written [lo, hi] in JSON; 0 < Lo < Hi in a parsed
// config.
type Range struct {
	Lo, Hi float64
	// given is how many numbers the list held when it was not two (1, or
	// 3 or more), for validation to refuse; 0 otherwise.
	given int
}

// Contains reports whether v is in [Lo, Hi]; NaN is not.
func (r Range) Contains(v float64) bool { return v >= r.Lo && v <= r.Hi }

// String writes the range as in JSON: [0.9, 1.1].
func (r Range) String() string { return fmt.Sprintf("[%v, %v]", r.Lo, r.Hi) }

// RollbackWhen is a servable's rollback_when gate: while it phases in
// (under a bandit router, Router.IsBandit, as long as it serves), once it
// has received MinRequests user requests since it became valid,
// an error rate above MaxErrorRate or a p99 latency above MaxP99 rolls it
// back; and from when it became valid, whatever its phase-in (outcomes
// arrive a window late, after most phase-ins end), once MinOutcomes of
// its predictions are scored, a calibration outside CalibrationBetween
// rolls it back. At least one bound is set; a nil bound is none.
type RollbackWhen struct {
	// MinRequests is min_requests, 1 to MaxEventCount; 0 (absent) when
	// neither MaxErrorRate nor MaxP99Ms is set.
	MinRequests int64
	// MaxErrorRate is max_error_rate, 0 to 1: the highest share of its
	// user requests that may fail through its own fault.
	MaxErrorRate *float64
	// MaxP99Ms is max_p99_ms, 0 or more: the highest 99th-percentile
	// latency of its answered requests, in milliseconds.
	MaxP99Ms *float64
	// MinOutcomes is min_outcomes, 1 to MaxEventCount: the scored
	// predictions CalibrationBetween is judged over; 0 (absent) without it.
	MinOutcomes int64
	// CalibrationBetween is calibration_between: the range its
	// calibration since it became valid must stay in; nil for none.
	CalibrationBetween *Range
}

// watchesTraffic reports whether the gate has a bound on the servable's
// traffic (max_error_rate, max_p99_ms), watched while it phases in (under
// a bandit router, as long as it serves).
func (r RollbackWhen) watchesTraffic() bool { return r.MaxErrorRate != nil || r.MaxP99Ms != nil }

// PhaseInKind names a phase-in policy: its JSON key.
type PhaseInKind string

// The phase-in policies.
const (
	// PhaseInImmediate, {"immediate": {}}: 100 % as soon as the servable is valid.
	PhaseInImmediate PhaseInKind = "immediate"
	// PhaseInLinear, {"linear_over_secs": {"secs": N}}: from 0 % when the
	// servable becomes valid to 100 % N seconds (1 to 2147483647) later,
	// linearly and continuously.
	PhaseInLinear PhaseInKind = "linear_over_secs"
)

// PhaseIn is a servable's phase-in policy: its weight, from 0 to 100 %, as
// a function of how long it has been valid.
type PhaseIn struct {
	// Kind is the policy; the zero value counts as PhaseInImmediate.
	Kind PhaseInKind
	// Over is linear_over_secs's "secs", as a duration.
	Over time.Duration
}

// Shadow makes a servable receive, at low priority, a copy of each of its
// contract's requests routed to another servable; its answers are logged,
// never returned. In JSON {"sample_rate": R}: R, from 0 to 1 (default 1), is
// the probability that a request is copied to it.
type Shadow struct {
	// SampleRate is the probability that a request is copied, from 0 to 1.
	SampleRate float64
}

// Prediction log levels: the values of ServableLogging.Level, and of the
// server's default for direct model calls (conf.PredictionLog.DefaultLevel).
const (
	LogLevelNone   = "NONE"
	LogLevelFull   = "FULL"
	LogLevelSample = "SAMPLE"
)

// ServableLogging is a servable's prediction log policy, like the server's
// prediction_log defaults. In JSON:
//
//	{"log_level": "FULL", "sample_rate": 1.0, "key_features": ["user_id"], "key_features_separator": "."}
//
// log_level is NONE (the default), FULL or SAMPLE; sample_rate, from 0 to 1
// (default 1), is the share logged at SAMPLE; key_features are distinct,
// non-empty request config names whose values, joined by
// key_features_separator (default "."), make the record key.
type ServableLogging struct {
	// Level is LogLevelNone, LogLevelFull or LogLevelSample.
	Level string
	// SampleRate is the share of executions logged at LogLevelSample.
	SampleRate float64
	// KeyFeatures are the request config names that make the record key.
	KeyFeatures []string
	// KeyFeaturesSeparator joins the key features' values.
	KeyFeaturesSeparator string
}

// Limits of the contracts section.
const (
	// MaxValidAfterMs is the largest valid_after_ms: the longest time.Duration in ms.
	MaxValidAfterMs = math.MaxInt64 / int64(time.Millisecond)
	// MaxEventCount is the largest min_served_events count, 2^53.
	MaxEventCount = 1 << 53
)

// Known values, for validation and error messages.
var (
	routerNames     = []string{string(RouterFair), string(RouterLatest), string(RouterThompson), string(RouterEpsilonGreedy)}
	ruleNames       = []string{string(RuleImmediatelyValid), string(RuleNeverValid), string(RuleValidAfterMs), string(RuleMinServedEvents), string(RuleMinMetric), string(RulePromoteWhen)}
	phaseInNames    = []string{string(PhaseInImmediate), string(PhaseInLinear)}
	expirationNames = []string{string(ExpireKeepLatest), string(ExpireKeepTopRanked)}
	logLevelNames   = []string{LogLevelNone, LogLevelFull, LogLevelSample}
)

// validateContracts checks the contracts section; see Contract and
// ContractServable for the rules.
func (c *Config) validateContracts() error {
	models := make(map[string]bool, len(c.Models))
	versioned := make(map[string]bool)
	for _, m := range c.Models {
		models[m.Path] = true
		if m.IsVersioned() {
			versioned[m.Path] = true
		}
	}
	seen := make(map[string]int, len(c.Contracts))
	for i, k := range c.Contracts {
		at := fmt.Sprintf("contracts[%d]", i)
		bad := func(field, format string, args ...any) error {
			return &Error{Field: at + field, Msg: "contract " + k.ID() + ": " + fmt.Sprintf(format, args...)}
		}
		if err := validateName(k.Organization); err != nil {
			return bad(".organization", "organization %v", err)
		}
		if urlspace.IsReserved(k.Organization) {
			return bad(".organization", "organization %q is reserved: paths under /%s/ belong to Grove's own APIs, so no contract URL could reach it; the reserved names are %s",
				k.Organization, k.Organization, strings.Join(urlspace.Reserved(), ", "))
		}
		if err := validateName(k.Project); err != nil {
			return bad(".project", "project %v", err)
		}
		if k.Number < 1 {
			return bad(".contract_number", "contract_number %d must be at least 1", k.Number)
		}
		if j, dup := seen[k.ID()]; dup {
			return bad("", "defined twice (also contracts[%d])", j)
		}
		seen[k.ID()] = i
		if !slices.Contains(routerNames, string(k.Router)) {
			return bad(".router", "router %q is not %s", k.Router, jsondoc.OrList(routerNames))
		}
		switch e := k.Expiration; e.Kind {
		case ExpireNone:
		case ExpireKeepLatest, ExpireKeepTopRanked:
			field := ".expiration." + string(e.Kind)
			if e.Kind == ExpireKeepTopRanked {
				field += ".n"
			}
			if e.Keep < 1 {
				return bad(field, "%s must keep at least 1 servable, got %d", e.Kind, e.Keep)
			}
			if e.Kind == ExpireKeepTopRanked && e.Metric == "" {
				return bad(".expiration.keep_top_ranked.metric", "keep_top_ranked needs the metric to rank by")
			}
			if e.Kind == ExpireKeepTopRanked {
				if msg := checkOutcomeMetric(e.Metric, k.Outcomes); msg != "" {
					return bad(".expiration.keep_top_ranked.metric", "keep_top_ranked %s", msg)
				}
			}
		default:
			return bad(".expiration", "unknown expiration policy %q; the policies are %s", e.Kind, jsondoc.OrList(expirationNames))
		}
		if o := k.Outcomes; o != nil {
			if err := o.validate(); err != nil {
				return bad(".outcomes"+err.Field, "%s", err.Msg)
			}
		}
		if err := checkBandit(k.Router, k.Bandit, k.Outcomes); err != nil {
			return bad(err.Field, "%s", err.Msg)
		}
		if k.Router.IsBandit() {
			for j, sv := range k.Servables {
				if sv.PhaseIn.Kind == PhaseInLinear {
					return bad(fmt.Sprintf(".servables[%d].phase_in", j), "release %s: router %q decides the traffic by the outcomes; leave phase_in immediate", sv.ReleaseVersion, k.Router)
				}
			}
		}
		releases := make(map[string]int, len(k.Servables))
		paths := make(map[string]string, len(k.Servables))
		for j, s := range k.Servables {
			sat := fmt.Sprintf(".servables[%d]", j)
			sbad := func(field, format string, args ...any) error {
				return bad(sat+field, "release %s: %s", s.ReleaseVersion, fmt.Sprintf(format, args...))
			}
			if err := validateName(s.ReleaseVersion); err != nil {
				return bad(sat+".release_version", "release_version %v", err)
			}
			if prev, dup := releases[s.ReleaseVersion]; dup {
				return sbad(".release_version", "release_version listed twice (also servables[%d])", prev)
			}
			releases[s.ReleaseVersion] = j
			switch prev, dup := paths[s.ModelPath]; {
			case s.ModelPath == "":
				return sbad(".model_path", "model_path must not be empty")
			case !models[s.ModelPath] && !versioned[versionParent(s.ModelPath)]:
				return sbad(".model_path", "model_path %q is not listed in model_metadata, nor a version (entry/N/) of a versioned entry", s.ModelPath)
			case dup:
				return sbad(".model_path", "model_path %q is already release %s of this contract", s.ModelPath, prev)
			}
			paths[s.ModelPath] = s.ReleaseVersion
			for r, rule := range s.Validity {
				rat := fmt.Sprintf(".validity[%d]", r)
				switch rule.Kind {
				case RuleImmediatelyValid, RuleNeverValid, RuleValidAfterMs, RuleMinServedEvents:
				case RuleMinMetric:
					if rule.Metric == "" {
						return sbad(rat+".min_metric.metric", "min_metric needs the name of the metric")
					}
					if msg := checkOutcomeMetric(rule.Metric, k.Outcomes); msg != "" {
						return sbad(rat+".min_metric.metric", "min_metric %s", msg)
					}
				case RulePromoteWhen:
					if err := rule.Promote.validate(); err != nil {
						return sbad(rat+".promote_when"+err.Field, "promote_when %s", err.Msg)
					}
					if s.Shadow == nil {
						return sbad(rat+".promote_when", "promote_when judges the release's shadow answers, and it has no shadow setting; give it \"shadow\": {}")
					}
					if err := rule.Promote.checkOutcomes(k.Outcomes); err != nil {
						return sbad(rat+".promote_when"+err.Field, "promote_when %s", err.Msg)
					}
				default:
					return sbad(rat, "unknown validity rule %q; the rules are %s", rule.Kind, jsondoc.OrList(ruleNames))
				}
			}
			switch p := s.PhaseIn; p.Kind {
			case PhaseInImmediate, "":
			case PhaseInLinear:
				if p.Over < time.Second {
					return sbad(".phase_in.linear_over_secs.secs", "linear_over_secs needs secs ≥ 1, got %d (use immediate for no ramp)", int64(p.Over/time.Second))
				}
			default:
				return sbad(".phase_in", "unknown phase_in policy %q; the policies are %s", p.Kind, jsondoc.OrList(phaseInNames))
			}
			if rw := s.RollbackWhen; rw != nil {
				if err := rw.validate(); err != nil {
					return sbad(".rollback_when"+err.Field, "rollback_when %s", err.Msg)
				}
				if rw.watchesTraffic() && s.PhaseIn.Kind != PhaseInLinear && !k.Router.IsBandit() {
					return sbad(".rollback_when", "rollback_when watches a release while it phases in, and phase_in is immediate; give phase_in {\"linear_over_secs\": {\"secs\": N}} (calibration_between alone needs none; under a bandit router it watches a release as long as it serves)")
				}
				if rw.CalibrationBetween != nil {
					if msg := needBinaryOutcomes("calibration_between", k.Outcomes); msg != "" {
						return sbad(".rollback_when.calibration_between", "rollback_when %s", msg)
					}
				}
			}
			if s.Shadow != nil && !(s.Shadow.SampleRate >= 0 && s.Shadow.SampleRate <= 1) {
				return sbad(".shadow.sample_rate", "shadow sample_rate %v is not between 0 and 1", s.Shadow.SampleRate)
			}
			l := s.Logging
			if !slices.Contains(logLevelNames, l.Level) {
				return sbad(".logging.log_level", "log_level %q is not %s", l.Level, jsondoc.OrList(logLevelNames))
			}
			if k.Outcomes != nil && l.Level != LogLevelFull {
				return sbad(".logging.log_level", "the contract's outcomes are joined to logged predictions, and log_level is %s; give it \"logging\": {\"log_level\": \"FULL\"}", l.Level)
			}
			if !(l.SampleRate >= 0 && l.SampleRate <= 1) {
				return sbad(".logging.sample_rate", "logging sample_rate %v is not between 0 and 1", l.SampleRate)
			}
			for f, name := range l.KeyFeatures {
				if name == "" {
					return sbad(fmt.Sprintf(".logging.key_features[%d]", f), "a key feature name is empty")
				}
				if slices.Contains(l.KeyFeatures[:f], name) {
					return sbad(fmt.Sprintf(".logging.key_features[%d]", f), "key feature %q is listed twice", name)
				}
			}
		}
	}
	return nil
}

// validateName checks that s can be a segment of a URL path as it is: a
// non-empty string of ASCII letters, digits, "-", "_", "." and "~" (RFC
// 3986's unreserved characters), other than "." and "..".
func validateName(s string) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	if s == "." || s == ".." {
		return fmt.Errorf("%q is not a usable URL path segment", s)
	}
	for _, r := range s {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '-', r == '_', r == '.', r == '~':
		default:
			return fmt.Errorf("%q has the character %q; names are URL-path-safe: ASCII letters, digits, \"-\", \"_\", \".\" and \"~\"", s, r)
		}
	}
	return nil
}

// MarshalJSON encodes the config in its canonical form: snake_case field
// names, every contract and servable setting written out (defaults
// included), one JSON shape per choice as Parse documents it. Parse reads
// the result back to an equal Config for any config it accepted, so this
// is the form to write a modified config back to the bucket in. Durations are written in whole milliseconds (seconds
// for linear_over_secs). It is encoding/json's output, not protojson's:
// protojson varies its whitespace from build to build, quotes 64-bit
// integers and leaves out the defaults this form writes.
func (c Config) MarshalJSON() ([]byte, error) {
	type model struct {
		Path     string            `json:"model_path"`
		Checksum string            `json:"checksum,omitempty"`
		WarmUp   string            `json:"warm_up_batch_request_json,omitempty"`
		GraceMs  int64             `json:"eviction_grace_period_in_ms,omitempty"`
		Replicas int               `json:"replicas,omitempty"`
		MaxRows  int               `json:"max_batch_rows,omitempty"`
		DelayUs  int64             `json:"max_queue_delay_us,omitempty"`
		Threads  int               `json:"intra_op_threads,omitempty"`
		Timeout  int64             `json:"default_timeout_ms,omitempty"`
		QueueMs  int64             `json:"queue_timeout_ms,omitempty"`
		Inputs   []tensorJSON      `json:"inputs,omitempty"`
		Outputs  []tensorJSON      `json:"outputs,omitempty"`
		Policy   map[string]any    `json:"version_policy,omitempty"`
		Sums     map[string]string `json:"version_checksums,omitempty"`
		KeepMs   *int64            `json:"keep_previous_for_ms,omitempty"`
		Nodes    int               `json:"nodes,omitempty"`
		MinNodes int               `json:"min_nodes,omitempty"`
		Outcomes *outcomesJSON     `json:"outcomes,omitempty"`
		Missing  *float64          `json:"missing_value,omitempty"`
		Load     Load              `json:"load,omitempty"`
	}
	doc := struct {
		Models    []model        `json:"model_metadata"`
		Contracts []contractJSON `json:"contracts,omitempty"`
	}{Models: []model{}}
	for _, m := range c.Models {
		o := m.Serving
		doc.Models = append(doc.Models, model{m.Path, m.Checksum, m.WarmUpJSON, m.EvictionGracePeriod.Milliseconds(),
			o.Replicas, o.MaxBatchRows, o.MaxQueueDelay.Microseconds(), o.IntraOpThreads,
			m.DefaultTimeout.Milliseconds(), m.QueueTimeout.Milliseconds(),
			tensorsJSON(m.Signature.Inputs), tensorsJSON(m.Signature.Outputs),
			m.VersionPolicy.canonical(), versionChecksumsJSON(m.VersionChecksums), nil, m.Nodes, m.MinNodes, m.Outcomes.canonical(), nil, m.Load})
		if k := m.KeepPreviousFor; k != nil {
			doc.Models[len(doc.Models)-1].KeepMs = new(k.Milliseconds())
		}
		if o.HasMissingValue {
			doc.Models[len(doc.Models)-1].Missing = new(o.MissingValue)
		}
	}
	for _, k := range c.Contracts {
		out := contractJSON{Organization: k.Organization, Project: k.Project, Number: k.Number,
			settingsJSON: k.Settings().canonical(), Servables: []servableJSON{}}
		for _, s := range k.Servables {
			out.Servables = append(out.Servables, canonicalServable(s))
		}
		doc.Contracts = append(doc.Contracts, out)
	}
	return json.Marshal(doc)
}

// tensorJSON is a declared input or output's canonical JSON shape.
type tensorJSON struct {
	Name     string  `json:"name"`
	Datatype string  `json:"datatype"`
	Shape    []int64 `json:"shape"`
}

// tensorsJSON returns declared tensors' canonical JSON shapes.
func tensorsJSON(ts []TensorSignature) []tensorJSON {
	var out []tensorJSON
	for _, t := range ts {
		shape := t.Shape
		if shape == nil {
			shape = []int64{}
		}
		out = append(out, tensorJSON{t.Name, t.Datatype, shape})
	}
	return out
}

// The canonical JSON shapes of the contracts section, shared by
// MarshalJSON and the management API's settings documents.
type (
	contractJSON struct {
		Organization string `json:"organization"`
		Project      string `json:"project"`
		Number       int    `json:"contract_number"`
		settingsJSON
		Servables []servableJSON `json:"servables"`
	}
	settingsJSON struct {
		Router     Router         `json:"router"`
		Expiration map[string]any `json:"expiration,omitempty"`
		StickyKey  string         `json:"sticky_key,omitempty"`
		Outcomes   *outcomesJSON  `json:"outcomes,omitempty"`
		Bandit     *banditJSON    `json:"bandit,omitempty"`
	}
	servableJSON struct {
		Release string `json:"release_version"`
		Path    string `json:"model_path"`
		policyJSON
		Logging loggingJSON `json:"logging"`
	}
	policyJSON struct {
		Validity []map[string]any  `json:"validity"`
		PhaseIn  map[string]any    `json:"phase_in"`
		Shadow   *shadowJSON       `json:"shadow,omitempty"`
		Rollback *rollbackWhenJSON `json:"rollback_when,omitempty"`
	}
	shadowJSON struct {
		SampleRate float64 `json:"sample_rate"`
	}
	loggingJSON struct {
		Level       string   `json:"log_level"`
		SampleRate  float64  `json:"sample_rate"`
		KeyFeatures []string `json:"key_features"`
		Separator   string   `json:"key_features_separator"`
	}
)

// canonical returns the settings' canonical JSON shape.
func (cs ContractSettings) canonical() settingsJSON {
	out := settingsJSON{Router: cs.Router, StickyKey: cs.StickyKey, Outcomes: cs.Outcomes.canonical(), Bandit: cs.Bandit.canonical(cs.Router)}
	if out.Router == "" {
		out.Router = RouterFair
	}
	switch e := cs.Expiration; e.Kind {
	case ExpireNone:
	case ExpireKeepLatest:
		out.Expiration = map[string]any{string(e.Kind): e.Keep}
	case ExpireKeepTopRanked:
		out.Expiration = map[string]any{string(e.Kind): map[string]any{"n": e.Keep, "metric": e.Metric}}
	default:
		out.Expiration = map[string]any{string(e.Kind): struct{}{}}
	}
	return out
}

// canonicalServable returns s's canonical JSON shape.
func canonicalServable(s ContractServable) servableJSON {
	return servableJSON{Release: s.ReleaseVersion, Path: s.ModelPath, policyJSON: s.Policy().canonical(), Logging: s.Logging.canonical()}
}

// canonical returns the policy's canonical JSON shape.
func (p Policy) canonical() policyJSON {
	empty := struct{}{}
	out := policyJSON{Validity: []map[string]any{}}
	for _, r := range p.Validity {
		var arg any = empty
		switch r.Kind {
		case RuleValidAfterMs:
			arg = map[string]any{"ms": r.After.Milliseconds()}
		case RuleMinServedEvents:
			arg = map[string]any{"count": r.Count}
		case RuleMinMetric:
			arg = map[string]any{"metric": r.Metric, "threshold": r.Threshold}
		case RulePromoteWhen:
			arg = r.Promote.canonical()
		}
		out.Validity = append(out.Validity, map[string]any{string(r.Kind): arg})
	}
	switch p.PhaseIn.Kind {
	case PhaseInLinear:
		out.PhaseIn = map[string]any{string(PhaseInLinear): map[string]any{"secs": int64(p.PhaseIn.Over / time.Second)}}
	case "":
		out.PhaseIn = map[string]any{string(PhaseInImmediate): empty}
	default:
		out.PhaseIn = map[string]any{string(p.PhaseIn.Kind): empty}
	}
	if p.Shadow != nil {
		out.Shadow = &shadowJSON{p.Shadow.SampleRate}
	}
	out.Rollback = p.RollbackWhen.canonical()
	return out
}

// canonical returns the logging settings' canonical JSON shape.
func (l ServableLogging) canonical() loggingJSON {
	out := loggingJSON{l.Level, l.SampleRate, l.KeyFeatures, l.KeyFeaturesSeparator}
	if out.Level == "" {
		out.Level = LogLevelNone
	}
	if out.KeyFeatures == nil {
		out.KeyFeatures = []string{}
	}
	return out
}
