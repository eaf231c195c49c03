package main

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a bytes.Buffer safe for a logger and a test to share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestWarnInsecureWarnsAtStartAndEveryPeriod(t *testing.T) {
	var out lockedBuffer
	c := warnInsecure(slog.New(slog.NewTextHandler(&out, nil)), 20*time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- c.execute() }()
	deadline := time.Now().Add(5 * time.Second)
	for strings.Count(out.String(), "WITHOUT AUTHENTICATION") < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than 3 warnings after 5s:\n%s", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.interrupt(t.Context())
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "level=WARN") {
		t.Errorf("the warning is not at level WARN:\n%s", out.String())
	}
}
