// Command grovebench measures a freshly built grove binary against the
// FastAPI + uvicorn baseline of ../shared/bench, side by side on the same
// machine with the same built-in load generator, and prints one markdown
// comparison table. It also measures what the prediction log costs: a
// second grove ("grove+log FULL") logs every prediction to an embedded
// Kafka broker, and its rows are compared with plain grove's (which has no
// prediction log, i.e. level NONE). The "grove-grpc" rows drive plain
// grove's OIP gRPC service (ModelInfer, input in raw_input_contents), each
// client on its own connection; "grove-onnx" rows send the same requests to
// the ONNX Runtime copy of the model (pctr_onnx/) on plain grove; and
// "grove-nobatch" is another grove with --max-batch-rows 1, compared with
// plain grove at b1c64 for what dynamic batching gains, on pctr and
// ("grove-deep", "grove-deep-nobatch") on examples/bench/rank_deep, a model
// whose forward costs more than the request carrying it. "grove-nethttp"
// is another grove like the plain one, --grove-args and all, with
// --http-engine net/http: the same REST routes on Go's net/http server
// instead of the default's (http_engine auto: Grove's own HTTP/1.1 server,
// h1, on a plaintext listener such as grovebench's), so the report shows
// what h1 saves (by default at b1c1 and b1c32). "floor" and
// "floor-grpc" are the transport floor (floor.go): grovebench's own child
// answering with a fixed answer and no model over net/http and grpc-go, what
// loopback, the stack and the load generator cost before grove does any
// work. HTTP load comes from a raw keep-alive HTTP/1.1 client
// (rawhttp.go), the same for every server, and gRPC load from a raw HTTP/2
// client (rawgrpc.go; --grpc-client grpc-go uses grpc-go's client). Last, the shadow scenario (see
// shadow.go) measures the requirement "under a saturating shadow load,
// user-request p99 stays within 1.5x of the no-shadow p99" on a third grove
// whose contracts put a user stream and shadow copies on the same model
// actor. "grove-tls" (row "grove TLS+token", by default at b1c32) is a
// grove serving TLS on both listeners with a tokens file
// (--tls-cert, --tls-key, --auth-tokens-file; the certificate and a
// random token made in process), loaded over TLS with the token on every
// request; it is compared with plain grove (plaintext, no authentication)
// at the same shape ("TLS + token vs plaintext ...", the overview), and
// judged interleaved (below).
// "grove-local" and "grove-fwd" (cluster.go, by default at b1c1 and b1c32)
// are the two nodes of a loopback cluster on Debian's etcd: grove-local
// holds the models, grove-fwd holds none and forwards every request to it;
// the report gives the p50 forwarding adds at b1c1 against the grpc-go
// floor's p50 + 50 µs, and grove-fwd's b1c32 req/s against grove-local's.
// "grove+eval" (by default at b1c32) is grove+log plus --evaluate, with an
// outcomes rule on pctr_v1/, so its in-process evaluator joins every
// prediction it logs (evalab.go); after the scenarios it is measured
// against grove+log in interleaved rounds (--evaluate-ab-rounds) for what
// the evaluator costs. Last among them, with --cpu-ab-rounds (cpuab.go),
// the hot path's targets (issue 32) are measured interleaved too: grove
// against the net/http floor at b1c32 (req/s, and CPU per request from
// /proc), grove-tls and grove+log against grove there (req/s, each at
// least 0.90 of grove's, with the CPU per request of each: "TLS + token
// vs plain at batch 1, conc 32, interleaved ..." and "Prediction log
// FULL vs NONE at batch 1, conc 32, interleaved ..."),
// grove against direct and each protocol's overhead over its floor at
// b1c1, dynamic batching at b1c64 with the forward calls per request
// grove ran; and the overload scenario's target on its own grove
// (overload.go). The "evaluate" scenario (evaluate.go) measures
// grove evaluate alone: records (predictions + outcomes) joined per
// second and per CPU-second, over a stream produced beforehand to a Kafka
// broker in another process.
//
// Run it from anywhere inside the repository (make bench does):
//
//	go run ./cmd/grovebench [--duration 5s] [--scenarios b1c1,b1c8,b1c32,b64c8,grove-grpc/b1c1,grove-grpc/b1c32,grove-grpc/b64c8,grove+log/b1c32,grove-tls/b1c32,shadow] [--prediction-log=false] [--json out.json]
//
// and the shadow scenario alone with
//
//	go run ./cmd/grovebench --scenarios shadow [--forward=false] [--shadow-load b256c6] [--shadow-rounds 2] [--shadow-user-rate 0]
//
// What it does, in order:
//
//  1. builds grove (go build ./cmd/grove) into a temp dir and writes a temp
//     bucket holding examples/bucket/pctr_v1/model.pt and a model config
//     that lists only pctr_v1/;
//  2. runs BenchmarkForwardPCTR of ./servables/torch for the model's
//     in-process forward time at batch 1 and 64 (the floor no server beats);
//  3. starts grove serve on a free loopback port and waits for /readyz;
//     when there are grove+log scenarios (by default grove+log/b1c32),
//     starts a second grove serve with --kafka-embedded on another free
//     port and --prediction-log-level FULL (proto encoding); and, when
//     /usr/bin/python3 can import fastapi, uvicorn and torch, starts the
//     baseline on another free port (one torch thread) and waits for it;
//  4. checks one request against each server for the expected outputs of
//     examples/bucket/expected.json, reads from plain grove's /v1/status
//     the BLAS library its TorchScript models run on (the blas object: the
//     library and build, its threading, the threads a matrix product uses,
//     the files), which the report states above the table, then drives every scenario with a closed
//     loop of C keep-alive clients for a warm-up and a measured window (the
//     grove+log row of a shape right after plain grove's); after each
//     grove+log scenario it waits for the prediction log's buffer to empty,
//     so delivery does not spill into the next scenario; then the
//     interleaved A/Bs of the servers that ran (--forward-ab-rounds,
//     --evaluate-ab-rounds, --cpu-ab-rounds);
//  5. stops those servers and, when --scenarios has shadow entries (by
//     default "shadow", the user stream at batch 1, c 8), runs the shadow
//     scenario alone on the machine: a third grove serve on a bucket with
//     pctr_v1/, pctr_v2/, their copies pctr_v1_twin/ and pctr_v2_b/ and
//     four contracts; the user stream alone, with the load and no shadow,
//     with a saturating shadow load on its model, and with the same load
//     shadowing the twin (the control), for --shadow-rounds rounds;
//  6. when --scenarios has "swap" and "memory" (by default both), runs them
//     each on a grove of its own (lifecycle.go): hot swaps of pctr_v1/
//     under c 32 load, and grove's RSS over --memory-requests requests and
//     per extra loaded model; then "overload" (overload.go) and "churn"
//     (churn.go: --churn-updates in-place updates of pctr_v1/ and
//     pctr_onnx/ under load, by default 100, with updates per second,
//     failed requests, and RSS per update after --churn-warmup updates
//     beside Go's heap, metric series, open files and cache entries), and
//     "ondemand" (ondemand.go: cold starts of on-demand copies of the
//     pCTR TorchScript and ONNX models, warm p50/p99 with loads around
//     them, and the loads per second one node sustains);
//  7. when --scenarios has "evaluate" (by default it does), runs the
//     evaluate scenario alone (evaluate.go);
//  8. prints the table (stdout; progress goes to stderr), grove+log's
//     prediction log counts from GET /v1/status (delivered, dropped,
//     failed, buffered, against the requests sent to it), its req/s over
//     plain grove's ("Prediction log FULL vs NONE ...", the overview:
//     the target is judged on the interleaved rows), then the shadow
//     scenario's section (its table, the shadow vs no-shadow p99 ratio
//     against the 1.5x target, the control's ratio, the shadow load's
//     executions and drops, and where the time went), and optionally
//     writes the raw results as JSON ("shadow" holds the scenario).
//
// Every child process runs in its own process group and is stopped on exit,
// on errors and on Ctrl-C; on Linux the kernel also kills them should
// grovebench itself die. Temp dirs are removed unless --keep is given.
//
// Exit status: 0 on success; 1 if grove (any instance) could not be
// built or started, answered a check request wrongly, or failed any
// benchmark request (the shadow and churn scenarios' loads included), or if the run
// was interrupted; 2 for bad flags. A ratio above a target is reported,
// not an error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// modelPath is the benchmark model's path in the bucket and in requests.
const modelPath = "pctr_v1/"

// options are grovebench's flags.
type options struct {
	root             string
	baselineDir      string
	python           string
	goBin            string
	duration         time.Duration
	warmup           time.Duration
	timeout          time.Duration
	startTimeout     time.Duration
	scenarios        []scenario
	jsonPath         string
	forward          bool
	forwardBenchtime string
	forwardTimeout   time.Duration
	groveArgs        []string
	// groveWrapper is the command every grove runs under (--grove-wrapper).
	groveWrapper []string
	predLog      bool
	predLogArgs  []string
	keep         bool
	// grpcGo drives the gRPC scenarios with grpc-go's client instead of
	// rawGRPCClient.
	grpcGo bool
	// forwardABRounds is the rounds of the interleaved forwarding A/B
	// (runForwardAB); 0 skips it.
	forwardABRounds int
	// The shadow scenario: the user stream's shapes (none: not run), the
	// shadow load's shape and the rounds of the two phases.
	shadowUsers    []shape
	shadowUserRate float64
	shadowLoad     shape
	shadowRounds   int
	// The lifecycle scenarios (lifecycle.go).
	swap, memory, overload, churn bool
	// ondemand runs the ondemand scenario (ondemand.go).
	ondemand               bool
	memRequests, memWarmup int64
	memCopies              int
	// The churn scenario (churn.go): updates, those left out of its fits,
	// clients per model.
	churnUpdates, churnWarmup, churnConc int
	churnRuntimes                        map[string]bool
	// The evaluate scenario (evaluate.go): whether it runs, and its
	// stream's requests.
	evaluate     bool
	evalRequests int
	// evalABRounds is the rounds of the interleaved grove+log vs
	// grove+eval A/B (runEvalAB); 0 skips it.
	evalABRounds int
	// onDemandABRounds is the rounds of the ondemand scenario's
	// interleaved A/Bs of warm latency alone and with churn.
	onDemandABRounds int
	// cpuABRounds is the rounds of issue 32's interleaved A/Bs (runCPUAB,
	// and runOverloadAB on the overload scenario's grove); 0 skips them.
	cpuABRounds int
}

func main() {
	if spec := os.Getenv(floorEnv); spec != "" { // grovebench's own floor server child
		fmt.Fprintln(os.Stderr, "grovebench floor server:", serveFloor(spec))
		os.Exit(1)
	}
	if spec := os.Getenv(floorProxyEnv); spec != "" { // grovebench's own forwarding floor child
		fmt.Fprintln(os.Stderr, "grovebench forwarding floor:", serveFloorProxy(spec))
		os.Exit(1)
	}
	if spec := os.Getenv(kafkaEnv); spec != "" { // grovebench's own Kafka broker child
		fmt.Fprintln(os.Stderr, "grovebench Kafka broker:", serveKafka(spec))
		os.Exit(1)
	}
	if spec := os.Getenv(burnerEnv); spec != "" { // grovebench's own CPU burner child
		fmt.Fprintln(os.Stderr, "grovebench CPU burner:", serveBurner(spec))
		os.Exit(1)
	}
	if spec := os.Getenv(directEnv); spec != "" { // grovebench's own direct server child
		fmt.Fprintln(os.Stderr, "grovebench direct server:", serveDirect(spec))
		os.Exit(1)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// parseFlags parses the command line into options.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("grovebench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.root, "root", "", "repository root (default: the directory of `go env GOMOD`)")
	fs.StringVar(&o.baselineDir, "baseline-dir", "", "directory holding fastapi_baseline.py (default: <root>/../shared/bench)")
	fs.StringVar(&o.python, "python", "/usr/bin/python3", "python interpreter for the baseline")
	fs.StringVar(&o.goBin, "go", "go", "go command used to build grove and run the forward benchmark")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "measured time per scenario")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "warm-up per scenario before measuring (not counted)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "per-request timeout")
	fs.DurationVar(&o.startTimeout, "start-timeout", 90*time.Second, "how long a server may take to become ready")
	spec := fs.String("scenarios", defaultSpec()+","+serverShadow+","+scenarioSwap+","+scenarioMemory+","+scenarioOverload+","+scenarioChurn+","+scenarioOnDemand+","+scenarioEvaluate,
		"comma-separated scenarios: bNcM (batch N, concurrency M, grove and the baseline), grove/bNcM, baseline/bNcM, "+
			"grove+log/bNcM (grove logging every prediction to an embedded Kafka broker), "+
			"grove+eval/bNcM (grove+log with the evaluator in-process, --evaluate, and an outcomes rule on the model), "+
			"grove-grpc/bNcM (OIP gRPC ModelInfer with raw_input_contents on plain grove), grove-onnx/bNcM (the ONNX copy of the model), "+
			"grove-nobatch/bNcM (a grove with --max-batch-rows 1), "+
			"grove-nethttp/bNcM (a grove with --http-engine net/http: REST /v1/inference on Go's net/http server instead of the default's h1 on plaintext), "+
			"grove-tls/bNcM (a grove serving TLS with a tokens file, loaded over TLS with a bearer token), "+
			"or one of those servers alone for its default scenarios; "+
			"evaluate: grove evaluate joining a pre-produced stream of predictions and outcomes (--evaluate-requests); "+
			"ondemand: cold starts of on-demand models, warm latency with loads around it, loads per second; "+
			"shadow/bNcM: user-request latency at that shape on a model that also runs a saturating shadow load, against none "+
			"(shadow alone: "+defaultShadowUser.String()+")")
	fs.StringVar(&o.jsonPath, "json", "", "also write the raw results (with every latency) to this JSON file")
	fs.BoolVar(&o.forward, "forward", true, "run BenchmarkForwardPCTR for the in-process forward time")
	fs.StringVar(&o.forwardBenchtime, "forward-benchtime", "2000x", "-benchtime for BenchmarkForwardPCTR")
	fs.DurationVar(&o.forwardTimeout, "forward-timeout", 10*time.Minute, "time limit for building and running BenchmarkForwardPCTR")
	groveArgs := fs.String("grove-args", "", "extra arguments for grove serve (every grove instance; grove-nethttp gets --http-engine net/http after them), space-separated")
	fs.BoolVar(&o.predLog, "prediction-log", true,
		"run the grove+log scenarios: a second grove with --kafka-embedded and --prediction-log-level FULL; false drops them")
	predLogArgs := fs.String("prediction-log-args", "",
		"extra arguments for grove+log's grove serve only, space-separated, after --grove-args (e.g. --kafka-encoding json); "+
			"the embedded broker and level FULL are always set")
	shadowOn := fs.Bool("shadow", true, "run the shadow scenarios of --scenarios (a third grove, started after the others stop); false drops them")
	shadowLoad := fs.String("shadow-load", defaultShadowLoad, "the shadow scenario's shadow load: bNcM, GraphPipe requests of N rows from M closed-loop clients")
	fs.IntVar(&o.shadowRounds, "shadow-rounds", defaultShadowRounds,
		"rounds of the shadow scenario's phases (the user stream alone, with the load, with the control load)")
	fs.Float64Var(&o.shadowUserRate, "shadow-user-rate", 0,
		"pace the shadow scenario's user stream to this many requests per second in all (latency from the scheduled start); 0: closed loop")
	fs.Int64Var(&o.memRequests, "memory-requests", 1_000_000, "requests of the memory scenario, after its warm-up")
	fs.Int64Var(&o.memWarmup, "memory-warmup", 50_000, "warm-up requests of the memory scenario")
	fs.IntVar(&o.forwardABRounds, "forward-ab-rounds", 8,
		"rounds of the interleaved forwarding A/B (grove-local, grove-fwd and floor-grpc at b1c1, "+forwardABWindow.String()+" each per round) after the scenarios, when all three ran; 0 skips it")
	fs.IntVar(&o.memCopies, "memory-copies", 8, "copies of each model kind the memory scenario adds to measure RSS per model")
	fs.IntVar(&o.churnUpdates, "churn-updates", 100,
		"in-place updates of the churn scenario, each of both its models (about one a second: the config is polled every second); 300 or more for a soak")
	fs.IntVar(&o.evalRequests, "evaluate-requests", 200_000,
		"requests of the evaluate scenario's stream, each a served and a shadow prediction, about a sixth with a click outcome")
	fs.IntVar(&o.evalABRounds, "evaluate-ab-rounds", 6,
		"rounds of the interleaved evaluator cost A/B (grove+log and grove+eval at b1c32, "+evalABWindow.String()+" each per round) after the scenarios, when both ran; 0 skips it")
	fs.IntVar(&o.onDemandABRounds, "ondemand-ab-rounds", 8,
		"rounds of the ondemand scenario's interleaved A/Bs (warm latency alone and with churn, "+onDemandABWindow.String()+" each per round), which its verdicts are judged on; 0 skips them")
	fs.IntVar(&o.cpuABRounds, "cpu-ab-rounds", 4,
		"rounds of the interleaved A/Bs of issue 32's targets after the scenarios, of the rows that ran: grove, grove-nethttp, grove+log, grove-tls and floor at b1c32 "+
			fmt.Sprintf("(req/s, CPU per request; grove-tls's and grove+log's req/s over grove's, targets ≥ %.2f and ≥ %.2f), ", tlsTarget, predLogTarget)+
			"grove, grove-nethttp, direct, grove-grpc, floor and floor-grpc at b1c1, grove-deep, grove-deep-nobatch, grove and grove-nobatch at b1c64 "+
			"("+cpuABWindow.String()+" each per round, "+cpuABC1Window.String()+" at b1c1); and, with the overload scenario, its closed loop and open loops at "+
			"2x and 1.5x the capacity ("+overloadABWindow.String()+" each per round); 0 skips them")
	fs.IntVar(&o.churnWarmup, "churn-warmup", 30, "updates of the churn scenario left out of its fit of RSS per update")
	fs.IntVar(&o.churnConc, "churn-conc", 4, "closed-loop clients on each of the churn scenario's two models")
	churnRuntimes := fs.String("churn-runtimes", churnTorch+","+churnONNX,
		"the runtimes whose model each update of the churn scenario replaces (both models serve the load either way)")
	grpcClient := fs.String("grpc-client", "raw",
		"load generator of the gRPC scenarios: raw (one HTTP/2 connection per client, read and written in the client's goroutine, like h2load) or grpc-go (grpc-go's client)")
	groveWrapper := fs.String("grove-wrapper", "",
		"a command every grove runs under, space-separated, given grove's path and arguments: it must exec grove (so that signals and /proc reach grove), "+
			"e.g. `env LD_PRELOAD=/usr/lib/heaptrack/libheaptrack_preload.so DUMP_HEAPTRACK_OUTPUT=FIFO` with heaptrack_interpret reading FIFO")
	fs.BoolVar(&o.keep, "keep", false, "keep the temp dir (grove binary, bucket, server logs) and print its path")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	switch *grpcClient {
	case "raw":
	case "grpc-go":
		o.grpcGo = true
	default:
		return o, fmt.Errorf("--grpc-client %q: want raw or grpc-go", *grpcClient)
	}
	if o.cpuABRounds < 0 || o.onDemandABRounds < 0 {
		return o, errors.New("--cpu-ab-rounds and --ondemand-ab-rounds must not be negative")
	}
	if o.duration <= 0 || o.warmup < 0 || o.timeout <= 0 {
		return o, errors.New("--duration and --timeout must be positive, --warmup not negative")
	}
	orest, ondemand := splitOnDemandSpec(*spec)
	o.ondemand = ondemand
	erest, evaluate := splitEvaluateSpec(orest)
	o.evaluate = evaluate
	if o.evalRequests < 1000 {
		return o, errEvalRequests
	}
	lrest, swap, memory, overload, churn := splitLifecycleSpec(erest)
	o.swap, o.memory, o.overload, o.churn = swap, memory, overload, churn
	// Scenarios that run alone, each on a process of its own.
	lifecycle := swap || memory || overload || churn || evaluate || ondemand
	if o.memRequests < 1 || o.memWarmup < 0 || o.memCopies < 1 {
		return o, errors.New("--memory-requests and --memory-copies must be positive, --memory-warmup not negative")
	}
	churnRT, err := parseChurnRuntimes(*churnRuntimes)
	if err != nil {
		return o, err
	}
	o.churnRuntimes = churnRT
	if o.churnWarmup < 0 || o.churnConc < 1 || o.churnUpdates < o.churnWarmup+3 {
		return o, errors.New("--churn-conc must be positive, --churn-warmup not negative, and --churn-updates at least --churn-warmup + 3 (the fit needs three updates)")
	}
	rest, users, err := splitShadowSpec(lrest)
	if err != nil {
		return o, err
	}
	if *shadowOn {
		o.shadowUsers = users
	}
	if o.shadowLoad, err = parseShape(*shadowLoad); err != nil {
		return o, fmt.Errorf("--shadow-load: %v", err)
	}
	if o.shadowRounds < 1 || o.shadowUserRate < 0 {
		return o, errors.New("--shadow-rounds must be at least 1 and --shadow-user-rate not negative")
	}
	// Only shadow or lifecycle entries: no other scenario to parse.
	if strings.Trim(rest, ", \t") != "" || (len(users) == 0 && !lifecycle) {
		if o.scenarios, err = parseScenarios(rest); err != nil {
			return o, err
		}
	}
	if !o.predLog {
		if o.scenarios = withoutServer(withoutServer(o.scenarios, serverGroveLog), serverGroveEval); len(o.scenarios) == 0 && len(o.shadowUsers) == 0 && !lifecycle {
			return o, fmt.Errorf("no scenarios in %q without --prediction-log", *spec)
		}
	}
	if len(o.scenarios) == 0 && len(o.shadowUsers) == 0 && !lifecycle {
		return o, fmt.Errorf("no scenarios in %q with --shadow=false", *spec)
	}
	o.groveArgs = strings.Fields(*groveArgs)
	o.groveWrapper = strings.Fields(*groveWrapper)
	o.predLogArgs = strings.Fields(*predLogArgs)
	return o, nil
}

// run is the whole benchmark; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "grovebench:", err)
		return 2
	}
	logf := func(format string, a ...any) { fmt.Fprintf(stderr, "grovebench: "+format+"\n", a...) }

	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	go func() {
		<-ctx.Done()
		// A second Ctrl-C kills grovebench outright; the children die with it (Pdeathsig).
		stopSignals()
	}()

	if o.root == "" {
		if o.root, err = findRoot(ctx, o.goBin); err != nil {
			logf("%v", err)
			return 1
		}
	}
	if o.baselineDir == "" {
		o.baselineDir = filepath.Join(o.root, "..", "shared", "bench")
	}
	expected := filepath.Join(o.root, "examples", "bucket", "expected.json")
	rows, want, err := loadExpected(expected)
	if err != nil {
		logf("%v", err)
		return 1
	}
	var want2 []float64
	if len(o.shadowUsers) > 0 {
		rows2, w2, err := loadExpectedModel(expected, strings.TrimSuffix(championPath, "/"))
		if err != nil || !slices.EqualFunc(rows, rows2, slices.Equal[[]float64]) {
			logf("%s: no %s entry with the inputs of %s (%v)", expected, championPath, modelPath, err)
			return 1
		}
		want2 = w2
	}

	tmp, err := os.MkdirTemp("", "grovebench-")
	if err != nil {
		logf("%v", err)
		return 1
	}
	if o.keep {
		defer logf("kept temp dir %s", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	var children []*child
	defer func() {
		for i := len(children) - 1; i >= 0; i-- {
			children[i].stop()
		}
	}()

	rep := &report{Start: time.Now(), Duration: o.duration.String(), Warmup: o.warmup.String(), Host: hostInfo()}
	bucket := filepath.Join(tmp, "bucket")
	if err := writeBucket(filepath.Join(o.root, "examples"), bucket); err != nil {
		logf("writing the bucket: %v", err)
		return 1
	}
	wantGrove, wantGroveLog, wantBaseline, wantNoBatch, wantNetHTTP := false, false, false, false, false
	wants := func(server string) bool {
		return slices.ContainsFunc(o.scenarios, func(s scenario) bool { return s.Server == server })
	}
	for _, s := range o.scenarios {
		wantGrove = wantGrove || s.Server == serverGrove || s.Server == serverGroveGRPC || s.Server == serverGroveONNX || s.Server == serverGroveDeep
		wantNoBatch = wantNoBatch || s.Server == serverGroveNoBatch || s.Server == serverGroveDeepNoBatch
		wantNetHTTP = wantNetHTTP || s.Server == serverGroveNetHTTP
		wantGroveLog = wantGroveLog || s.Server == serverGroveLog
		wantBaseline = wantBaseline || s.Server == serverBaseline
	}

	// 1. Build grove, failing fast: there is nothing to compare without it.
	groveBin := filepath.Join(tmp, "grove")
	if wantGrove || wantNoBatch || wantNetHTTP || wantGroveLog || wants(serverGroveEval) || wants(serverGroveTLS) || wants(serverGroveLocal) || wants(serverGroveFwd) || len(o.shadowUsers) > 0 || o.swap || o.memory || o.overload || o.churn || o.ondemand || o.evaluate {
		logf("building grove (%s build ./cmd/grove in %s)", o.goBin, o.root)
		if err := buildGrove(ctx, o.goBin, o.root, groveBin); err != nil {
			logf("FAILED to build grove: %v", err)
			return 1
		}
		if len(o.groveWrapper) > 0 {
			wrapped, err := writeGroveWrapper(tmp, o.groveWrapper, groveBin)
			if err != nil {
				logf("FAILED to write the grove wrapper: %v", err)
				return 1
			}
			logf("grove runs under %s", strings.Join(o.groveWrapper, " "))
			groveBin = wrapped
		}
	}

	// 2. In-process forward time, before any server runs.
	if o.forward {
		logf("running BenchmarkForwardPCTR (-benchtime %s) in ./servables/torch", o.forwardBenchtime)
		rep.Forward, rep.ForwardDeep = runForward(ctx, o.goBin, o.root, o.forwardBenchtime, o.forwardTimeout)
		if rep.Forward.Error != "" {
			logf("forward benchmark: %s", rep.Forward.Error)
		}
	} else {
		rep.Forward.Error = "skipped (--forward=false)"
		rep.ForwardDeep.Error = rep.Forward.Error
	}
	if ctx.Err() != nil {
		logf("interrupted")
		return 1
	}

	// 3. Start the servers and check one answer from each.
	targets := map[string]*endpoint{}
	if wantGrove {
		g, ep, err := startGrove(ctx, serverGrove, groveBin, bucket, filepath.Join(tmp, "cache"), filepath.Join(tmp, "grove.log"), o.groveArgs, o.startTimeout)
		if g != nil {
			children = append(children, g)
		}
		if err != nil {
			logf("FAILED to start grove: %v", err)
			return 1
		}
		logf("grove ready at %s", ep.baseURL)
		if err := checkAnswer(ctx, ep, rows, want, o.timeout); err != nil {
			logf("FAILED: grove answered the check request wrongly: %v", err)
			return 1
		}
		blas := fetchBLAS(ctx, ep.baseURL)
		rep.BLAS = &blas
		logf("%s", blas.line())
		targets[serverGrove] = ep
		if wants(serverGroveONNX) {
			oep := groveEndpointFor(serverGroveONNX, ep.baseURL)
			oep.pid = ep.pid
			oep.api = "POST /v1/inference (ONNX Runtime)"
			oep.body = func(row []float64, batch int) []byte { return groveBodyFor(onnxPath, repeat(row, batch)) }
			oep.rowsBody = func(rows [][]float64) []byte { return groveBodyFor(onnxPath, rows) }
			if err := checkAnswer(ctx, oep, rows, want, o.timeout); err != nil {
				logf("FAILED: grove answered the check request on %s wrongly: %v", onnxPath, err)
				return 1
			}
			targets[serverGroveONNX] = oep
		}
		if wants(serverGroveDeep) {
			dep, err := deepEndpoint(ctx, serverGroveDeep, ep.baseURL, o.root, o.timeout)
			if err != nil {
				logf("FAILED: grove on %s: %v", deepPath, err)
				return 1
			}
			dep.pid = ep.pid
			targets[serverGroveDeep] = dep
		}
		if wants(serverGroveGRPC) {
			gt, err := newGRPCTarget(ctx, ep.grpcAddr, rows, want, o.timeout)
			if err != nil {
				logf("FAILED: grove's gRPC service at %s: %v", ep.grpcAddr, err)
				return 1
			}
			targets[serverGroveGRPC] = &endpoint{server: serverGroveGRPC, api: "gRPC ModelInfer (OIP, raw_input_contents)",
				baseURL: ep.baseURL, url: "grpc://" + ep.grpcAddr, grpc: gt, pid: ep.pid}
		}
	}
	// startVariant starts a second grove, server, with args, and checks
	// one answer (what says how it differs); nil after logging a failure.
	startVariant := func(server, cacheDir string, args []string, what string) *endpoint {
		g, ep, err := startGrove(ctx, server, groveBin, bucket, filepath.Join(tmp, cacheDir), filepath.Join(tmp, server+".log"), args, o.startTimeout)
		if g != nil {
			children = append(children, g)
		}
		if err != nil {
			logf("FAILED to start %s (%s): %v", server, what, err)
			return nil
		}
		logf("%s ready at %s (%s)", server, ep.baseURL, what)
		if err := checkAnswer(ctx, ep, rows, want, o.timeout); err != nil {
			logf("FAILED: %s answered the check request wrongly: %v", server, err)
			return nil
		}
		return ep
	}
	if wantNetHTTP {
		ep := startVariant(serverGroveNetHTTP, "cache-nethttp", netHTTPArgs(o.groveArgs), "grove serve --http-engine net/http")
		if ep == nil {
			return 1
		}
		ep.api = netHTTPAPI
		targets[serverGroveNetHTTP] = ep
	}
	if wantNoBatch {
		ep := startVariant(serverGroveNoBatch, "cache-nobatch", append(append([]string{}, o.groveArgs...), "--max-batch-rows", "1"),
			"grove serve --max-batch-rows 1")
		if ep == nil {
			return 1
		}
		ep.api = "POST /v1/inference (--max-batch-rows 1)"
		targets[serverGroveNoBatch] = ep
		if wants(serverGroveDeepNoBatch) {
			dep, err := deepEndpoint(ctx, serverGroveDeepNoBatch, ep.baseURL, o.root, o.timeout)
			if err != nil {
				logf("FAILED: grove-nobatch on %s: %v", deepPath, err)
				return 1
			}
			dep.api += " (--max-batch-rows 1)"
			dep.pid = ep.pid
			targets[serverGroveDeepNoBatch] = dep
		}
	}
	// predLogSent counts the inference requests sent to grove+log, each of
	// which should become one prediction log event.
	predLogSent := 0
	if wantGroveLog {
		kafkaAddr, err := freeAddr()
		if err != nil {
			logf("FAILED to find a port for grove+log's Kafka broker: %v", err)
			return 1
		}
		plArgs := predLogArgs(kafkaAddr)
		rep.PredLog = &predLogReport{Args: append(append([]string{}, o.predLogArgs...), plArgs...)}
		extra := append(append(append([]string{}, o.groveArgs...), o.predLogArgs...), plArgs...)
		g, ep, err := startGrove(ctx, serverGroveLog, groveBin, bucket, filepath.Join(tmp, "cache-log"), filepath.Join(tmp, "grove-log.log"), extra, o.startTimeout)
		if g != nil {
			children = append(children, g)
		}
		if err != nil {
			logf("FAILED to start grove+log (grove serve %s): %v", strings.Join(plArgs, " "), err)
			return 1
		}
		logf("grove+log ready at %s (prediction log FULL to the embedded Kafka broker at %s)", ep.baseURL, kafkaAddr)
		predLogSent++
		if err := checkAnswer(ctx, ep, rows, want, o.timeout); err != nil {
			logf("FAILED: grove+log answered the check request wrongly: %v", err)
			return 1
		}
		if _, err := fetchPredLog(ctx, ep.baseURL); err != nil {
			logf("FAILED: grove+log: %v", err)
			return 1
		}
		targets[serverGroveLog] = ep
	}
	// evalKafka is grove+eval's embedded broker, evalSent the inference
	// requests sent to it.
	evalKafka, evalSent := "", 0
	if wants(serverGroveEval) {
		evalBucket := filepath.Join(tmp, "bucket-eval")
		if err := writeEvalBucket(bucket, evalBucket); err != nil {
			logf("FAILED to write grove+eval's bucket: %v", err)
			return 1
		}
		if evalKafka, err = freeAddr(); err != nil {
			logf("FAILED to find a port for grove+eval's Kafka broker: %v", err)
			return 1
		}
		extra := append(append(append(append([]string{}, o.groveArgs...), o.predLogArgs...), predLogArgs(evalKafka)...), evalArgs()...)
		g, ep, err := startGrove(ctx, serverGroveEval, groveBin, evalBucket, filepath.Join(tmp, "cache-eval"), filepath.Join(tmp, "grove-eval.log"), extra, o.startTimeout)
		if g != nil {
			children = append(children, g)
		}
		if err != nil {
			logf("FAILED to start grove+eval (grove serve %s %s): %v", strings.Join(predLogArgs(evalKafka), " "), strings.Join(evalArgs(), " "), err)
			return 1
		}
		logf("grove+eval ready at %s (prediction log FULL to the embedded Kafka broker at %s, evaluator in-process, outcomes rule on %s)", ep.baseURL, evalKafka, modelPath)
		evalSent++
		if err := checkAnswer(ctx, ep, rows, want, o.timeout); err != nil {
			logf("FAILED: grove+eval answered the check request wrongly: %v", err)
			return 1
		}
		ep.api = "POST /v1/inference (prediction log FULL, --evaluate)"
		targets[serverGroveEval] = ep
	}
	if wants(serverGroveTLS) {
		sec, err := writeTLSAuth(tmp)
		if err != nil {
			logf("FAILED to make grove-tls's certificate and tokens file: %v", err)
			return 1
		}
		g, ep, err := startGroveWith(ctx, serverGroveTLS, groveBin, bucket, filepath.Join(tmp, "cache-tls"), filepath.Join(tmp, "grove-tls.log"), o.groveArgs, o.startTimeout, sec)
		if g != nil {
			children = append(children, g)
		}
		if err != nil {
			logf("FAILED to start grove-tls (grove serve %s): %v", strings.Join(sec.args(), " "), err)
			return 1
		}
		logf("grove-tls ready at %s (TLS, bearer token required)", ep.baseURL)
		if err := checkAnswer(ctx, ep, rows, want, o.timeout); err != nil {
			logf("FAILED: grove-tls answered the check request wrongly: %v", err)
			return 1
		}
		ep.api = "POST /v1/inference (TLS + bearer token)"
		targets[serverGroveTLS] = ep
	}
	if wants(serverGroveLocal) || wants(serverGroveFwd) {
		cs, local, fwd, err := startCluster(ctx, groveBin, bucket, filepath.Join(tmp, "cluster"), o.groveArgs, rows, want, o.startTimeout, o.timeout, logf)
		children = append(children, cs...)
		if err != nil {
			logf("FAILED to start the 2-node cluster: %v", err)
			return 1
		}
		logf("cluster ready: grove-local at %s holds the model, grove-fwd at %s forwards to it", local.baseURL, fwd.baseURL)
		targets[serverGroveLocal], targets[serverGroveFwd] = local, fwd
	}
	if wantBaseline {
		b, ep, err := startBaseline(ctx, o.python, o.baselineDir, filepath.Join(bucket, modelPath, "model.pt"), filepath.Join(tmp, "baseline.log"), o.startTimeout)
		if b != nil {
			children = append(children, b)
		}
		switch {
		case err != nil:
			rep.note("baseline skipped: %v", err)
			logf("baseline skipped: %v", err)
		default:
			logf("baseline ready at %s", ep.baseURL)
			if err := checkAnswer(ctx, ep, rows, want, o.timeout); err != nil {
				rep.note("baseline skipped: it answered the check request wrongly: %v", err)
				logf("baseline skipped: check request: %v", err)
			} else {
				targets[serverBaseline] = ep
			}
		}
	}
	if wants(serverDirect) {
		d, ep, err := startDirect(ctx, filepath.Join(tmp, "direct.log"), filepath.Join(bucket, modelPath, "model.pt"), o.startTimeout)
		if d != nil {
			children = append(children, d)
		}
		if err != nil {
			logf("FAILED to start the direct server: %v", err)
			return 1
		}
		if err := checkAnswer(ctx, ep, rows, want, o.timeout); err != nil {
			logf("FAILED: the direct server answered the check request wrongly: %v", err)
			return 1
		}
		targets[serverDirect] = ep
	}
	if wants(serverFloor) || wants(serverFloorGRPC) || wants(serverFloorFwd) {
		f, hep, gep, err := startFloor(ctx, filepath.Join(tmp, "floor.log"), len(rows[0]), o.startTimeout)
		if f != nil {
			children = append(children, f)
		}
		if err != nil {
			rep.note("transport floor skipped: %v", err)
			logf("transport floor skipped: %v", err)
		} else {
			logf("transport floor ready at %s and %s", hep.baseURL, gep.url)
			targets[serverFloor], targets[serverFloorGRPC] = hep, gep
			if wants(serverFloorFwd) {
				p, ep, err := startFloorProxy(ctx, filepath.Join(tmp, "floor-fwd.log"), gep.grpc.addr, o.startTimeout)
				if p != nil {
					children = append(children, p)
				}
				if err != nil {
					rep.note("forwarding floor skipped: %v", err)
					logf("forwarding floor skipped: %v", err)
				} else {
					targets[serverFloorFwd] = ep
				}
			}
		}
	}
	if ctx.Err() != nil {
		logf("interrupted")
		return 1
	}

	// 4. The scenarios.
	for _, s := range o.scenarios {
		ep := targets[s.Server]
		if ep == nil {
			continue
		}
		logf("%s: %s batch %d, concurrency %d, %v warm-up + %v", s.Server, ep.api, s.Batch, s.Conc, o.warmup, o.duration)
		res, cpu := measureWindow(ctx, scenarioSpec(ep, rows[0], s.Batch, s.Conc, o.warmup, o.duration, o), ep.pid)
		if ctx.Err() != nil {
			logf("interrupted")
			return 1
		}
		logf("  %.0f req/s, p50 %s, p99 %s, %d errors; CPU server %.2f, grovebench %.2f", res.ReqPerSec, fmtDur(res.P50), fmtDur(res.P99), res.Errors, cpu.Grove, cpu.Bench)
		rep.add(s, ep, res)
		rep.Results[len(rep.Results)-1].CPU = cpu
		if s.Server == serverGroveEval {
			// The logged events delivered and the evaluator caught up, so
			// that neither spills into the next scenario.
			evalSent += res.Sent
			if _, _, err := waitDrained(ctx, ep.baseURL, evalSent); err != nil {
				rep.note("grove+eval's prediction log after batch %d conc %d: %v", s.Batch, s.Conc, err)
			}
		}
		if s.Server == serverGroveLog {
			predLogSent += res.Sent
			st, waited, err := waitDrained(ctx, ep.baseURL, predLogSent)
			if ctx.Err() != nil {
				logf("interrupted")
				return 1
			}
			pl := rep.PredLog
			pl.Sent, pl.Drain = predLogSent, max(pl.Drain, waited)
			if err != nil {
				pl.Error = fmt.Sprintf("after %s batch %d conc %d: %v", s.Server, s.Batch, s.Conc, err)
				logf("  prediction log: %v", err)
			}
			if st != nil {
				pl.Stats = st
				logf("  prediction log: delivered %d, dropped %d, failed %d, buffered %d for %d requests sent (waited %v)",
					st.Delivered, st.Dropped, st.Failed, st.Buffered, predLogSent, fmtDur(waited))
			}
		}
	}
	if o.forwardABRounds > 0 && targets[serverGroveLocal] != nil && targets[serverGroveFwd] != nil && targets[serverFloorGRPC] != nil {
		logf("forwarding A/B: %d rounds of %v on each of grove-local, grove-fwd and floor-grpc at batch 1, concurrency 1", o.forwardABRounds, forwardABWindow)
		rep.ForwardAB = runForwardAB(ctx, targets, rows[0], o)
		if ctx.Err() != nil {
			logf("interrupted")
			return 1
		}
		for _, l := range rep.ForwardAB.lines() {
			logf("  %s", l)
		}
	}
	if o.evalABRounds > 0 && targets[serverGroveLog] != nil && targets[serverGroveEval] != nil {
		logf("evaluator cost A/B: %d rounds of %v on each of grove+log and grove+eval at batch 1, concurrency 32", o.evalABRounds, evalABWindow)
		rep.EvalAB = runEvalAB(ctx, targets[serverGroveLog], targets[serverGroveEval], evalKafka, rows[0], o.evalABRounds, o)
		if ctx.Err() != nil {
			logf("interrupted")
			return 1
		}
		for _, l := range rep.EvalAB.lines() {
			logf("  %s", l)
		}
	}
	if o.cpuABRounds > 0 {
		rep.CPUAB = runCPUAB(ctx, targets, rows[0], o, logf)
		if ctx.Err() != nil {
			logf("interrupted")
			return 1
		}
		if rep.CPUAB != nil {
			rep.CPUAB.judge(rep.Forward)
			for _, l := range rep.CPUAB.lines() {
				logf("  %s", l)
			}
		}
	}
	for i := len(children) - 1; i >= 0; i-- {
		if err := children[i].stop(); err != nil {
			rep.note("%s: %v", children[i].name, err)
		}
	}
	children = nil

	// 5. The shadow scenario, alone on the machine.
	if len(o.shadowUsers) > 0 {
		logf("shadow scenario: user stream %v, shadow load %s, %d round(s)", o.shadowUsers, o.shadowLoad, o.shadowRounds)
		rep.Shadow = runShadow(ctx, shadowEnv{bin: groveBin, examples: filepath.Join(o.root, "examples", "bucket"), dir: tmp,
			groveArgs: o.groveArgs, rows: rows, want1: want, want2: want2, users: o.shadowUsers, userRate: o.shadowUserRate, load: o.shadowLoad,
			rounds: o.shadowRounds, warmup: o.warmup, duration: o.duration, timeout: o.timeout, startTimeout: o.startTimeout, logf: logf})
		if ctx.Err() != nil {
			logf("interrupted")
			return 1
		}
		if rep.Shadow.Error != "" {
			logf("FAILED: shadow scenario: %s", rep.Shadow.Error)
		}
	}

	// 6. The lifecycle scenarios, each alone on the machine.
	lenv := lifecycleEnv{root: o.root, bin: groveBin, examples: filepath.Join(o.root, "examples", "bucket"), dir: tmp, groveArgs: o.groveArgs,
		rows: rows, want: want, warmup: o.warmup, duration: o.duration, timeout: o.timeout, startTimeout: o.startTimeout, logf: logf,
		memRequests: o.memRequests, memWarmup: o.memWarmup, memCopies: o.memCopies, abRounds: o.cpuABRounds, onDemandRounds: o.onDemandABRounds}
	if o.swap {
		rep.Swap = runSwap(ctx, lenv)
		if ctx.Err() != nil {
			logf("interrupted")
			return 1
		}
		if rep.Swap.Error != "" {
			logf("FAILED: swap scenario: %s", rep.Swap.Error)
		}
	}
	if o.memory {
		rep.Memory = runMemory(ctx, lenv)
		if ctx.Err() != nil {
			logf("interrupted")
			return 1
		}
		if rep.Memory.Error != "" {
			logf("FAILED: memory scenario: %s", rep.Memory.Error)
		}
	}

	if o.overload {
		rep.Overload = runOverload(ctx, lenv)
		if ctx.Err() != nil {
			logf("interrupted")
			return 1
		}
		if rep.Overload.Error != "" {
			logf("FAILED: overload scenario: %s", rep.Overload.Error)
		}
	}

	if o.churn {
		rep.Churn = runChurn(ctx, lenv, churnEnv{updates: o.churnUpdates, warmup: o.churnWarmup, conc: o.churnConc, runtimes: o.churnRuntimes})
		if ctx.Err() != nil {
			logf("interrupted")
			return 1
		}
		if rep.Churn.Error != "" {
			logf("FAILED: churn scenario: %s", rep.Churn.Error)
		}
	}

	if o.ondemand {
		rep.OnDemand = runOnDemand(ctx, lenv)
		if ctx.Err() != nil {
			logf("interrupted")
			return 1
		}
		if rep.OnDemand.Error != "" {
			logf("FAILED: ondemand scenario: %s", rep.OnDemand.Error)
		}
	}

	if o.evaluate {
		logf("evaluate scenario: grove evaluate over %d requests", o.evalRequests)
		rep.Evaluate = runEvaluate(ctx, evalEnv{bin: groveBin, dir: tmp, requests: o.evalRequests, logf: logf})
		if ctx.Err() != nil {
			logf("interrupted")
			return 1
		}
		if rep.Evaluate.Error != "" {
			logf("FAILED: evaluate scenario: %s", rep.Evaluate.Error)
		}
	}

	// 7. Report.
	rep.finish()
	rep.writeMarkdown(stdout)
	if o.jsonPath != "" {
		if err := rep.writeJSON(o.jsonPath); err != nil {
			logf("writing %s: %v", o.jsonPath, err)
			return 1
		}
	}
	if n := rep.groveErrors() + rep.Shadow.errors() + rep.Churn.failed(); n > 0 {
		logf("FAILED: %d grove requests failed", n)
		return 1
	}
	if (rep.Shadow != nil && rep.Shadow.Error != "") || (rep.Swap != nil && rep.Swap.Error != "") || (rep.Memory != nil && rep.Memory.Error != "") ||
		(rep.Overload != nil && rep.Overload.Error != "") || (rep.Churn != nil && rep.Churn.Error != "") ||
		(rep.OnDemand != nil && rep.OnDemand.Error != "") ||
		(rep.Evaluate != nil && rep.Evaluate.Error != "") {
		return 1
	}
	return 0
}

// findRoot returns the module root of the working directory, from go env GOMOD.
func findRoot(ctx context.Context, goBin string) (string, error) {
	out, err := exec.CommandContext(ctx, goBin, "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %v", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside a Go module: run grovebench inside the grove repository or pass --root")
	}
	root := filepath.Dir(gomod)
	if _, err := os.Stat(filepath.Join(root, "examples", "bucket", modelPath, "model.pt")); err != nil {
		return "", fmt.Errorf("%s does not look like the grove repository: %v", root, err)
	}
	return root, nil
}

// writeBucket writes a bucket dir that holds pctr_v1/model.pt and
// pctr_onnx/model.onnx (the same weights) copied from the example bucket,
// rank_deep/model.pt from examples/bench, and a model config listing
// those three models.
func writeBucket(examples, dir string) error {
	for _, f := range []string{"bucket/" + modelPath + "model.pt", "bucket/" + onnxPath + "model.onnx", "bench/" + deepPath + "model.pt"} {
		_, name, _ := strings.Cut(f, "/")
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			return err
		}
		model, err := os.ReadFile(filepath.Join(examples, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), model, 0o644); err != nil {
			return err
		}
	}
	config := `{"model_metadata":[{"model_path":"` + modelPath + `"},{"model_path":"` + onnxPath + `"},{"model_path":"` + deepPath + `"}]}` + "\n"
	return os.WriteFile(filepath.Join(dir, "model_config.json"), []byte(config), 0o644)
}
