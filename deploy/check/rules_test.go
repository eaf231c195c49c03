package check

import (
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

// ruleSelectors parses the PrometheusRule objects' groups with Prometheus's
// own rule file parser (as `promtool check rules` does) and returns, for
// each metric name the expressions select, the label names their matchers
// use.
func ruleSelectors(t *testing.T, ms []manifest) map[string][]string {
	t.Helper()
	out := map[string]map[string]bool{}
	n := 0
	for _, m := range ms {
		pr, ok := m.obj.(*monitoringv1.PrometheusRule)
		if !ok {
			continue
		}
		data, err := yaml.Marshal(map[string]any{"groups": pr.Spec.Groups})
		if err != nil {
			t.Fatal(err)
		}
		p := parser.NewParser(parser.Options{})
		groups, errs := rulefmt.Parse(data, false, model.UTF8Validation, p, slog.New(slog.DiscardHandler))
		for _, err := range errs {
			t.Errorf("%v: %v", m, err)
		}
		if groups == nil {
			continue
		}
		for _, g := range groups.Groups {
			for _, r := range g.Rules {
				n++
				expr, err := p.ParseExpr(r.Expr)
				if err != nil {
					t.Errorf("%s: %v", r.Alert, err)
					continue
				}
				if r.Alert == "" || r.Annotations["summary"] == "" || r.Labels["severity"] == "" {
					t.Errorf("rule %q: want an alert name, a severity label and a summary", r.Alert+r.Record)
				}
				parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
					vs, ok := node.(*parser.VectorSelector)
					if !ok {
						return nil
					}
					if out[vs.Name] == nil {
						out[vs.Name] = map[string]bool{}
					}
					for _, lm := range vs.LabelMatchers {
						if lm.Name != model.MetricNameLabel {
							out[vs.Name][lm.Name] = true
						}
					}
					return nil
				})
			}
		}
	}
	if n == 0 {
		t.Fatal("no alert rules found")
	}
	res := map[string][]string{}
	for name, ls := range out {
		res[name] = []string{}
		for l := range ls {
			res[name] = append(res[name], l)
		}
		sort.Strings(res[name])
	}
	return res
}

func TestAlertRulesParse(t *testing.T) {
	sel := ruleSelectors(t, loadManifests(t))
	for name := range sel {
		if !strings.HasPrefix(name, "grove_") {
			t.Errorf("a rule selects %q, which is not one of Grove's metrics", name)
		}
	}
	t.Logf("the rules select %v", sel)
}

// TestRuleParserRefusesMistakes shows the rule check fails on a bad
// expression, a bad duration and an unknown field.
func TestRuleParserRefusesMistakes(t *testing.T) {
	p := parser.NewParser(parser.Options{})
	for name, rules := range map[string]string{
		"bad expression": "groups: [{name: g, rules: [{alert: A, expr: 'rate(grove_ready[5m]'}]}]",
		"bad duration":   "groups: [{name: g, rules: [{alert: A, expr: grove_ready == 0, for: 10x}]}]",
		"unknown field":  "groups: [{name: g, rules: [{alert: A, expr: grove_ready == 0, fro: 10m}]}]",
	} {
		if _, errs := rulefmt.Parse([]byte(rules), false, model.UTF8Validation, p, slog.New(slog.DiscardHandler)); len(errs) == 0 {
			t.Errorf("%s: parsed without an error", name)
		}
	}
}

// TestOperationsDocCoversTheAlertsAndProbes: docs/operations.md, the
// operators' guide the issue names, has the sections it asks for and
// lists every example alert rule and both probes, so that a rule added
// to monitoring.yaml without a word there fails.
func TestOperationsDocCoversTheAlertsAndProbes(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	for _, h := range []string{"## Probes", "## Metrics to watch", "## Tracing", "## Upgrades and rollbacks", "## Kubernetes"} {
		if !strings.Contains(text, "\n"+h) {
			t.Errorf("docs/operations.md has no section %q", h)
		}
	}
	for _, p := range []string{"`GET /healthz`", "`GET /readyz`", "terminationGracePeriodSeconds", "drain_timeout", "preStop"} {
		if !strings.Contains(text, p) {
			t.Errorf("docs/operations.md does not mention %s", p)
		}
	}
	n := 0
	for _, m := range loadManifests(t) {
		pr, ok := m.obj.(*monitoringv1.PrometheusRule)
		if !ok {
			continue
		}
		for _, g := range pr.Spec.Groups {
			for _, r := range g.Rules {
				n++
				if r.Alert != "" && !strings.Contains(text, "`"+r.Alert+"`") {
					t.Errorf("alert %s (%s) is not listed in docs/operations.md", r.Alert, m)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no alert rules found")
	}
}
