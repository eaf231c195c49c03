package actors

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/conf/modelconfig"
)

// padded returns cfg with spaces appended up to size bytes.
func padded(cfg string, size int) string {
	return cfg + strings.Repeat(" ", size-len(cfg))
}

func TestSystemRejectsAModelConfigLargerThanItsLimit(t *testing.T) {
	const limit = modelconfig.MaxConfigBytes
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": version(1), "b/": version(2)})
		defer w.stop()
		synctest.Wait()

		w.setConfig(padded(configJSON(entry("a/", "", ""), entry("b/", "", "")), limit+1))
		st := w.sys.Status()
		want := "reading model config model_config.json from mem://test: object model_config.json in mem://test is larger than its limit of 64 MiB"
		if st.Config.LastError != want {
			t.Fatalf("config error\n %q\nwant\n %q", st.Config.LastError, want)
		}
		if len(st.Models) != 1 {
			t.Errorf("the config over the limit was applied: %d models", len(st.Models))
		}
		if got := w.metric("grove_config_polls_total", map[string]string{"result": "invalid"}); got != 1 {
			t.Errorf("invalid polls = %v, want 1", got)
		}
		if res := w.infer("a/", 1); res.Err != nil {
			t.Fatalf("the model of the previous config is not served: %v", res.Err)
		}

		w.setConfig(padded(configJSON(entry("a/", "", ""), entry("b/", "", "")), limit))
		if st := w.sys.Status(); st.Config.LastError != "" {
			t.Fatalf("a config of exactly the limit was refused: %s", st.Config.LastError)
		}
		if res := w.infer("b/", 1); res.Err != nil {
			t.Fatalf("the model of the config at the limit is not served: %v", res.Err)
		}
	})
}

// An edit that would make the model config larger than its limit is
// refused with a *bucket.ContentTooLargeError naming the limit (the
// management API answers it 413), and the config in the bucket and in
// force stay as they were.
func TestAnEditThatWouldGrowTheModelConfigPastItsLimitIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": version(1)})
		defer w.stop()
		synctest.Wait()
		before := w.b.get("model_config.json")

		_, err := w.sys.EditConfig(context.Background(), func(c *modelconfig.Config) error {
			c.Models[0].WarmUpJSON = `"` + strings.Repeat("x", modelconfig.MaxConfigBytes) + `"`
			return nil
		})
		var tooLarge *bucket.ContentTooLargeError
		if !errors.As(err, &tooLarge) || err.Error() != "updating model_config.json in mem://test: the new content of model_config.json is larger than its limit of 64 MiB" {
			t.Fatalf("EditConfig past the limit: %v", err)
		}
		if after := w.b.get("model_config.json"); !bytes.Equal(after, before) {
			t.Errorf("the model config in the bucket changed: %d bytes", len(after))
		}
		if res := w.infer("a/", 1); res.Err != nil {
			t.Errorf("the model is no longer served: %v", res.Err)
		}
	})
}
