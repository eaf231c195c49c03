package node_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/groveml/grove/actors/node"
	"github.com/groveml/grove/cluster/coord"
	"github.com/groveml/grove/cluster/forward"
	"github.com/groveml/grove/conf/bucket/file"
)

// validConfig is a Config New accepts; New needs no etcd to check it.
func validConfig(t *testing.T) node.Config {
	t.Helper()
	b, err := file.Open("file://" + t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fc := forward.NewClient(forward.ClientOptions{})
	t.Cleanup(fc.Close)
	return node.Config{Client: &coord.Client{}, Name: "n1", Advertise: "127.0.0.1:1", BudgetBytes: 1 << 30,
		LeaseTTL: 2 * time.Second, MemoryFactor: 2, Bucket: b, Forward: fc}
}

// New refuses a memory factor that is not a finite number above 0 at
// once, naming the setting, rather than return an agent whose every
// session then fails in Run.
func TestNewRefusesAMemoryFactorNotAFinitePositiveNumber(t *testing.T) {
	if _, err := node.New(validConfig(t)); err != nil {
		t.Fatalf("a valid config: %v", err)
	}
	for _, f := range []float64{0, -1, math.NaN(), math.Inf(1), math.Inf(-1)} {
		cfg := validConfig(t)
		cfg.MemoryFactor = f
		_, err := node.New(cfg)
		if err == nil || !strings.Contains(err.Error(), "cluster.memory_factor") {
			t.Errorf("New with MemoryFactor %v: %v, want an error naming cluster.memory_factor", f, err)
		}
	}
}

// New refuses a lease TTL that is not above 0 at once, naming the
// setting, rather than return an agent whose every join then fails in
// Run.
func TestNewRefusesALeaseTTLNotAbove0(t *testing.T) {
	for _, ttl := range []time.Duration{0, -time.Second} {
		cfg := validConfig(t)
		cfg.LeaseTTL = ttl
		_, err := node.New(cfg)
		if err == nil || !strings.Contains(err.Error(), "cluster.lease_ttl") {
			t.Errorf("New with LeaseTTL %v: %v, want an error naming cluster.lease_ttl", ttl, err)
		}
	}
}
