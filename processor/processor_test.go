package processor

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/api/deeprec/deeprecpb"
	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/servables"
)

// The models and requests of processor/testdata/deeprec (make.py).
const data = "testdata/deeprec"

// modelDir copies version 1 of kind into a new directory of versions
// and returns the directory.
func modelDir(t *testing.T, kind, file string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), kind)
	if err := os.MkdirAll(filepath.Join(dir, "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(data, kind, "1", file))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "1", file), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func start(t *testing.T, config string) *Processor {
	t.Helper()
	p, err := New(context.Background(), "", []byte(config), Options{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(context.Background()) })
	return p
}

// expected reads an expected_*.txt file: output name -> values.
func expected(t *testing.T, name string) map[string][]float32 {
	t.Helper()
	f, err := os.Open(filepath.Join(data, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]float32{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		for _, v := range fields[2:] {
			x, err := strconv.ParseFloat(v, 32)
			if err != nil {
				t.Fatal(err)
			}
			out[fields[0]] = append(out[fields[0]], float32(x))
		}
	}
	return out
}

// predict sends the request file req and checks the answer against want
// (Python's values, to 1e-5).
func predict(t *testing.T, p *Processor, req string, want map[string][]float32) {
	t.Helper()
	answeredBy(t, p, req, want)
}

func TestProcessorONNX(t *testing.T) {
	dir := modelDir(t, "onnx", "model.onnx")
	p := start(t, fmt.Sprintf(`{"checkpoint_dir": %q, "session_num": 2, "select_session_policy": "RR"}`, dir))
	predict(t, p, "req_b1.bin", expected(t, "expected_onnx_v1_b1.txt"))
	predict(t, p, "req_b64.bin", expected(t, "expected_onnx_v1_b64.txt"))
	predict(t, p, "req_b1_y.bin", map[string][]float32{"y": expected(t, "expected_onnx_v1_b1.txt")["y"]})

	sig, status := p.Process(context.Background(), 1, nil)
	if status != StatusOK || !strings.Contains(string(sig), `"name": "y"`) {
		t.Fatalf("signature: %d %s", status, sig)
	}
	out, status := p.ServingModelInfo()
	var info deeprecpb.ServingModelInfo
	if err := proto.Unmarshal(out, &info); status != StatusOK || err != nil {
		t.Fatalf("serving model info: %d %s %v", status, out, err)
	}
	if info.GetVersion() != "1" || info.GetModelPath() != dir+"/1/" || len(info.GetChecksum()) != 64 {
		t.Fatalf("serving model info: %+v", &info)
	}
	for _, bad := range []string{"", "\xff\xff", "\x0a\x03abc"} {
		out, status := p.Process(context.Background(), 1, []byte(bad+"x"))
		if status != StatusError || len(out) == 0 {
			t.Fatalf("Process(%q) = %d %s, want 500 with a reason", bad, status, out)
		}
	}
}

// The warm-up file teaches a TorchScript model its signature (its runtime
// records no datatypes); without it there is no request of ones to run.
func TestProcessorTorchWarmUpFile(t *testing.T) {
	dir := modelDir(t, "torch", "model.pt")
	abs, err := filepath.Abs(data)
	if err != nil {
		t.Fatal(err)
	}
	p := start(t, fmt.Sprintf(`{"savedmodel_dir": %q, "warmup_file_name": %q, "session_num": 3}`, dir, abs+"/warm_up.bin"))
	sig, _ := p.Process(context.Background(), 1, nil)
	if !strings.Contains(string(sig), `"shape": [-1, 4],"type": "DT_FLOAT"`) {
		t.Fatalf("signature after the warm-up: %s", sig)
	}
	predict(t, p, "req_b64.bin", expected(t, "expected_torch_v1_b64.txt"))

	bare := start(t, fmt.Sprintf(`{"savedmodel_dir": %q}`, modelDir(t, "torch", "model.pt")))
	if sig, _ := bare.Process(context.Background(), 1, nil); strings.Contains(string(sig), "DT_FLOAT") {
		t.Fatalf("signature without a warm-up: %s", sig)
	}
}

func TestNewFails(t *testing.T) {
	onnxDir := modelDir(t, "onnx", "model.onnx")
	empty := t.TempDir()
	for _, tc := range []struct{ config, want string }{
		{fmt.Sprintf(`{"checkpoint_dir": %q, "warmup_file_name": "/no/such/warm_up.bin"}`, onnxDir), "warmup_file_name: open /no/such/warm_up.bin"},
		{fmt.Sprintf(`{"checkpoint_dir": %q, "warmup_file_name": %q}`, onnxDir, filepath.Join(onnxDir, "1", "model.onnx")), "not a serialized tensorflow.eas.PredictRequest"},
		{fmt.Sprintf(`{"checkpoint_dir": %q}`, filepath.Join(empty, "missing")), "no model served within init_timeout_minutes"},
		{`{"savedmodel_dir": "gs://no-such-bucket/m/"}`, `model_store_type is local`},
	} {
		cfg := tc.config
		if strings.Contains(tc.want, "init_timeout") {
			// One minute is the shortest timeout the config takes; the
			// context given to New ends the wait sooner.
			ctx, cancel := context.WithTimeout(context.Background(), 0)
			_, err := New(ctx, "", []byte(cfg), Options{CacheDir: t.TempDir()})
			cancel()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New(%s) = %v, want %q", cfg, err, tc.want)
			}
			continue
		}
		_, err := New(context.Background(), "", []byte(cfg), Options{CacheDir: t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%s) = %v, want %q", cfg, err, tc.want)
		}
	}
}

func TestReplicaPolicies(t *testing.T) {
	mod := &Processor{cfg: Config{Replicas: 3, Policy: PolicyMOD}}
	var got []int
	for _, caller := range []int64{700, 9, 700, 42, 5, 9, 13} {
		got = append(got, mod.replica(caller))
	}
	if want := []int{1, 2, 1, 3, 1, 2, 2}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("MOD replicas %v, want %v (callers numbered as they first call)", got, want)
	}
	rr := &Processor{cfg: Config{Replicas: 3, Policy: PolicyRR}}
	got = got[:0]
	for range 5 {
		got = append(got, rr.replica(1))
	}
	if want := []int{1, 2, 3, 1, 2}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("RR replicas %v, want %v", got, want)
	}
	if one := (&Processor{cfg: Config{Replicas: 1, Policy: PolicyRR}}); one.replica(1) != 0 {
		t.Fatal("one replica: the choice is Grove's")
	}

	// A host making a thread per call: the callers remembered stay bounded,
	// and a caller keeps its replica while it is remembered.
	for caller := range int64(3*maxThreads + 5) {
		if a, b := mod.replica(caller+1000), mod.replica(caller+1000); a != b || a < 1 || a > 3 {
			t.Fatalf("caller %d: replicas %d then %d", caller, a, b)
		}
	}
	n := 0
	mod.threads.Load().m.Range(func(any, any) bool { n++; return true })
	if n > maxThreads {
		t.Fatalf("%d callers remembered, more than %d", n, maxThreads)
	}
}

func TestOnes(t *testing.T) {
	sig := servables.Metadata{Inputs: []servables.TensorSpec{
		{Name: "x", DType: servables.Float32, Shape: []int64{-1, 4}},
		{Name: "i", DType: servables.Int64, Shape: []int64{-1}},
		{Name: "h", DType: servables.Float16, Shape: []int64{2}},
	}}
	in, ok := Ones(sig)
	if !ok || len(in) != 3 || fmt.Sprint(in[0].Shape) != "[1 4]" || fmt.Sprint(in[0].Float32s()) != "[1 1 1 1]" ||
		fmt.Sprint(in[1].Int64s()) != "[1]" || in[2].HalfAt(1) != 1 {
		t.Fatalf("Ones = %v %v", in, ok)
	}
	for _, bad := range []servables.TensorSpec{
		{Name: "s", DType: servables.Bytes, Shape: []int64{-1}},
		{Name: "u", Shape: []int64{-1}},
		{Name: "n", DType: servables.Float32},
	} {
		if _, ok := Ones(servables.Metadata{Inputs: []servables.TensorSpec{bad}}); ok {
			t.Errorf("Ones(%v) ok, want no request of ones", bad)
		}
	}
	if _, ok := Ones(servables.Metadata{}); ok {
		t.Error("Ones of no inputs ok")
	}
}

// A model that does not load fails New with its runtime's reason and its
// file's path in the model directory, not in the model cache (New's
// caller is told what the log says, without the server's paths).
func TestNewFailsNamingTheModelFileNotItsCachedCopy(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "onnx")
	if err := os.MkdirAll(filepath.Join(dir, "2"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "2", "model.onnx"), []byte("not an ONNX model"), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	_, err := New(context.Background(), "", []byte(fmt.Sprintf(`{"checkpoint_dir": %q}`, dir)), Options{CacheDir: cache})
	if err == nil || !strings.Contains(err.Error(), "2/model.onnx: not a valid ONNX model") || strings.Contains(err.Error(), cache) {
		t.Fatalf("New with a corrupt model = %v, want its reason naming 2/model.onnx and not the cache %s", err, cache)
	}
}

// A warm-up file larger than its limit (the model config's) fails the
// version's warm-up with an error that names the file and the limit once,
// without reading it whole.
func TestWarmUpFileLargerThanItsLimitIsAnErrorNamingIt(t *testing.T) {
	f := filepath.Join(t.TempDir(), "warmup.bin")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(f, maxWarmUpBytes+1); err != nil {
		t.Fatal(err)
	}
	p := &Processor{cfg: Config{WarmUpFile: f}}
	_, err := p.warmUp(modelconfig.Model{}, servables.Metadata{})
	if want := "warmup_file_name: " + f + " is larger than its limit of 64 MiB"; err == nil || err.Error() != want {
		t.Fatalf("warm-up: %v, want %q", err, want)
	}
}
