package manage

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/conf/bucket/file"
	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/transport/httpserver"
)

// bucketManager is a memManager whose config edits read, edit and write
// the model config object of a bucket with bucket.Update, as
// actors.System.EditConfig does with the limit modelconfig.MaxConfigBytes.
type bucketManager struct {
	memManager
	b     bucket.Writer
	limit int64
}

func (m *bucketManager) EditConfig(ctx context.Context, edit func(*modelconfig.Config) error) (*modelconfig.Config, error) {
	var written *modelconfig.Config
	err := bucket.Update(ctx, m.b, "model_config.json", m.limit, func(current []byte, _ bool) ([]byte, error) {
		cfg, err := modelconfig.Parse(current)
		if err != nil {
			return nil, err
		}
		if err := edit(cfg); err != nil {
			return nil, err
		}
		data, err := cfg.Validate()
		written = cfg
		return data, err
	})
	if err != nil {
		return nil, err
	}
	m.cfg = *written
	return written, nil
}

// An edit that would make the model config larger than its limit answers
// 413 with the limit, not 500, and leaves it unchanged. (The limit is
// 64 MiB; here 4 KiB, to make the config quickly.)
func TestAnEditThatWouldGrowTheModelConfigPastItsLimitAnswers413(t *testing.T) {
	dir := t.TempDir()
	// A model whose warm-up request brings the config to 200 bytes under
	// the limit.
	const limit = 4 << 10
	entry := func(warmUp int) string {
		return fmt.Sprintf(`{"model_metadata": [{"model_path": "big/", "warm_up_batch_request_json": %q}]}`, `"`+strings.Repeat("x", warmUp)+`"`)
	}
	cfg, err := modelconfig.Parse([]byte(entry(1)))
	if err != nil {
		t.Fatal(err)
	}
	small, err := cfg.Validate()
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err = modelconfig.Parse([]byte(entry(limit - 200 - len(small)))); err != nil {
		t.Fatal(err)
	}
	before, err := cfg.Validate()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model_config.json"), before, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := file.Open("file://" + dir)
	if err != nil {
		t.Fatal(err)
	}
	m := &bucketManager{memManager: memManager{cfg: *cfg, metrics: map[string]map[string]float64{}}, b: b, limit: limit}
	s := serve(m, httpserver.Options{Registerer: prometheus.NewRegistry()})

	release := `{"path": "m/", "fqrv": {"contract": {"organization": "ads", "project": "p", "contract_number": 1}, "release_version": "v1"}}`
	code, body := call(t, s, "POST", "/servable", release)
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "the new content of model_config.json is larger than its limit of 4 KiB") {
		t.Errorf("POST /servable past the limit: HTTP %d %s", code, body)
	}
	if after, err := os.ReadFile(filepath.Join(dir, "model_config.json")); err != nil || string(after) != string(before) {
		t.Errorf("the model config changed: %v", err)
	}
}
