package check

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/groveml/grove/internal/certtest"
)

// repoRoot is the repository holding this module.
const repoRoot = "../.."

// TestProbesAndAlertMetricsAgainstTheServer runs the real grove binary
// with the Deployment's args and the ConfigMap's grove.yaml (listen
// addresses, bucket, cache and the Secret's files moved to the test's
// temporary directory: flags override grove.yaml's keys), the Secret's
// tokens.yaml and a certificate made here. Then every httpGet probe of a
// grove container in the manifests (the cluster example's too) must answer
// 200 with no credentials, /metrics must refuse a caller without a token
// and serve the ServiceMonitor's, and every metric the alert rules select
// must be exported, with the labels their matchers use.
func TestProbesAndAlertMetricsAgainstTheServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs grove")
	}
	e := loadExample(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	tmp := t.TempDir()

	bin := filepath.Join(tmp, "grove")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/grove")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building grove: %v\n%s", err, out)
	}

	// The Secret's files: its tokens.yaml plus a token for inference, and
	// a certificate for 127.0.0.1.
	sec, key := e.mountedFile(t, e.server.Auth.TokensFile)
	var tokens struct {
		Tokens []map[string]any `json:"tokens"`
	}
	if err := yaml.UnmarshalStrict([]byte(secretValue(sec, key)), &tokens); err != nil {
		t.Fatal(err)
	}
	inferToken := "test-infer-token"
	h := sha256.Sum256([]byte(inferToken))
	tokens.Tokens = append(tokens.Tokens, map[string]any{"name": "test", "sha256": hex.EncodeToString(h[:]), "roles": []string{"infer"}})
	tokensFile := writeYAML(t, filepath.Join(tmp, "tokens.yaml"), tokens)
	ca := certtest.NewCA(t, "grove-test-ca")
	certFile, keyFile := ca.Server(t, "grove").Write(t, tmp, "tls")
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)

	bucket := filepath.Join(tmp, "bucket")
	model, err := os.ReadFile(filepath.Join(repoRoot, "examples", "bucket", "pctr_v1", "model.pt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(bucket, "pctr_v1"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"pctr_v1/model.pt": model, "model_config.json": []byte(`{"model_metadata": [{"model_path": "pctr_v1/"}]}`)} {
		if err := os.WriteFile(filepath.Join(bucket, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	httpAddr, grpcAddr := freeAddr(t), freeAddr(t)
	args := append([]string{"serve"}, e.args...)
	args = append(args, "--http", httpAddr, "--grpc", grpcAddr, "--bucket", "file://"+bucket, "--cache-dir", filepath.Join(tmp, "cache"),
		"--auth-tokens-file", tokensFile, "--tls-cert", certFile, "--tls-key", keyFile)
	cmd := exec.Command(bin, args...)
	logs, err := os.Create(filepath.Join(tmp, "grove.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// exited is closed when grove has exited, with waitErr set: the
	// readiness loop and the cleanup both wait on it (a value sent once
	// would be taken by the first, and the cleanup would wait forever).
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(logs.Name())
			t.Logf("grove's log:\n%s", b)
		}
	})

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	base := "https://" + httpAddr
	get := func(path, token string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	ready := e.c.ReadinessProbe.HTTPGet.Path
	for {
		if code, _ := get(ready, ""); code == http.StatusOK {
			break
		}
		select {
		case <-exited:
			t.Fatalf("grove exited (%v) before %s answered 200", waitErr, ready)
		case <-ctx.Done():
			t.Fatalf("%s did not answer 200 in time", ready)
		case <-time.After(100 * time.Millisecond):
		}
	}

	for _, p := range groveProbes(loadManifests(t)) {
		if code, body := get(p.path, ""); code != http.StatusOK {
			t.Errorf("%s: GET %s with no credentials: %d %s, want 200", p.where, p.path, code, body)
		}
	}

	// Requests that make the per-model series exist: one answered, one for
	// a model that is not there.
	for _, model := range []string{"pctr_v1/", "nope/"} {
		row := strings.TrimSuffix(strings.Repeat(`"0.5",`, 64), ",")
		body := fmt.Sprintf(`{"request":[{"model_path":%q,"tensors":[{"data_type":"FLOAT","tensor_shape":[1,64],"tensor_content":[%s]}]}]}`, model, row)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/inference", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+inferToken)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("inference for %s: %d %s", model, resp.StatusCode, b)
		}
	}

	if code, _ := get("/metrics", ""); code != http.StatusUnauthorized {
		t.Errorf("/metrics with no token: %d, want 401", code)
	}
	var scrapeToken string
	for _, sm := range objects[*monitoringv1.ServiceMonitor](e.ms) {
		scrapeToken = e.scrapeToken(t, sm)
	}
	code, metrics := get("/metrics", scrapeToken)
	if code != http.StatusOK {
		t.Fatalf("/metrics with the ServiceMonitor's token: %d %s", code, metrics)
	}
	exported := exportedLabels(metrics)
	for name, labels := range ruleSelectors(t, e.ms) {
		have, ok := exported[name]
		if !ok {
			t.Errorf("the alert rules select %s, which grove does not export", name)
			continue
		}
		for _, l := range labels {
			if !have[l] {
				t.Errorf("the alert rules match %s on label %q, which it does not have (it has %v)", name, l, have)
			}
		}
	}
}

// probe is one httpGet probe of a grove container.
type probe struct{ where, path string }

// groveProbes lists the httpGet probes of every container running Grove's
// image in the Deployments and StatefulSets.
func groveProbes(ms []manifest) []probe {
	var out []probe
	for _, m := range ms {
		var spec corev1.PodSpec
		switch o := m.obj.(type) {
		case *appsv1.Deployment:
			spec = o.Spec.Template.Spec
		case *appsv1.StatefulSet:
			spec = o.Spec.Template.Spec
		default:
			continue
		}
		for _, c := range spec.Containers {
			if !strings.Contains(c.Image, "grove") {
				continue
			}
			for name, p := range map[string]*corev1.Probe{"readinessProbe": c.ReadinessProbe, "livenessProbe": c.LivenessProbe, "startupProbe": c.StartupProbe} {
				if p != nil && p.HTTPGet != nil {
					out = append(out, probe{where: fmt.Sprintf("%v container %s %s", m, c.Name, name), path: p.HTTPGet.Path})
				}
			}
		}
	}
	return out
}

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})? `)
var labelName = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)

// exportedLabels maps each metric name of a text exposition to the label
// names its samples carry.
func exportedLabels(text string) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		m := sampleLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		if out[m[1]] == nil {
			out[m[1]] = map[string]bool{}
		}
		for _, lm := range labelName.FindAllStringSubmatch(m[3], -1) {
			out[m[1]][lm[1]] = true
		}
	}
	return out
}

func writeYAML(t *testing.T, path string, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// freeAddr returns a loopback address nobody listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
