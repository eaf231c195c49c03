package urlspace

import (
	"slices"
	"testing"
)

func TestReservedPath(t *testing.T) {
	for path, want := range map[string]bool{
		"/api/predict/m": true, "/api": true, "/api/": true, "/v1/models": true, "/v2/models/x/infer": true,
		"/debug/pprof/": true, "/ui/": true, "/ui": true,
		"/": false, "": false, "/apix/predict": false, "/v10/a/1/score": false, "/games/arena/1/score": false,
		"/contracts/list": false, "/API/predict/m": false, "/x/api/1/score": false,
	} {
		if got := ReservedPath(path); got != want {
			t.Errorf("ReservedPath(%q) = %v, want %v", path, got, want)
		}
	}
}

func TestReservedIsACopy(t *testing.T) {
	r := Reserved()
	if !slices.IsSorted(r) || !slices.Equal(r, []string{"api", "debug", "ui", "v1", "v2"}) {
		t.Fatalf("Reserved() = %v", r)
	}
	r[0] = "x"
	if !IsReserved("api") || IsReserved("x") {
		t.Error("changing the returned slice changed the reserved segments")
	}
}
