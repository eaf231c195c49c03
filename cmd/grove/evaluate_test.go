package main

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/groveml/grove/conf/bucket/file"
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

// grove evaluate reads, beside the model config, the contract state the
// servers write, so that a release's since_valid window starts when it
// became valid (again, after a rollback cleared): the stamp of a valid
// release, none for one that is not valid; a state that is not one is an
// error (the last one read stays in use).
func TestTheStandaloneEvaluatorReadsWhenEachReleaseBecameValid(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("model_config.json", `{"model_metadata": [{"model_path": "a/"}]}`)
	write("model_config.state.json", `{"contracts": {"ads/p/1": {"v1": {"valid_since": "2026-05-01T12:00:00Z"}, "v2": {}}}}`)
	b, err := file.Open("file://" + dir)
	if err != nil {
		t.Fatal(err)
	}
	r := &bucketRules{b: b, path: "model_config.json", interval: time.Hour, log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.poll(ctx) }()
	for _, ok := r.get(); !ok; _, ok = r.get() {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if got, ok := r.validSince("ads/p/1", "v1"); !ok || !got.Equal(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)) {
		t.Errorf("v1: %v %v, want valid since 2026-05-01T12:00:00Z", got, ok)
	}
	if _, ok := r.validSince("ads/p/1", "v2"); ok {
		t.Error("v2, not valid, has a valid_since")
	}
	write("model_config.state.json", `{"contracts": 7}`)
	if _, err := r.readState(context.Background()); err == nil {
		t.Error("a state that is not one parsed")
	}
}
