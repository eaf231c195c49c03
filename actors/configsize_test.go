package actors

import (
	"strings"
	"testing"
	"testing/synctest"

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
