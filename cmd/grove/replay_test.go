package main

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/groveml/grove/servables"
)

func TestReplayURLSendsInt64InputsExactly(t *testing.T) {
	ids, _ := servables.NewTensor("ids", servables.Int64, []int64{3})
	copy(ids.Int64s(), []int64{1<<53 + 1, math.MaxInt64, math.MinInt64})
	var req struct {
		Request []struct {
			Tensors []struct {
				TensorContent []string `json:"tensor_content"`
			} `json:"tensors"`
		} `json:"request"`
	}
	body := appendBARequest(nil, "m/", []servables.Tensor{ids}, nil)
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	got := req.Request[0].Tensors[0].TensorContent
	want := []string{"9007199254740993", "9223372036854775807", "-9223372036854775808"}
	if !slices.Equal(got, want) {
		t.Errorf("INT64 values sent as %q, want %q", got, want)
	}
}

func TestReplayURLPasswordNeverInMessages(t *testing.T) {
	status := http.StatusInternalServerError
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) }))
	defer srv.Close()
	withPassword := strings.Replace(srv.URL, "http://", "http://ops:hunter2@", 1)
	_, err := newRemote(t.Context(), withPassword, "", 5*time.Second, &serverClient{})
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "answered 500") {
		t.Errorf("a refusing server: %v, want its answer without the password", err)
	}
	status = http.StatusOK
	r, err := newRemote(t.Context(), withPassword+"/", "", 5*time.Second, &serverClient{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	if n := r.name(); strings.Contains(n, "hunter2") || !strings.Contains(n, "ops:") {
		t.Errorf("name %q, want the URL with its password masked", n)
	}
	for _, bad := range []string{"127.0.0.1:8080", "ftp://h/", "http://"} {
		if _, err := newRemote(t.Context(), bad, "", time.Second, &serverClient{}); err == nil || !strings.Contains(err.Error(), "http:// or https://") {
			t.Errorf("--url %q: %v, want an error naming the URL form", bad, err)
		}
	}
}
