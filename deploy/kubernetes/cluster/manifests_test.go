// Package cluster holds the Kubernetes example of a Grove cluster; its
// test checks the manifests without a Kubernetes API server.
package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/groveml/grove/conf"
)

// object is one Kubernetes object as decoded from YAML.
type object struct {
	file string
	doc  map[string]any
}

func (o object) kind() string { return str(o.doc, "kind") }
func (o object) name() string { return str(o.doc, "metadata", "name") }
func (o object) String() string {
	return fmt.Sprintf("%s: %s/%s", o.file, o.kind(), o.name())
}

// get walks maps by keys and slices by int indexes; nil when absent.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			s, ok := v.([]any)
			if !ok || k >= len(s) {
				return nil
			}
			v = s[k]
		}
	}
	return v
}

func str(v any, path ...any) string {
	s, _ := get(v, path...).(string)
	return s
}

func list(v any, path ...any) []any {
	s, _ := get(v, path...).([]any)
	return s
}

func labels(v any, path ...any) map[string]string {
	m, _ := get(v, path...).(map[string]any)
	out := map[string]string{}
	for k, v := range m {
		out[k] = fmt.Sprint(v)
	}
	return out
}

// loadAll decodes every YAML document of every .yaml file here.
func loadAll(t *testing.T) []object {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests found (%v)", err)
	}
	var objs []object
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for i := 0; ; i++ {
			var doc map[string]any
			err := dec.Decode(&doc)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s, document %d: %v", f, i+1, err)
			}
			if doc == nil {
				t.Fatalf("%s, document %d is empty", f, i+1)
			}
			objs = append(objs, object{file: f, doc: doc})
		}
	}
	return objs
}

// apiVersions is the apiVersion of each kind the example may use.
var apiVersions = map[string]string{
	"Namespace":           "v1",
	"Service":             "v1",
	"ConfigMap":           "v1",
	"StatefulSet":         "apps/v1",
	"PodDisruptionBudget": "policy/v1",
	"NetworkPolicy":       "networking.k8s.io/v1",
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func TestManifestsHaveKindsAndRequiredFields(t *testing.T) {
	objs := loadAll(t)
	seen := map[string]bool{}
	for _, o := range objs {
		want, ok := apiVersions[o.kind()]
		if !ok {
			t.Errorf("%v: kind %q is not one this example uses", o, o.kind())
			continue
		}
		if got := str(o.doc, "apiVersion"); got != want {
			t.Errorf("%v: apiVersion %q, want %q", o, got, want)
		}
		if !dnsLabel.MatchString(o.name()) {
			t.Errorf("%v: metadata.name %q is not a DNS label", o, o.name())
		}
		if o.kind() != "Namespace" && str(o.doc, "metadata", "namespace") != "grove" {
			t.Errorf("%v: metadata.namespace is %q, want grove", o, str(o.doc, "metadata", "namespace"))
		}
		key := o.kind() + "/" + o.name()
		if seen[key] {
			t.Errorf("%v: defined twice", o)
		}
		seen[key] = true
	}
	for _, k := range []string{"Namespace/grove", "StatefulSet/etcd", "StatefulSet/grove", "Service/etcd-peers", "Service/etcd",
		"Service/grove-peers", "Service/grove", "ConfigMap/grove-config", "PodDisruptionBudget/grove", "PodDisruptionBudget/etcd"} {
		if !seen[k] {
			t.Errorf("%s is missing", k)
		}
	}
}

// selects reports whether selector picks pods labelled l.
func selects(selector, l map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if l[k] != v {
			return false
		}
	}
	return true
}

func TestManifestsReferToEachOther(t *testing.T) {
	objs := loadAll(t)
	byKey := map[string]object{}
	var podLabels []map[string]string
	for _, o := range objs {
		byKey[o.kind()+"/"+o.name()] = o
		if o.kind() == "StatefulSet" {
			podLabels = append(podLabels, labels(o.doc, "spec", "template", "metadata", "labels"))
		}
	}
	selectsSomePod := func(sel map[string]string) bool {
		for _, l := range podLabels {
			if selects(sel, l) {
				return true
			}
		}
		return false
	}
	for _, o := range objs {
		switch o.kind() {
		case "StatefulSet":
			sel := labels(o.doc, "spec", "selector", "matchLabels")
			if !selects(sel, labels(o.doc, "spec", "template", "metadata", "labels")) {
				t.Errorf("%v: spec.selector does not select its own pod template", o)
			}
			svc, ok := byKey["Service/"+str(o.doc, "spec", "serviceName")]
			if !ok {
				t.Errorf("%v: spec.serviceName %q names no Service here", o, str(o.doc, "spec", "serviceName"))
			} else if str(svc.doc, "spec", "clusterIP") != "None" {
				t.Errorf("%v: its Service %s is not headless (clusterIP: None)", o, svc.name())
			}
			if n, _ := get(o.doc, "spec", "replicas").(int); n < 3 {
				t.Errorf("%v: %d replicas, want at least 3", o, n)
			}
			containers := list(o.doc, "spec", "template", "spec", "containers")
			if len(containers) == 0 {
				t.Errorf("%v: no containers", o)
			}
			mounts := map[string]bool{}
			for _, c := range containers {
				if str(c, "image") == "" || str(c, "name") == "" {
					t.Errorf("%v: a container lacks name or image", o)
				}
				for _, p := range []string{"readinessProbe", "livenessProbe"} {
					if get(c, p) == nil {
						t.Errorf("%v: container %s has no %s", o, str(c, "name"), p)
					}
				}
				if get(c, "resources", "requests", "memory") == nil || get(c, "resources", "limits", "memory") == nil {
					t.Errorf("%v: container %s lacks a memory request or limit", o, str(c, "name"))
				}
				for _, m := range list(c, "volumeMounts") {
					mounts[str(m, "name")] = true
				}
			}
			volumes := map[string]bool{}
			for _, v := range list(o.doc, "spec", "template", "spec", "volumes") {
				volumes[str(v, "name")] = true
				if cm := str(v, "configMap", "name"); cm != "" {
					if _, ok := byKey["ConfigMap/"+cm]; !ok {
						t.Errorf("%v: volume %s names ConfigMap %q, which is not here", o, str(v, "name"), cm)
					}
				}
			}
			for _, v := range list(o.doc, "spec", "volumeClaimTemplates") {
				volumes[str(v, "metadata", "name")] = true
			}
			for m := range mounts {
				if !volumes[m] {
					t.Errorf("%v: volumeMount %q has no volume", o, m)
				}
			}
		case "Service", "PodDisruptionBudget", "NetworkPolicy":
			sel := labels(o.doc, "spec", "selector")
			switch o.kind() {
			case "PodDisruptionBudget":
				sel = labels(o.doc, "spec", "selector", "matchLabels")
				if get(o.doc, "spec", "minAvailable") == nil && get(o.doc, "spec", "maxUnavailable") == nil {
					t.Errorf("%v: neither minAvailable nor maxUnavailable", o)
				}
			case "NetworkPolicy":
				sel = labels(o.doc, "spec", "podSelector", "matchLabels")
			case "Service":
				if len(list(o.doc, "spec", "ports")) == 0 {
					t.Errorf("%v: no ports", o)
				}
			}
			if !selectsSomePod(sel) {
				t.Errorf("%v: its selector %v selects no pod of these StatefulSets", o, sel)
			}
		}
	}
}

// groveStatefulSet returns the grove StatefulSet and the ConfigMap's grove.yaml.
func groveStatefulSet(t *testing.T) (sts object, groveYAML string) {
	t.Helper()
	for _, o := range loadAll(t) {
		switch {
		case o.kind() == "StatefulSet" && o.name() == "grove":
			sts = o
		case o.kind() == "ConfigMap" && o.name() == "grove-config":
			groveYAML = str(o.doc, "data", "grove.yaml")
		}
	}
	if sts.doc == nil || groveYAML == "" {
		t.Fatal("StatefulSet grove or ConfigMap grove-config's grove.yaml is missing")
	}
	return sts, groveYAML
}

var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// podEnv is what the downward API gives the pod grove-1 in namespace grove.
var podEnv = map[string]string{
	"metadata.name":      "grove-1",
	"metadata.namespace": "grove",
	"status.podIP":       "10.1.2.3",
}

// serverArgs returns the grove container's arguments (the image's
// entrypoint is `grove serve`) as the kubelet passes them to pod grove-1 (each $(VAR) expanded from the
// container's env), with --config pointing at a copy of grove.yaml.
func serverArgs(t *testing.T, c any, groveYAML string) []string {
	t.Helper()
	env := map[string]string{}
	for _, e := range list(c, "env") {
		if v, ok := get(e, "value").(string); ok {
			env[str(e, "name")] = v
		} else if f := str(e, "valueFrom", "fieldRef", "fieldPath"); f != "" {
			v, ok := podEnv[f]
			if !ok {
				t.Fatalf("env %s: fieldRef %q is not one this test knows", str(e, "name"), f)
			}
			env[str(e, "name")] = v
		}
	}
	var args []string
	for _, a := range list(c, "args") {
		s, ok := a.(string)
		if !ok {
			t.Fatalf("argument %v is not a string", a)
		}
		for _, m := range envRef.FindAllStringSubmatch(s, -1) {
			if _, ok := env[m[1]]; !ok {
				t.Errorf("argument %q refers to $(%s), which the container's env does not define", s, m[1])
			}
		}
		args = append(args, envRef.ReplaceAllStringFunc(s, func(r string) string { return env[r[2:len(r)-1]] }))
	}
	if len(args) > 0 && args[0] == "serve" {
		t.Fatalf("the grove container's args %q start with serve, which the image's entrypoint (grove serve) already runs", args)
	}
	cfg := filepath.Join(t.TempDir(), "grove.yaml")
	if err := os.WriteFile(cfg, []byte(groveYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	found := false
	for i, a := range args {
		if strings.HasPrefix(a, "--config=") {
			args[i], found = "--config="+cfg, true
		}
	}
	if !found {
		t.Fatal("the grove container's args have no --config=")
	}
	return args
}

// quantity parses a Kubernetes memory quantity such as 6Gi or 512Mi.
func quantity(t *testing.T, v any) int64 {
	t.Helper()
	s := fmt.Sprint(v)
	mult := int64(1)
	for suffix, m := range map[string]int64{"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40} {
		if strings.HasSuffix(s, suffix) {
			s, mult = strings.TrimSuffix(s, suffix), m
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("memory quantity %v: %v", v, err)
	}
	return n * mult
}

func TestGroveContainerArgsAndConfigParse(t *testing.T) {
	sts, groveYAML := groveStatefulSet(t)
	c := get(sts.doc, "spec", "template", "spec", "containers", 0)
	s, err := conf.ParseServerArgs(serverArgs(t, c, groveYAML))
	if err != nil {
		t.Fatalf("grove serve refuses the StatefulSet's args with the ConfigMap's grove.yaml: %v", err)
	}
	if !s.Cluster.Enabled() || len(s.Cluster.EtcdEndpoints) != 3 {
		t.Errorf("cluster.etcd_endpoints = %q, want the 3 etcd members", s.Cluster.EtcdEndpoints)
	}
	for _, e := range s.Cluster.EtcdEndpoints {
		if host, port, _ := net.SplitHostPort(e); !strings.HasSuffix(host, ".etcd-peers.grove.svc.cluster.local") || port != "2379" {
			t.Errorf("etcd endpoint %q is not a member of the etcd StatefulSet", e)
		}
	}
	if s.Cluster.NodeName != "grove-1" {
		t.Errorf("node name %q, want the pod name grove-1", s.Cluster.NodeName)
	}
	if want := "grove-1.grove-peers.grove.svc.cluster.local:7443"; s.Cluster.Advertise != want {
		t.Errorf("advertise %q, want %q (the pod's name under the headless Service)", s.Cluster.Advertise, want)
	}
	if !s.TLS.Enabled() || s.TLS.ClientAuth != conf.ClientAuthRequire || s.TLS.ClientCAFile == "" {
		t.Errorf("TLS %+v: want TLS with client certificates required (mTLS between nodes)", s.TLS)
	}
	if s.TLS.CertFile != "/etc/grove/tls/grove-1.crt" {
		t.Errorf("tls cert %q, want the pod's own certificate", s.TLS.CertFile)
	}
	limit := quantity(t, get(c, "resources", "limits", "memory"))
	if req := quantity(t, get(c, "resources", "requests", "memory")); req != limit {
		t.Errorf("memory request %d != limit %d: the node's budget must be guaranteed", req, limit)
	}
	if s.MemoryBudgetBytes <= 0 || s.MemoryBudgetBytes > limit*3/4 {
		t.Errorf("memory_budget_bytes %d: want positive and at most 3/4 of the container's %d bytes (Grove's own heap, runtimes, buffers)",
			s.MemoryBudgetBytes, limit)
	}
	_, httpPort, _ := net.SplitHostPort(s.HTTP)
	_, grpcPort, _ := net.SplitHostPort(s.GRPC)
	_, peerPort, _ := net.SplitHostPort(s.Cluster.Advertise)
	ports := map[string]bool{}
	for _, p := range list(c, "ports") {
		ports[fmt.Sprint(get(p, "containerPort"))] = true
	}
	for _, p := range []string{httpPort, grpcPort, peerPort} {
		if !ports[p] {
			t.Errorf("port %s is not a containerPort of the grove container", p)
		}
	}
	for probe, path := range map[string]string{"readinessProbe": "/readyz", "livenessProbe": "/healthz", "startupProbe": "/healthz"} {
		if got := str(c, probe, "httpGet", "path"); got != path {
			t.Errorf("%s path %q, want %q", probe, got, path)
		}
		if got := fmt.Sprint(get(c, probe, "httpGet", "port")); got != httpPort {
			t.Errorf("%s port %s, want the HTTP port %s", probe, got, httpPort)
		}
		if got := str(c, probe, "httpGet", "scheme"); got != "HTTPS" {
			t.Errorf("%s scheme %q, want HTTPS (every listener is TLS)", probe, got)
		}
	}
	mounted := map[string]bool{}
	for _, m := range list(c, "volumeMounts") {
		mounted[str(m, "mountPath")] = true
	}
	for _, f := range []string{s.TLS.CertFile, s.TLS.KeyFile, s.TLS.ClientCAFile, s.CacheDir} {
		dir := filepath.Dir(f)
		if f == s.CacheDir {
			dir = f
		}
		if !mounted[dir] {
			t.Errorf("%s is under no volumeMount of the grove container", f)
		}
	}
}

// TestGroveNodesDrainWithinTheGracePeriodAsNonRoot: as the single-server
// Deployment (deploy/check), a node's pod pauses in preStop while the
// endpoints learn it is going, then drains for drain_timeout, all within
// terminationGracePeriodSeconds with a margin of 5 to 30 s for the exit;
// and it runs as the image's non-root user, with fsGroup so that the
// cache volume (a PersistentVolumeClaim, root-owned when provisioned) is
// writable by it.
func TestGroveNodesDrainWithinTheGracePeriodAsNonRoot(t *testing.T) {
	sts, groveYAML := groveStatefulSet(t)
	pod := get(sts.doc, "spec", "template", "spec")
	c := get(pod, "containers", 0)
	s, err := conf.ParseServerArgs(serverArgs(t, c, groveYAML))
	if err != nil {
		t.Fatal(err)
	}
	preStop, ok := get(c, "lifecycle", "preStop", "sleep", "seconds").(int)
	if !ok || preStop <= 0 {
		t.Errorf("no preStop sleep: the node would stop taking requests before the Service's endpoints know")
	}
	grace, ok := get(pod, "terminationGracePeriodSeconds").(int)
	if !ok {
		t.Fatal("no terminationGracePeriodSeconds")
	}
	margin := time.Duration(grace-preStop)*time.Second - s.DrainTimeout
	if margin < 5*time.Second || margin > 30*time.Second {
		t.Errorf("terminationGracePeriodSeconds %ds = preStop %ds + drain_timeout %v + %v: want a margin of 5s to 30s",
			grace, preStop, s.DrainTimeout, margin)
	}
	psc := get(pod, "securityContext")
	for _, k := range []string{"runAsUser", "runAsGroup", "fsGroup"} {
		if id, ok := get(psc, k).(int); !ok || id == 0 {
			t.Errorf("pod securityContext.%s = %v: want the image's non-root id", k, get(psc, k))
		}
	}
	if get(psc, "runAsNonRoot") != true {
		t.Errorf("pod securityContext.runAsNonRoot = %v, want true", get(psc, "runAsNonRoot"))
	}
	if get(c, "securityContext", "allowPrivilegeEscalation") != false {
		t.Errorf("container securityContext.allowPrivilegeEscalation = %v, want false", get(c, "securityContext", "allowPrivilegeEscalation"))
	}
}

// TestGroveArgsCheckCatchesAnUnknownFlag shows the check above fails on a
// flag grove serve does not take.
func TestGroveArgsCheckCatchesAnUnknownFlag(t *testing.T) {
	sts, groveYAML := groveStatefulSet(t)
	c := get(sts.doc, "spec", "template", "spec", "containers", 0)
	args := append(serverArgs(t, c, groveYAML), "--cluster-node=grove-1")
	if _, err := conf.ParseServerArgs(args); err == nil || !strings.Contains(err.Error(), "cluster-node") {
		t.Fatalf("ParseServerArgs(%q) = %v, want an unknown flag error", args, err)
	}
}
