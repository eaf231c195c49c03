package check

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/conf"
)

// kubernetesDir holds the manifests, the cluster example in cluster/.
const kubernetesDir = "../kubernetes"

// kinds maps each apiVersion and kind the manifests may use to the Go type
// of the API that decodes it.
var kinds = map[string]func() any{
	"v1/Namespace":                            func() any { return &corev1.Namespace{} },
	"v1/ServiceAccount":                       func() any { return &corev1.ServiceAccount{} },
	"v1/Service":                              func() any { return &corev1.Service{} },
	"v1/ConfigMap":                            func() any { return &corev1.ConfigMap{} },
	"v1/Secret":                               func() any { return &corev1.Secret{} },
	"apps/v1/Deployment":                      func() any { return &appsv1.Deployment{} },
	"apps/v1/StatefulSet":                     func() any { return &appsv1.StatefulSet{} },
	"policy/v1/PodDisruptionBudget":           func() any { return &policyv1.PodDisruptionBudget{} },
	"networking.k8s.io/v1/NetworkPolicy":      func() any { return &networkingv1.NetworkPolicy{} },
	"autoscaling/v2/HorizontalPodAutoscaler":  func() any { return &autoscalingv2.HorizontalPodAutoscaler{} },
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return &monitoringv1.ServiceMonitor{} },
	"monitoring.coreos.com/v1/PrometheusRule": func() any { return &monitoringv1.PrometheusRule{} },
}

// manifest is one decoded Kubernetes object and where it came from.
type manifest struct {
	file string // relative to kubernetesDir
	doc  int    // 1-based document number in file
	kind string // apiVersion/kind
	obj  any    // a pointer to the API type of kind
}

func (m manifest) String() string { return fmt.Sprintf("%s (document %d, %s)", m.file, m.doc, m.kind) }

// decodeStrict decodes one YAML document into the API type its apiVersion
// and kind name; an unknown kind, an unknown or duplicate field, or a value
// of the wrong type is an error.
func decodeStrict(doc []byte) (kind string, obj any, err error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return "", nil, err
	}
	kind = tm.APIVersion + "/" + tm.Kind
	newObj, ok := kinds[kind]
	if !ok {
		return kind, nil, fmt.Errorf("apiVersion %q kind %q is none this test knows", tm.APIVersion, tm.Kind)
	}
	obj = newObj()
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return kind, nil, err
	}
	return kind, obj, nil
}

// splitDocuments returns the YAML documents of data that hold something.
func splitDocuments(data []byte) ([][]byte, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		if s := string(bytes.TrimSpace(j)); s == "null" || s == "" {
			continue // only comments
		}
		docs = append(docs, doc)
	}
}

// loadManifests decodes every .yaml file under kubernetesDir, subdirectories
// included.
func loadManifests(t *testing.T) []manifest {
	t.Helper()
	var out []manifest
	err := filepath.WalkDir(kubernetesDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		rel, _ := filepath.Rel(kubernetesDir, path)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		docs, err := splitDocuments(data)
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		for i, doc := range docs {
			kind, obj, err := decodeStrict(doc)
			if err != nil {
				t.Errorf("%s, document %d (%s): %v", rel, i+1, kind, err)
				continue
			}
			out = append(out, manifest{file: rel, doc: i + 1, kind: kind, obj: obj})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no manifests under " + kubernetesDir)
	}
	return out
}

// TestManifestsDecodeStrictly: every document of every manifest, the
// cluster example's included, is an object of the Kubernetes (or Prometheus
// Operator) API with no unknown field.
func TestManifestsDecodeStrictly(t *testing.T) {
	ms := loadManifests(t)
	files := map[string]bool{}
	for _, m := range ms {
		files[m.file] = true
	}
	for _, f := range []string{"deployment.yaml", "configmap.yaml", "secret.yaml", "service.yaml", "pdb.yaml", "hpa.yaml", "monitoring.yaml",
		filepath.Join("cluster", "grove.yaml"), filepath.Join("cluster", "etcd.yaml")} {
		if !files[f] {
			t.Errorf("%s was not decoded", f)
		}
	}
	t.Logf("%d objects in %d files decoded strictly", len(ms), len(files))
}

// TestStrictDecodingRefusesMistakes shows the decoding above fails on what
// kubectl apply --validate=strict would refuse.
func TestStrictDecodingRefusesMistakes(t *testing.T) {
	for name, doc := range map[string]string{
		"misspelt field": `apiVersion: apps/v1
kind: Deployment
metadata: {name: grove}
spec:
  template:
    spec:
      containers: [{name: grove, image: grove, readinesProbe: {httpGet: {path: /readyz, port: 8080}}}]`,
		"field at the wrong level": `apiVersion: v1
kind: Service
metadata: {name: grove}
ports: [{port: 8080}]`,
		"wrong type":    `{apiVersion: policy/v1, kind: PodDisruptionBudget, metadata: {name: grove}, spec: {maxUnavailable: [1]}}`,
		"duplicate key": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\nmetadata: {name: b}\n",
		"unknown kind":  `{apiVersion: apps/v1, kind: Deploymnet, metadata: {name: grove}}`,
		"monitor typo":  `{apiVersion: monitoring.coreos.com/v1, kind: ServiceMonitor, metadata: {name: grove}, spec: {endpoints: [{port: http, pth: /metrics}]}}`,
	} {
		if _, _, err := decodeStrict([]byte(doc)); err == nil {
			t.Errorf("%s: decoded without an error", name)
		}
	}
}

// objects returns the decoded objects of type T in the files directly in
// kubernetesDir (the single-server example), by name.
func objects[T interface{ GetName() string }](ms []manifest) map[string]T {
	out := map[string]T{}
	for _, m := range ms {
		if strings.Contains(m.file, string(filepath.Separator)) {
			continue
		}
		if o, ok := m.obj.(T); ok {
			out[o.GetName()] = o
		}
	}
	return out
}

// example is the single-server example: its Deployment, the config its
// container runs with, and the objects around it.
type example struct {
	ms       []manifest
	dep      *appsv1.Deployment
	c        corev1.Container
	secrets  map[string]*corev1.Secret
	cfgYAML  string   // grove.yaml from the ConfigMap
	args     []string // the container's args, --config= pointing at cfgPath
	cfgPath  string   // a copy of grove.yaml
	server   conf.Server
	services map[string]*corev1.Service
}

func loadExample(t *testing.T) example {
	t.Helper()
	e := example{ms: loadManifests(t)}
	deps := objects[*appsv1.Deployment](e.ms)
	e.dep = deps["grove"]
	if e.dep == nil || len(e.dep.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("want Deployment grove with one container, have %v", deps)
	}
	e.c = e.dep.Spec.Template.Spec.Containers[0]
	e.secrets = objects[*corev1.Secret](e.ms)
	e.services = objects[*corev1.Service](e.ms)

	var configMount *corev1.VolumeMount
	var configArg string
	for _, a := range e.c.Args {
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			configArg = v
		}
	}
	for i, m := range e.c.VolumeMounts {
		if m.MountPath == configArg {
			configMount = &e.c.VolumeMounts[i]
		}
	}
	if configMount == nil || configMount.SubPath == "" {
		t.Fatalf("--config=%s is not a file mounted from a ConfigMap key (subPath)", configArg)
	}
	vol := volume(t, e.dep, configMount.Name)
	if vol.ConfigMap == nil {
		t.Fatalf("volume %s of --config=%s is not a ConfigMap", vol.Name, configArg)
	}
	cm := objects[*corev1.ConfigMap](e.ms)[vol.ConfigMap.Name]
	if cm == nil {
		t.Fatalf("ConfigMap %s is not among the manifests", vol.ConfigMap.Name)
	}
	e.cfgYAML = cm.Data[configMount.SubPath]
	if e.cfgYAML == "" {
		t.Fatalf("ConfigMap %s has no key %s", cm.Name, configMount.SubPath)
	}
	e.cfgPath = filepath.Join(t.TempDir(), "grove.yaml")
	if err := os.WriteFile(e.cfgPath, []byte(e.cfgYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, a := range e.c.Args {
		if strings.HasPrefix(a, "--config=") {
			a = "--config=" + e.cfgPath
		}
		e.args = append(e.args, a)
	}
	s, err := conf.ParseServerArgs(e.args)
	if err != nil {
		t.Fatalf("grove serve refuses the Deployment's args with the ConfigMap's grove.yaml: %v", err)
	}
	e.server = s
	return e
}

func volume(t *testing.T, dep *appsv1.Deployment, name string) corev1.Volume {
	t.Helper()
	for _, v := range dep.Spec.Template.Spec.Volumes {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("Deployment %s has no volume %s", dep.Name, name)
	return corev1.Volume{}
}

// mountedFile returns the Secret key that path is mounted from, failing
// the test when no Secret volume of the container holds it.
func (e example) mountedFile(t *testing.T, path string) (*corev1.Secret, string) {
	t.Helper()
	for _, m := range e.c.VolumeMounts {
		rel, err := filepath.Rel(m.MountPath, path)
		if err != nil || strings.HasPrefix(rel, "..") || m.SubPath != "" {
			continue
		}
		v := volume(t, e.dep, m.Name)
		if v.Secret == nil {
			continue
		}
		s := e.secrets[v.Secret.SecretName]
		if s == nil {
			t.Fatalf("%s: Secret %s is not among the manifests", path, v.Secret.SecretName)
		}
		if _, ok := s.StringData[rel]; !ok {
			if _, ok := s.Data[rel]; !ok {
				t.Fatalf("%s: Secret %s has no key %s", path, s.Name, rel)
			}
		}
		return s, rel
	}
	t.Fatalf("%s is in no Secret volume of the grove container", path)
	return nil, ""
}

func secretValue(s *corev1.Secret, key string) string {
	if v, ok := s.StringData[key]; ok {
		return v
	}
	return string(s.Data[key])
}

// port resolves a probe's or Service's port (a number or a container port
// name) to the container's port number.
func port(t *testing.T, c corev1.Container, p intstr.IntOrString) int32 {
	t.Helper()
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	t.Fatalf("port %q is no port of container %s", p.StrVal, c.Name)
	return 0
}

// listenPort is the port of a host:port listen address.
func listenPort(t *testing.T, addr string) int32 {
	t.Helper()
	i := strings.LastIndex(addr, ":")
	var n int32
	if _, err := fmt.Sscan(addr[i+1:], &n); i < 0 || err != nil {
		t.Fatalf("listen address %q has no port", addr)
	}
	return n
}

func TestDeploymentMatchesGrovesConfig(t *testing.T) {
	e := loadExample(t)
	s, c, pod := e.server, e.c, e.dep.Spec.Template.Spec

	// Probes: the paths are checked against the running server in
	// TestProbesAndAlertMetricsAgainstTheServer; here their ports and schemes.
	wantScheme := corev1.URISchemeHTTP
	if s.TLS.Enabled() {
		wantScheme = corev1.URISchemeHTTPS
	}
	for name, want := range map[string]struct {
		probe *corev1.Probe
		path  string
	}{"readinessProbe": {c.ReadinessProbe, "/readyz"}, "livenessProbe": {c.LivenessProbe, "/healthz"}} {
		if want.probe == nil || want.probe.HTTPGet == nil {
			t.Errorf("%s: none, or not httpGet", name)
			continue
		}
		g := want.probe.HTTPGet
		if g.Path != want.path {
			t.Errorf("%s: path %q, want %q", name, g.Path, want.path)
		}
		if p := port(t, c, g.Port); p != listenPort(t, s.HTTP) {
			t.Errorf("%s: port %d, but grove listens for HTTP on %s", name, p, s.HTTP)
		}
		if g.Scheme != wantScheme {
			t.Errorf("%s: scheme %q, want %q (TLS on: %v)", name, g.Scheme, wantScheme, s.TLS.Enabled())
		}
	}
	for _, p := range c.Ports {
		if p.Name == "grpc" && p.ContainerPort != listenPort(t, s.GRPC) {
			t.Errorf("container port grpc %d, but grove listens for gRPC on %s", p.ContainerPort, s.GRPC)
		}
	}

	// Shutdown: preStop's pause, then SIGTERM and drain_timeout, all
	// within the grace period, with a margin for the exit.
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		t.Fatal("no preStop sleep: the pod would stop taking requests before the endpoints know")
	}
	preStop := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	if pod.TerminationGracePeriodSeconds == nil {
		t.Fatal("no terminationGracePeriodSeconds")
	}
	grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	if margin := grace - preStop - s.DrainTimeout; margin < 5*time.Second || margin > 30*time.Second {
		t.Errorf("terminationGracePeriodSeconds %v = preStop %v + drain_timeout %v + %v: want a margin of 5s to 30s",
			grace, preStop, s.DrainTimeout, margin)
	}

	// Resources: requests and limits for CPU and memory.
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, lim := c.Resources.Requests[r], c.Resources.Limits[r]
		if req.IsZero() || lim.IsZero() {
			t.Errorf("resources: %s request %v, limit %v: want both", r, req.String(), lim.String())
		} else if lim.Cmp(req) < 0 {
			t.Errorf("resources: %s limit %v below the request %v", r, lim.String(), req.String())
		}
	}

	// Non-root, as the image is.
	psc := pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("pod securityContext %+v: want runAsNonRoot and a non-zero runAsUser", psc)
	} else if uid := dockerfileUser(t); fmt.Sprint(*psc.RunAsUser) != uid {
		t.Errorf("runAsUser %d, but the image's USER is %s", *psc.RunAsUser, uid)
	}
	if len(c.Command) != 0 {
		t.Errorf("command %q replaces the image's entrypoint (grove serve)", c.Command)
	}

	// Every file grove.yaml names is a key of a Secret mounted where it says.
	files := []string{s.Auth.TokensFile, s.TLS.CertFile, s.TLS.KeyFile}
	if s.TLS.ClientCAFile != "" {
		files = append(files, s.TLS.ClientCAFile)
	}
	for _, f := range files {
		if f == "" {
			t.Errorf("grove.yaml sets no tokens file or TLS certificate: a non-loopback listener needs authentication")
			continue
		}
		e.mountedFile(t, f)
	}
	mounted := false
	for _, m := range c.VolumeMounts {
		if m.MountPath == s.CacheDir && volume(t, e.dep, m.Name).EmptyDir != nil {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("cache_dir %s is no emptyDir mount (the image's root file system is read-only)", s.CacheDir)
	}
	sec, key := e.mountedFile(t, s.Auth.TokensFile)
	if _, err := auth.ParseTokens([]byte(secretValue(sec, key))); err != nil {
		t.Errorf("Secret %s key %s: %v", sec.Name, key, err)
	}
}

// TestObjectsSelectTheDeployment: the Service, PodDisruptionBudget,
// HorizontalPodAutoscaler and ServiceMonitor refer to the Deployment's pods,
// ports and Secrets.
func TestObjectsSelectTheDeployment(t *testing.T) {
	e := loadExample(t)
	podLabels := e.dep.Spec.Template.Labels
	sel, err := metav1.LabelSelectorAsSelector(e.dep.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(podLabels)) {
		t.Fatalf("the Deployment's selector does not select its pods (%v)", err)
	}
	svc := e.services["grove"]
	if svc == nil {
		t.Fatal("no Service grove")
	}
	if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(podLabels)) {
		t.Errorf("Service %s selects %v, not the pods %v", svc.Name, svc.Spec.Selector, podLabels)
	}
	for _, p := range svc.Spec.Ports {
		port(t, e.c, p.TargetPort)
	}
	pdbs := objects[*policyv1.PodDisruptionBudget](e.ms)
	if len(pdbs) != 1 {
		t.Fatalf("want one PodDisruptionBudget, have %d", len(pdbs))
	}
	for _, p := range pdbs {
		s, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err != nil || !s.Matches(labels.Set(podLabels)) {
			t.Errorf("PodDisruptionBudget %s does not select the pods (%v)", p.Name, err)
		}
		if p.Spec.MaxUnavailable == nil && p.Spec.MinAvailable == nil {
			t.Errorf("PodDisruptionBudget %s: neither maxUnavailable nor minAvailable", p.Name)
		}
	}
	hpas := objects[*autoscalingv2.HorizontalPodAutoscaler](e.ms)
	if len(hpas) != 1 {
		t.Fatalf("want one HorizontalPodAutoscaler, have %d", len(hpas))
	}
	for _, h := range hpas {
		if r := h.Spec.ScaleTargetRef; r.Kind != "Deployment" || r.Name != e.dep.Name || r.APIVersion != "apps/v1" {
			t.Errorf("HorizontalPodAutoscaler %s scales %+v, not the Deployment", h.Name, r)
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 2 || h.Spec.MaxReplicas < *h.Spec.MinReplicas {
			t.Errorf("HorizontalPodAutoscaler %s: replicas %v to %d", h.Name, h.Spec.MinReplicas, h.Spec.MaxReplicas)
		}
		if e.c.Resources.Requests.Cpu().IsZero() {
			t.Errorf("the HorizontalPodAutoscaler scales on CPU utilization, which needs a CPU request")
		}
	}
	sms := objects[*monitoringv1.ServiceMonitor](e.ms)
	if len(sms) != 1 {
		t.Fatalf("want one ServiceMonitor, have %d", len(sms))
	}
	for _, sm := range sms {
		s, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
		if err != nil || !s.Matches(labels.Set(svc.Labels)) {
			t.Errorf("ServiceMonitor %s does not select Service %s (labels %v): %v", sm.Name, svc.Name, svc.Labels, err)
		}
		if len(sm.Spec.Endpoints) == 0 {
			t.Fatalf("ServiceMonitor %s has no endpoints", sm.Name)
		}
		for _, ep := range sm.Spec.Endpoints {
			if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port }) {
				t.Errorf("ServiceMonitor %s: port %q is no port of Service %s", sm.Name, ep.Port, svc.Name)
			}
			if ep.Path != "/metrics" {
				t.Errorf("ServiceMonitor %s: path %q, want /metrics", sm.Name, ep.Path)
			}
			if want := map[bool]string{true: "https", false: "http"}[e.server.TLS.Enabled()]; ep.Scheme == nil || strings.ToLower(ep.Scheme.String()) != want {
				t.Errorf("ServiceMonitor %s: scheme %v, want %s", sm.Name, ep.Scheme, want)
			}
			tok := e.scrapeToken(t, sm)
			if e.server.AuthConfigured() && tok == "" {
				t.Errorf("ServiceMonitor %s sends no token, but /metrics needs the read role", sm.Name)
			}
			if ep.TLSConfig != nil && ep.TLSConfig.CA.Secret != nil {
				ref := ep.TLSConfig.CA.Secret
				if s := e.secrets[ref.Name]; s == nil || secretValue(s, ref.Key) == "" {
					t.Errorf("ServiceMonitor %s: CA from Secret %s key %s, which is not among the manifests", sm.Name, ref.Name, ref.Key)
				}
			}
		}
	}
}

// scrapeToken returns the bearer token the ServiceMonitor sends, after
// checking that the tokens file grants it the read role.
func (e example) scrapeToken(t *testing.T, sm *monitoringv1.ServiceMonitor) string {
	t.Helper()
	a := sm.Spec.Endpoints[0].Authorization
	if a == nil || a.Credentials == nil {
		return ""
	}
	s := e.secrets[a.Credentials.Name]
	if s == nil {
		t.Fatalf("ServiceMonitor %s: token from Secret %s, which is not among the manifests", sm.Name, a.Credentials.Name)
	}
	tok := secretValue(s, a.Credentials.Key)
	sec, key := e.mountedFile(t, e.server.Auth.TokensFile)
	tokens, err := auth.ParseTokens([]byte(secretValue(sec, key)))
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256([]byte(tok))
	entry, ok := tokens[h]
	if !ok {
		t.Fatalf("ServiceMonitor %s's token (SHA-256 %s) is not in %s", sm.Name, hex.EncodeToString(h[:]), e.server.Auth.TokensFile)
	}
	if !slices.Contains(entry.Roles, auth.RoleRead) {
		t.Errorf("token %s has roles %v: /metrics needs read", entry.Name, entry.Roles)
	}
	return tok
}

// restrictedProblems lists what keeps a pod spec from running every
// container unprivileged: as a non-root user (runAsNonRoot and a
// non-zero runAsUser, from the pod or the container), without privilege
// escalation, with every capability dropped and a read-only root file
// system (the restricted Pod Security Standard, and the last).
func restrictedProblems(spec corev1.PodSpec) []string {
	var out []string
	psc := spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	for _, c := range spec.Containers {
		sc := c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		nonRoot, uid := psc.RunAsNonRoot, psc.RunAsUser
		if sc.RunAsNonRoot != nil {
			nonRoot = sc.RunAsNonRoot
		}
		if sc.RunAsUser != nil {
			uid = sc.RunAsUser
		}
		if nonRoot == nil || !*nonRoot || uid == nil || *uid == 0 {
			out = append(out, fmt.Sprintf("container %s may run as root: want runAsNonRoot and a non-zero runAsUser", c.Name))
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			out = append(out, fmt.Sprintf("container %s: want allowPrivilegeEscalation: false", c.Name))
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			out = append(out, fmt.Sprintf("container %s: want capabilities drop [ALL]", c.Name))
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			out = append(out, fmt.Sprintf("container %s: want readOnlyRootFilesystem: true", c.Name))
		}
	}
	return out
}

// TestEveryContainerRunsUnprivileged: every container of every workload
// in the manifests, the cluster example's etcd included, runs as a
// non-root user with a read-only root file system, no privilege
// escalation and no capability.
func TestEveryContainerRunsUnprivileged(t *testing.T) {
	for _, m := range loadManifests(t) {
		var spec corev1.PodSpec
		switch o := m.obj.(type) {
		case *appsv1.Deployment:
			spec = o.Spec.Template.Spec
		case *appsv1.StatefulSet:
			spec = o.Spec.Template.Spec
		default:
			continue
		}
		for _, p := range restrictedProblems(spec) {
			t.Errorf("%v: %s", m, p)
		}
	}
}

// TestUnprivilegedCheckCatchesRoot shows the check above fails on a
// container with no security context.
func TestUnprivilegedCheckCatchesRoot(t *testing.T) {
	if p := restrictedProblems(corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd"}}}); len(p) != 4 {
		t.Errorf("a container with no security context: %q, want 4 problems", p)
	}
}
