package ba

import (
	"bufio"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
)

// readGolden returns the non-comment lines of testdata/golden/name, files
// written from rapidjson 1.1.0 and Abseil by TestOracle.
func readGolden(t *testing.T, name string) []string {
	t.Helper()
	f, err := os.Open("testdata/golden/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		if !strings.HasPrefix(sc.Text(), "# ") {
			lines = append(lines, sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

func TestGoldenNumberFormattingMatchesRapidjson(t *testing.T) {
	lines := readGolden(t, "dtoa.txt")
	for _, l := range lines {
		hexBits, want, _ := strings.Cut(l, " ")
		u, err := strconv.ParseUint(hexBits, 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(appendDouble(nil, math.Float64frombits(u))); got != want {
			t.Errorf("%s: got %s, rapidjson %s", hexBits, got, want)
		}
	}
	if len(lines) < 1000 {
		t.Fatalf("only %d golden lines", len(lines))
	}
}

func TestGoldenConversionsMatchAbseil(t *testing.T) {
	for _, l := range readGolden(t, "convert.txt") {
		f := strings.SplitN(l, "\t", 3)
		s, err := strconv.Unquote(f[1])
		if err != nil {
			t.Fatal(err)
		}
		if got := convertSummary(f[0], s); got != f[2] {
			t.Errorf("%s %s: got %s, Abseil %s", f[0], f[1], got, f[2])
		}
	}
}

func TestGoldenRequestsMatchSidecarParser(t *testing.T) {
	lines := readGolden(t, "requests.txt")
	for i := 0; i+1 < len(lines); i += 2 {
		doc, err := strconv.Unquote(lines[i])
		if err != nil {
			t.Fatal(err)
		}
		if got := requestSummary([]byte(doc)); !sameSummary(got, lines[i+1]) {
			t.Errorf("%s:\n got    %s\n oracle %s", lines[i], got, lines[i+1])
		}
	}
}
