package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/servables/runtimes"
)

const replayUsage = `Usage: grove replay [flags] --model PATH
       grove replay [flags] --url http://HOST:PORT [--target-model P]

An offline shadow trial of a challenger on real traffic: reads the requests
that the prediction log recorded (every event on the topic when the replay
starts, oldest first), scores their logged inputs again with the challenger,
and prints how the new answers compare with the logged ones.

The challenger is either
  --model PATH  a local model file or directory (examples/bucket/pctr_v2/),
                loaded in this process with Grove's runtimes, or
  --url URL     a running Grove, sent each logged request as a B&A batch
                request (POST /v1/inference, with the logged configs and
                X-Request-Id "replay-<logged request id>") for the model
                --target-model, by default the event's own model path.
                A Grove that logs predictions logs these requests too.
                Over https://, --ca names the CAs of its certificate and
                --cert/--key a client certificate; --token (or
                $GROVE_TOKEN) is sent as a bearer token.

Only served events are replayed unless --include-shadow; --logged-model
keeps the events of one logged model path. An event is skipped, and counted
by reason, when it logged an error, has no logged inputs or outputs, its
tensors do not decode, the challenger fails on it, or the challenger's
outputs differ in number or shape from the logged ones.

The summary gives the events compared, those skipped by reason, the mean
and max absolute difference over all output values compared, and the share
of compared events whose every output value is within --tolerance. With
--json it is one JSON object instead.
` + kafkaUsage + `
Flags:
`

// replay runs "grove replay".
func replay(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("grove replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var src logSource
	src.flags(fs)
	model := fs.String("model", "", "score in-process with the model file or directory at `path`")
	url := fs.String("url", "", "score with the running Grove at `URL` (http://127.0.0.1:8080)")
	var sc0 serverClient
	sc0.flags(fs)
	target := fs.String("target-model", "", "with --url: the model `path` to send the requests to (default: each event's model path)")
	loggedModel := fs.String("logged-model", "", "replay only events logged for this model `path`")
	shadow := fs.Bool("include-shadow", false, "also replay shadow executions (served=false)")
	limit := fs.Int("limit", 0, "replay at most `N` events (0: all)")
	tol := fs.Float64("tolerance", 1e-5, "largest absolute difference of an output value that counts as equal")
	asJSON := fs.Bool("json", false, "print the summary as one JSON object")
	threads := fs.Int("intra-op-threads", 1, "with --model: threads one forward call may use")
	maxModel := fs.Int64("max-model-bytes", servables.DefaultMaxModelBytes, "with --model: the most a TorchScript model's deflated zip entries may inflate to, as the server's max_model_bytes")
	var missing *float64
	fs.Func("missing-value", "with --model, an XGBoost model: the input `value` it takes as missing besides NaN (its entry's missing_value)", func(s string) error {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || !(math.Abs(v) <= math.MaxFloat32) {
			return fmt.Errorf("%q is not a finite number within float32's range", s)
		}
		missing = &v
		return nil
	})
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), replayUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "grove replay: unexpected argument %q\n", fs.Arg(0))
		return 2
	case (*model == "") == (*url == ""):
		fmt.Fprintln(stderr, "grove replay: give either --model PATH or --url URL")
		return 2
	case *target != "" && *url == "":
		fmt.Fprintln(stderr, "grove replay: --target-model needs --url")
		return 2
	case missing != nil && *url != "":
		fmt.Fprintln(stderr, "grove replay: --missing-value needs --model (the server's model entry has its own)")
		return 2
	case !(*tol >= 0):
		fmt.Fprintln(stderr, "grove replay: --tolerance must not be negative")
		return 2
	case *maxModel <= 0:
		fmt.Fprintln(stderr, "grove replay: --max-model-bytes must be positive")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var sc scorer
	var err error
	if *model != "" {
		sc, err = loadLocal(ctx, *model, servables.LoadOptions{IntraOpThreads: *threads, MissingValue: missing, MaxModelBytes: *maxModel})
	} else {
		sc, err = newRemote(ctx, *url, *target, src.timeout, &sc0)
	}
	if err != nil {
		fmt.Fprintf(stderr, "grove replay: %v\n", err)
		return 1
	}
	defer sc.close()

	sum := newSummary(*tol)
	err = src.read(ctx, true, false, stderr, func(ev *grovepb.PredictionEvent) (bool, error) {
		if (!ev.GetServed() && !*shadow) || !modelMatches(*loggedModel, ev.GetModelPath()) {
			return true, nil
		}
		if err := sum.replay(ctx, sc, ev); err != nil {
			return false, err
		}
		return *limit <= 0 || sum.Events < *limit, nil
	})
	if err == nil && ctx.Err() != nil {
		err = errors.New("interrupted")
	}
	if err != nil {
		fmt.Fprintf(stderr, "grove replay: %v\n", err)
		return 1
	}
	sum.finish()
	if *asJSON {
		b, _ := json.Marshal(sum)
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		sum.print(stdout, src.topic, sc.name())
	}
	return 0
}

// values is one output tensor widened to float64, for comparison; a BYTES
// tensor's elements are in strs instead (v is then zeros of the same count),
// and compare equal or not at all.
type values struct {
	shape []int64
	v     []float64
	strs  []string
}

func fromTensors(ts []servables.Tensor) []values {
	out := make([]values, len(ts))
	for i, t := range ts {
		if t.DType == servables.Bytes {
			strs, _ := t.Strings() // TensorsFromProto and Predict give valid tensors
			out[i] = values{shape: t.Shape, v: make([]float64, len(strs)), strs: strs}
			continue
		}
		out[i] = values{shape: t.Shape, v: make([]float64, t.Len())}
		for j := range out[i].v {
			out[i].v[j] = t.Float64At(j)
		}
	}
	return out
}

// scorer is the challenger: it answers one logged request.
type scorer interface {
	// score returns the challenger's outputs for ev's inputs. A returned
	// error of type *scoreError is the challenger's answer (counted and
	// skipped); any other error stops the replay.
	score(ctx context.Context, ev *grovepb.PredictionEvent, inputs []servables.Tensor) ([]values, error)
	name() string
	close()
}

// scoreError is a challenger's failure on one event.
type scoreError struct{ msg string }

func (e *scoreError) Error() string { return e.msg }

// local is a model loaded in this process.
type local struct {
	path string
	rt   string
	s    servables.Servable
}

// loadLocal loads the model file or directory at path with the first
// runtime of this build that accepts its files.
func loadLocal(ctx context.Context, path string, opts servables.LoadOptions) (*local, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("--model: %w", err)
	}
	dir, files := filepath.Dir(path), []string{filepath.Base(path)}
	if fi.IsDir() {
		dir, files = path, nil
		err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			rel, err := filepath.Rel(path, p)
			files = append(files, filepath.ToSlash(rel))
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("--model: %w", err)
		}
		slices.Sort(files)
	}
	rt, err := runtimesOf(runtimes.Libraries{}).Find(os.DirFS(dir), files) // the libraries from $GROVE_TORCH_LIB, $GROVE_ONNXRUNTIME_LIB or .cache
	if err != nil {
		return nil, fmt.Errorf("--model %s: %w", path, err)
	}
	s, err := rt.Load(ctx, dir, files, opts)
	if err != nil {
		return nil, fmt.Errorf("--model %s: %w", path, err)
	}
	return &local{path: path, rt: rt.Name(), s: s}, nil
}

func (l *local) name() string { return fmt.Sprintf("%s (in-process, %s)", l.path, l.rt) }
func (l *local) close()       { _ = l.s.Close() }

// positionalAPIs are the protocols whose requests reach a model whose
// runtime takes inputs by position unnamed (actors.Request.Positional: the
// B&A API, as the sidecar does for PyTorch, and ForestFlow's schema
// entries): their logged names are not the model's input names.
var positionalAPIs = map[string]bool{"ba": true, "ba-grpc": true, "forestflow": true}

func (l *local) score(ctx context.Context, ev *grovepb.PredictionEvent, inputs []servables.Tensor) ([]values, error) {
	if positionalAPIs[ev.GetApi()] && l.s.Metadata().ByPosition {
		unnamed := make([]servables.Tensor, len(inputs))
		for i, t := range inputs {
			t.Name = ""
			unnamed[i] = t
		}
		inputs = unnamed
	}
	out, err := l.s.Predict(ctx, inputs)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &scoreError{err.Error()}
	}
	return fromTensors(out), nil
}

// remote is a running Grove, asked over its B&A API.
type remote struct {
	url, target string
	shown       string // url with any password masked, for messages
	hc          *http.Client
	client      *serverClient
}

// newRemote checks that a Grove answers at url and returns it as a scorer.
func newRemote(ctx context.Context, rawURL, target string, timeout time.Duration, client *serverClient) (*remote, error) {
	u, err := url.Parse(strings.TrimSuffix(rawURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("--url: give an http:// or https:// URL with a host, such as http://127.0.0.1:8080")
	}
	hc, err := client.httpClient(60 * time.Second)
	if err != nil {
		return nil, err
	}
	r := &remote{url: u.String(), shown: u.Redacted(), target: target, hc: hc, client: client}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url+"/v1/models", nil)
	if err != nil {
		return nil, fmt.Errorf("--url: %w", err)
	}
	client.authorize(req)
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("--url: no Grove answers at %s: %w", r.shown, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("--url: %s/v1/models answered %s", r.shown, resp.Status)
	}
	return r, nil
}

func (r *remote) name() string {
	if r.target != "" {
		return r.target + " at " + r.shown
	}
	return "each event's model at " + r.shown
}

func (r *remote) close() { r.hc.CloseIdleConnections() }

func (r *remote) score(ctx context.Context, ev *grovepb.PredictionEvent, inputs []servables.Tensor) ([]values, error) {
	path := r.target
	if path == "" {
		path = ev.GetModelPath()
	}
	for _, t := range inputs {
		if t.DType == servables.Bytes {
			return nil, &scoreError{"input " + strconv.Quote(t.Name) + " is BYTES, which the B&A API (--url) cannot send; replay it with --model"}
		}
	}
	body := appendBARequest(nil, path, inputs, ev.GetConfigs())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url+"/v1/inference", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	r.client.authorize(req)
	if id := ev.GetRequestId(); id != "" && len(id) <= 120 {
		req.Header.Set("X-Request-Id", "replay-"+id)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("--url: %w", err)
	}
	defer resp.Body.Close()
	var out struct {
		Response []struct {
			Tensors []struct {
				TensorShape   []int64       `json:"tensor_shape"`
				TensorContent []json.Number `json:"tensor_content"`
			} `json:"tensors"`
			Error *struct {
				ErrorType   string `json:"error_type"`
				Description string `json:"description"`
			} `json:"error"`
		} `json:"response"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<30)).Decode(&out); err != nil {
		return nil, fmt.Errorf("--url: decoding the answer (HTTP %d): %w", resp.StatusCode, err)
	}
	if len(out.Response) != 1 {
		return nil, fmt.Errorf("--url: %d items in the answer to one request (HTTP %d)", len(out.Response), resp.StatusCode)
	}
	item := out.Response[0]
	if item.Error != nil {
		return nil, &scoreError{item.Error.ErrorType + ": " + item.Error.Description}
	}
	vs := make([]values, len(item.Tensors))
	for i, t := range item.Tensors {
		vs[i] = values{shape: t.TensorShape, v: make([]float64, len(t.TensorContent))}
		for j, n := range t.TensorContent {
			if vs[i].v[j], err = strconv.ParseFloat(string(n), 64); err != nil {
				return nil, fmt.Errorf("--url: output %d value %d: %w", i, j, err)
			}
		}
	}
	return vs, nil
}

// appendBARequest appends a B&A batch request of one item: inputs for the
// model at path, with configs as the batch's configs.
func appendBARequest(dst []byte, path string, inputs []servables.Tensor, configs map[string]string) []byte {
	str := func(s string) { b, _ := json.Marshal(s); dst = append(dst, b...) }
	dst = append(dst, '{')
	if len(configs) > 0 {
		b, _ := json.Marshal(configs)
		dst = append(append(append(dst, `"configs":`...), b...), ',')
	}
	dst = append(dst, `"request":[{"model_path":`...)
	str(path)
	dst = append(dst, `,"tensors":[`...)
	for i, t := range inputs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '{')
		if t.Name != "" {
			dst = append(dst, `"tensor_name":`...)
			str(t.Name)
			dst = append(dst, ',')
		}
		dst = append(dst, `"data_type":`...)
		str(t.DType.String())
		dst = append(dst, `,"tensor_shape":[`...)
		for j, d := range t.Shape {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendInt(dst, d, 10)
		}
		dst = append(dst, `],"tensor_content":[`...)
		for j := range t.Len() {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '"')
			switch t.DType {
			case servables.Float32:
				dst = strconv.AppendFloat(dst, float64(t.Float32s()[j]), 'g', -1, 32)
			case servables.Float64:
				dst = strconv.AppendFloat(dst, t.Float64s()[j], 'g', -1, 64)
			case servables.Int64: // every digit: a float64 holds 53 bits
				dst = strconv.AppendInt(dst, t.Int64s()[j], 10)
			default:
				dst = strconv.AppendInt(dst, int64(t.Float64At(j)), 10)
			}
			dst = append(dst, '"')
		}
		dst = append(dst, "]}"...)
	}
	return append(dst, "]}]}"...)
}

// The reasons an event is skipped, as in the summary.
const (
	skipLoggedError    = "logged_error"
	skipMissingInputs  = "missing_inputs"
	skipMissingOutputs = "missing_outputs"
	skipBadTensors     = "bad_logged_tensors"
	skipNewError       = "new_error"
	skipShapeMismatch  = "shape_mismatch"
)

var skipReasons = []string{skipLoggedError, skipMissingOutputs, skipShapeMismatch, skipMissingInputs, skipBadTensors, skipNewError}

// summary is the outcome of a replay (its JSON form is what --json prints).
type summary struct {
	// Events is the number of events replayed (compared or skipped).
	Events int `json:"events"`
	// Compared is the number of events whose new outputs were compared.
	Compared int `json:"compared"`
	// Skipped is the number of events not compared, and SkippedBy by reason.
	Skipped   int            `json:"skipped"`
	SkippedBy map[string]int `json:"skipped_by_reason"`
	// Values is the number of output values compared.
	Values int `json:"values_compared"`
	// MeanAbsDiff and MaxAbsDiff are over all values compared; a value
	// that is NaN on one side only counts as an infinite difference
	// (written "+Inf").
	MeanAbsDiff jsonFloat `json:"mean_abs_diff"`
	MaxAbsDiff  jsonFloat `json:"max_abs_diff"`
	// Tolerance is --tolerance; Within counts the compared events whose
	// every value is within it, WithinShare is Within / Compared (0 when
	// nothing was compared).
	Tolerance   float64 `json:"tolerance"`
	Within      int     `json:"within_tolerance"`
	WithinShare float64 `json:"within_tolerance_share"`
	// FirstNewError is the challenger's first failure, to tell why.
	FirstNewError string `json:"first_new_error,omitempty"`

	sumDiff float64
}

// jsonFloat is a float64 that writes non-finite values as strings.
type jsonFloat float64

func (f jsonFloat) MarshalJSON() ([]byte, error) {
	if math.IsInf(float64(f), 0) || math.IsNaN(float64(f)) {
		return json.Marshal(strconv.FormatFloat(float64(f), 'g', -1, 64))
	}
	return json.Marshal(float64(f))
}

func newSummary(tol float64) *summary {
	s := &summary{Tolerance: tol, SkippedBy: make(map[string]int)}
	for _, r := range skipReasons {
		s.SkippedBy[r] = 0
	}
	return s
}

func (s *summary) skip(reason string) {
	s.Skipped++
	s.SkippedBy[reason]++
}

// replay scores one event with sc and adds the comparison to s.
func (s *summary) replay(ctx context.Context, sc scorer, ev *grovepb.PredictionEvent) error {
	s.Events++
	switch {
	case ev.GetError() != nil:
		s.skip(skipLoggedError)
		return nil
	case len(ev.GetOutputs()) == 0:
		s.skip(skipMissingOutputs)
		return nil
	case len(ev.GetInputs()) == 0:
		s.skip(skipMissingInputs)
		return nil
	}
	inputs, err := logging.TensorsFromProto(ev.GetInputs())
	if err != nil {
		s.skip(skipBadTensors)
		return nil
	}
	loggedT, err := logging.TensorsFromProto(ev.GetOutputs())
	if err != nil {
		s.skip(skipBadTensors)
		return nil
	}
	logged := fromTensors(loggedT)
	got, err := sc.score(ctx, ev, inputs)
	var se *scoreError
	if errors.As(err, &se) {
		s.skip(skipNewError)
		if s.FirstNewError == "" {
			s.FirstNewError = se.msg
		}
		return nil
	}
	if err != nil {
		return err
	}
	if len(got) != len(logged) {
		s.skip(skipShapeMismatch)
		return nil
	}
	for i := range got {
		if !slices.Equal(got[i].shape, logged[i].shape) || len(got[i].v) != len(logged[i].v) || (got[i].strs == nil) != (logged[i].strs == nil) {
			s.skip(skipShapeMismatch)
			return nil
		}
	}
	s.Compared++
	within := true
	for i := range got {
		for j, a := range got[i].v {
			b := logged[i].v[j]
			d := math.Abs(a - b)
			switch {
			case got[i].strs != nil && got[i].strs[j] != logged[i].strs[j]:
				d = math.Inf(1) // BYTES elements are equal or not
			case math.IsNaN(a) && math.IsNaN(b):
				d = 0
			case math.IsNaN(d):
				d = math.Inf(1)
			}
			s.Values++
			s.sumDiff += d
			if d > float64(s.MaxAbsDiff) {
				s.MaxAbsDiff = jsonFloat(d)
			}
			if d > s.Tolerance {
				within = false
			}
		}
	}
	if within {
		s.Within++
	}
	return nil
}

func (s *summary) finish() {
	if s.Values > 0 {
		s.MeanAbsDiff = jsonFloat(s.sumDiff / float64(s.Values))
	}
	if s.Compared > 0 {
		s.WithinShare = float64(s.Within) / float64(s.Compared)
	}
}

func (s *summary) print(w io.Writer, topic, challenger string) {
	fmt.Fprintf(w, "replayed %d logged events of topic %s with %s\n", s.Events, topic, challenger)
	fmt.Fprintf(w, "compared                %d\n", s.Compared)
	fmt.Fprintf(w, "skipped                 %d\n", s.Skipped)
	for _, r := range skipReasons {
		if n := s.SkippedBy[r]; n > 0 || r == skipLoggedError || r == skipMissingOutputs || r == skipShapeMismatch {
			fmt.Fprintf(w, "  %-21s %d\n", strings.ReplaceAll(r, "_", " "), n)
		}
	}
	if s.FirstNewError != "" {
		fmt.Fprintf(w, "  first new error: %s\n", s.FirstNewError)
	}
	fmt.Fprintf(w, "output values compared  %d\n", s.Values)
	fmt.Fprintf(w, "mean abs difference     %.6g\n", float64(s.MeanAbsDiff))
	fmt.Fprintf(w, "max abs difference      %.6g\n", float64(s.MaxAbsDiff))
	fmt.Fprintf(w, "%-24s%d of %d events (%.2f%%)\n", fmt.Sprintf("within tolerance %g", s.Tolerance), s.Within, s.Compared, 100*s.WithinShare)
}
