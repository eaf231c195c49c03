package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/groveml/grove/conf/modelconfig"
)

func TestRulesOfAreTheContractsAndModelEntriesWithOutcomes(t *testing.T) {
	cfg, err := modelconfig.Parse([]byte(`{"model_metadata": [{"model_path": "a/"},
  {"model_path": "b/", "outcomes": {"label": "value", "kind": "numeric", "window": "1h"}}],
 "contracts": [
  {"organization": "ads", "project": "p", "contract_number": 1, "outcomes": {"label": "click", "window": "30m"},
   "servables": [{"release_version": "v1", "model_path": "a/", "logging": {"log_level": "FULL"}}]},
  {"organization": "ads", "project": "q", "contract_number": 1,
   "servables": [{"release_version": "v1", "model_path": "a/"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	rules := rulesOf(cfg)
	if len(rules) != 2 {
		t.Fatalf("%d rules, want b/'s and ads/p/1's: %+v", len(rules), rules)
	}
	if r := rules[0]; r.ModelPath != "b/" || r.Contract != "" || r.Outcomes.Label != "value" || r.Outcomes.Window != time.Hour {
		t.Errorf("model entry rule %+v", r)
	}
	if r := rules[1]; r.Contract != "ads/p/1" || r.ModelPath != "" || r.Outcomes.Label != "click" || r.Outcomes.Window != 30*time.Minute {
		t.Errorf("contract rule %+v", r)
	}
}

func TestEvaluateWithoutKafkaBrokersSaysWhatItNeeds(t *testing.T) {
	var stderr bytes.Buffer
	if code := run([]string{"evaluate", "--bucket", "file://" + t.TempDir()}, &bytes.Buffer{}, &stderr); code != 2 {
		t.Fatalf("exit %d, want 2: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "grove evaluate needs kafka.brokers (--kafka-brokers)") {
		t.Errorf("stderr: %s", stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"evaluate", "-h"}, &bytes.Buffer{}, &stderr); code != 0 || !strings.Contains(stderr.String(), "usage: grove evaluate") ||
		!strings.Contains(stderr.String(), "-evaluate-state-dir") {
		t.Errorf("grove evaluate -h: exit %d\n%s", code, stderr.String())
	}
}
