package ba

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/groveml/grove/servables"
)

// TestOracle compares the codec with testdata/oracle/oracle.cc, a reference
// built from rapidjson 1.1.0 and Abseil (the sidecar's libraries). It runs
// only when BA_ORACLE names the compiled oracle; on Debian 12:
//
//	apt-get install rapidjson-dev libabsl-dev
//	g++ -O2 -std=c++17 -o /tmp/ba-oracle api/ba/testdata/oracle/oracle.cc \
//	    $(pkg-config --cflags --libs absl_strings absl_str_format)
//	BA_ORACLE=/tmp/ba-oracle go test ./api/ba -run TestOracle -v
//
// BA_ORACLE_N scales the number of random cases (default 200000), and
// BA_ORACLE_UPDATE=1 rewrites the golden files under testdata/golden that
// TestGolden checks without the oracle.
func TestOracle(t *testing.T) {
	bin := os.Getenv("BA_ORACLE")
	if bin == "" {
		t.Skip("BA_ORACLE is not set")
	}
	n := 200000
	if s := os.Getenv("BA_ORACLE_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	update := os.Getenv("BA_ORACLE_UPDATE") != ""
	r := rand.New(rand.NewSource(1))
	t.Run("dtoa", func(t *testing.T) {
		var in bytes.Buffer
		var vals []float64
		for i := 0; len(vals) < n; i++ {
			v := randomDouble(r, i)
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			vals = append(vals, v)
			fmt.Fprintf(&in, "%016x\n", math.Float64bits(v))
		}
		out := runOracle(t, bin, "dtoa", in.Bytes())
		bad := 0
		for i, v := range vals {
			if got := string(appendDouble(nil, v)); got != out[i] {
				if bad++; bad <= 10 {
					t.Errorf("%016x (%v): got %s, rapidjson %s", math.Float64bits(v), v, got, out[i])
				}
			}
		}
		t.Logf("%d doubles, %d differ", len(vals), bad)
		if update {
			var g bytes.Buffer
			g.WriteString("# float64 bits, then rapidjson 1.1.0 Writer::Double output (from testdata/oracle)\n")
			for i := 0; i < 4000 && i < len(vals); i++ {
				fmt.Fprintf(&g, "%016x %s\n", math.Float64bits(vals[i]), out[i])
			}
			writeGolden(t, "dtoa.txt", g.Bytes())
		}
	})
	t.Run("convert", func(t *testing.T) {
		dtypes := []string{"FLOAT", "DOUBLE", "INT8", "INT16", "INT32", "INT64"}
		var in bytes.Buffer
		type tc struct{ dt, s string }
		var cases []tc
		add := func(dt, s string) {
			cases = append(cases, tc{dt, s})
			fmt.Fprintf(&in, "%s\n%d\n%s", dt, len(s), s)
		}
		for _, s := range conversionSeeds {
			for _, dt := range dtypes {
				add(dt, s)
			}
		}
		seeded := len(cases)
		for i := 0; i < n; i++ {
			add(dtypes[r.Intn(len(dtypes))], randomNumberText(r))
		}
		out := runOracle(t, bin, "convert", in.Bytes())
		bad := 0
		for i, c := range cases {
			if got := convertSummary(c.dt, c.s); got != out[i] {
				if bad++; bad <= 20 {
					t.Errorf("%s %q: got %s, oracle %s", c.dt, c.s, got, out[i])
				}
			}
		}
		t.Logf("%d conversions, %d differ", len(cases), bad)
		if update {
			var g bytes.Buffer
			g.WriteString("# data type, quoted tensor_content string, then the Abseil conversion result (from testdata/oracle)\n")
			for i := 0; i < seeded+2000 && i < len(cases); i++ {
				fmt.Fprintf(&g, "%s\t%s\t%s\n", cases[i].dt, strconv.Quote(cases[i].s), out[i])
			}
			writeGolden(t, "convert.txt", g.Bytes())
		}
	})
	t.Run("request", func(t *testing.T) {
		var in bytes.Buffer
		var docs [][]byte
		add := func(d []byte) {
			docs = append(docs, d)
			fmt.Fprintf(&in, "%d\n", len(d))
			in.Write(d)
		}
		seeds := requestSeeds()
		for _, s := range seeds {
			add(s)
		}
		// Inputs the fuzzer found interesting, when BA_ORACLE_CORPUS names a
		// corpus directory (e.g. $(go env GOCACHE)/fuzz/.../FuzzParseRequest).
		if dir := os.Getenv("BA_ORACLE_CORPUS"); dir != "" {
			files, _ := filepath.Glob(filepath.Join(dir, "*"))
			for _, f := range files {
				data, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				_, lit, _ := strings.Cut(strings.TrimSpace(string(data)), "[]byte(")
				doc, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				add([]byte(doc))
			}
			t.Logf("%d corpus files", len(files))
		}
		for i := 0; i < n; i++ {
			d := append([]byte(nil), seeds[r.Intn(len(seeds))]...)
			for k := 1 + r.Intn(3); k > 0; k-- {
				d = mutate(r, d)
			}
			add(d)
		}
		out := runOracle(t, bin, "request", in.Bytes())
		bad, skipped, compared := 0, 0, 0
		kinds := map[string]int{}
		for i, d := range docs {
			want := out[i]
			for _, part := range strings.Split(want, " | ") {
				if k, _, ok := strings.Cut(part, "\t"); ok && strings.HasPrefix(k, "E ") {
					part = "E " + strings.SplitN(part, "\t", 2)[1]
				}
				if strings.HasPrefix(part, "T ") {
					part = "T"
				}
				if len(part) > 70 {
					part = part[:70]
				}
				kinds[part]++
			}
			if strings.HasPrefix(want, "S ") {
				if strings.HasPrefix(want, "S rapidjson assertion") {
					t.Logf("rapidjson itself fails an assertion on %q: %s", d, want)
				}
				skipped++
				continue
			}
			got := requestSummary(d)
			if !sameSummary(got, want) {
				if bad++; bad <= 20 {
					t.Errorf("%q:\n got    %s\n oracle %s", d, got, want)
				}
			}
			compared++
		}
		t.Logf("%d documents compared, %d skipped (Grove-defined behaviour), %d differ", compared, skipped, bad)
		if update {
			var g bytes.Buffer
			g.WriteString("# pairs of lines: a quoted request document, then the sidecar-equivalent summary (from testdata/oracle)\n")
			for i, kept := 0, 0; i < len(docs) && kept < 1500; i++ {
				if strings.HasPrefix(out[i], "S ") || len(docs[i]) > 600 && i >= len(seeds) {
					continue
				}
				fmt.Fprintf(&g, "%s\n%s\n", strconv.Quote(string(docs[i])), out[i])
				kept++
			}
			writeGolden(t, "requests.txt", g.Bytes())
		}
		if testing.Verbose() {
			keys := make([]string, 0, len(kinds))
			for k := range kinds {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				t.Logf("%7d %s", kinds[k], k)
			}
		}
	})
}

func writeGolden(t *testing.T, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile("testdata/golden/"+name, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func runOracle(t *testing.T, bin, mode string, in []byte) []string {
	t.Helper()
	cmd := exec.Command(bin, mode)
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	_, _ = io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("oracle %s: %v", mode, err)
	}
	return lines
}

// randomDouble mixes bit patterns, widened float32s and short decimals.
func randomDouble(r *rand.Rand, i int) float64 {
	switch i % 5 {
	case 0:
		return math.Float64frombits(r.Uint64())
	case 1:
		return float64(math.Float32frombits(r.Uint32()))
	case 2:
		return float64(r.Float32())
	case 3:
		v, _ := strconv.ParseFloat(fmt.Sprintf("%de%d", r.Intn(100000), r.Intn(60)-30), 64)
		return v
	}
	return r.NormFloat64() * math.Pow(10, float64(r.Intn(40)-20))
}

// oracleEsc mirrors esc in oracle.cc.
func oracleEsc(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '|' || c == '\\' {
			fmt.Fprintf(&b, "\\x%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

func float32Repr(f float32) string {
	if f != f {
		if math.Signbit(float64(f)) {
			return "-nan"
		}
		return "nan"
	}
	return fmt.Sprintf("%08x", math.Float32bits(f))
}

func float64Repr(f float64) string {
	if f != f {
		if math.Signbit(f) {
			return "-nan"
		}
		return "nan"
	}
	return fmt.Sprintf("%016x", math.Float64bits(f))
}

// convertSummary runs one conversion through ParseRequest, as the oracle's
// convert mode does with Convert<T>.
func convertSummary(dt, s string) string {
	body := `{"request":[{"model_path":"m","tensors":[{"data_type":"` + dt +
		`","tensor_shape":[1],"tensor_content":[` + string(appendString(nil, s)) + `]}]}]}`
	req, err := ParseOptions{}.ParseRequest([]byte(body))
	if err != nil {
		return "BATCH " + err.Description
	}
	it := req.Items[0]
	if e := cmp.Or(it.Err, it.InputErr); e != nil {
		const prefix = "Input Tensor Conversion Error. Message: Model m encounters tensor parsing error: "
		return "ERR " + strings.TrimPrefix(e.Description, prefix)
	}
	return "OK " + valueReprs(it.Inputs[0])
}

func valueReprs(t servables.Tensor) string {
	var parts []string
	switch t.DType {
	case servables.Float32:
		for _, v := range t.Float32s() {
			parts = append(parts, float32Repr(v))
		}
	case servables.Float64:
		for _, v := range t.Float64s() {
			parts = append(parts, float64Repr(v))
		}
	default:
		for i := 0; i < t.Len(); i++ {
			parts = append(parts, strconv.FormatFloat(t.Float64At(i), 'f', -1, 64))
		}
		if t.DType == servables.Int64 {
			parts = parts[:0]
			for _, v := range t.Int64s() {
				parts = append(parts, strconv.FormatInt(v, 10))
			}
		}
	}
	return strings.Join(parts, ",")
}

// requestSummary mirrors summarize in oracle.cc.
func requestSummary(body []byte) string {
	req, err := ParseOptions{}.ParseRequest(body)
	if err != nil {
		return "B " + oracleEsc(err.Description)
	}
	var b strings.Builder
	b.WriteString("R")
	for _, it := range req.Items {
		b.WriteString(" | ")
		if e := cmp.Or(it.Err, it.InputErr); e != nil {
			b.WriteString("E " + oracleEsc(it.ModelPath) + "\t" + oracleEsc(e.Description))
			continue
		}
		b.WriteString("T " + oracleEsc(it.ModelPath))
		for _, t := range it.Inputs {
			dims := make([]string, len(t.Shape))
			for i, d := range t.Shape {
				dims[i] = strconv.FormatInt(d, 10)
			}
			fmt.Fprintf(&b, " %s:%s:%s:%s", oracleEsc(t.Name), t.DType, strings.Join(dims, ","), valueReprs(t))
		}
	}
	return b.String()
}

// sameSummary compares item by item, ignoring items the oracle skipped.
func sameSummary(got, want string) bool {
	if got == want {
		return true
	}
	g, w := strings.Split(got, " | "), strings.Split(want, " | ")
	if len(g) != len(w) {
		return false
	}
	for i := range g {
		if g[i] != w[i] && !strings.HasPrefix(w[i], "S ") {
			return false
		}
	}
	return true
}

// conversionSeeds are tensor_content strings on the edges of Abseil's rules.
var conversionSeeds = []string{
	"", " ", "0", "-0", "+0", "+-0", "-+0", "1", " 1 ", "\t1\n", "\v1\f", "\r-1\r", "1 1", "01", "007",
	"127", "128", "-128", "-129", "255", "32767", "32768", "-32768", "-32769",
	"2147483647", "2147483648", "-2147483648", "-2147483649", "4294967296",
	"9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
	"99999999999999999999", "1.0", "1.", ".5", "5.", ".", "-.", "-.5", "1e5", "1E5", "1e+5", "1e-5", "1e", "1e+",
	"1e-", "e5", "1.5e3", "0x10", "0X1A", "0x1p3", "0x1P-2", "0x.8", "0x1.", "0x.", "0x", "0xg", "-0x10", "+0x10",
	"0x1p", "0x1p+", "0x1_0", "1_000", "inf", "INF", "Inf", "-inf", "+inf", "infinity", "Infinity", "-INFINITY",
	"infinit", "infinityy", "in", "nan", "NaN", "-nan", "+nan", "nan()", "nan(abc_123)", "nan(", "nan)", "nan(a b)",
	"nanx", "1e38", "3.4028235e38", "3.4028236e38", "3.5e38", "-3.5e38", "1e39", "1e308", "1.7976931348623157e308",
	"1.8e308", "1e309", "-1e309", "1e-45", "1e-46", "1.4e-45", "7e-46", "1e-320", "5e-324", "2e-324", "1e-400",
	"0.1", "0.30000000000000004", "3.14", "0.454920", "-0.25752", "123456789012345678901234567890",
	"0.000000000000000000000000000001", "1e99999999999", "1e-99999999999", "0e99999999", "٣", "１", "1\u00a0",
	"\u00a01", "0.1f", "1,5", "--1", "++1", "+", "-", "1-", "1+1", "0b101", "0o17", "0017", "1e0x1", "infe1",
}

// randomNumberText builds strings near the numeric grammars.
func randomNumberText(r *rand.Rand) string {
	const alphabet = "0123456789012345678901234567890123456789+-.eExXpPinfaINFAty() \t_g"
	switch r.Intn(6) {
	case 4, 5: // decimals near the exact fast path's limits
		digits := make([]byte, 1+r.Intn(20))
		for i := range digits {
			digits[i] = byte('0' + r.Intn(10))
		}
		if r.Intn(2) == 0 {
			digits[0] = '0'
		}
		p := r.Intn(len(digits) + 1)
		s := string(digits[:p]) + "." + string(digits[p:])
		if r.Intn(3) == 0 {
			s += "e" + strconv.Itoa(r.Intn(70)-35)
		}
		if r.Intn(2) == 0 {
			s = "-" + s
		}
		return s
	case 0:
		return conversionSeeds[r.Intn(len(conversionSeeds))]
	case 1:
		return strconv.FormatInt(r.Int63()>>r.Intn(63)*int64(1-2*r.Intn(2)), 10)
	case 2:
		s := []byte(conversionSeeds[r.Intn(len(conversionSeeds))])
		for k := 1 + r.Intn(3); k > 0; k-- {
			i := 0
			if len(s) > 0 {
				i = r.Intn(len(s) + 1)
			}
			c := alphabet[r.Intn(len(alphabet))]
			switch r.Intn(3) {
			case 0:
				s = append(s[:i], append([]byte{c}, s[i:]...)...)
			case 1:
				if i < len(s) {
					s = append(s[:i], s[i+1:]...)
				}
			default:
				if i < len(s) {
					s[i] = c
				}
			}
		}
		return string(s)
	}
	b := make([]byte, 1+r.Intn(12))
	for i := range b {
		b[i] = alphabet[r.Intn(len(alphabet))]
	}
	return string(b)
}

// requestSeeds are the starting documents of the differential fuzzing.
func requestSeeds() [][]byte {
	var seeds [][]byte
	for _, s := range fuzzSeeds {
		seeds = append(seeds, []byte(s))
	}
	return seeds
}

// jsonTokens are spliced into documents by mutate.
var jsonTokens = []string{
	`null`, `true`, `false`, `0`, `-0`, `1`, `-1`, `2`, `1.5`, `1e2`, `2.0`, `1e309`, `-1e309`, `1e-400`,
	`18446744073709551616`, `9223372036854775808`, `-9223372036854775809`, `2147483648`, `4294967296`,
	`179769313486231570000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000`,
	`0.0000000000000000000000000000000000000000001e330`, `1.00000000000000000001e308`,
	`""`, `"FLOAT"`, `"DOUBLE"`, `"INT8"`, `"INT16"`, `"INT32"`, `"INT64"`, `"float"`, `"m"`, `"1"`, `" 1 "`,
	`"+1"`, `"1e5"`, `"0x1p3"`, `"nan"`, `"inf"`, `"128"`, `"-129"`, `"\u00e9"`, `"\ud83d\ude00"`, `"\ud800"`,
	`"\ud800\u0041"`, `"\x"`, `"\u12G4"`, `"a\"b"`, `"tab\there"`, `"é"`, "\"\xff\"", "\"\xed\xa0\x80\"", `[]`, `{}`, `[1]`,
	`[2,1]`, `[0]`, `[-1]`, `[1.0]`, `["1"]`, `[1,`, `{"a":1}`, `{"a"}`, `{"a":}`, `[,]`, `[1,]`, `{,}`, `{"a":1,}`,
	`"request"`, `"model_path"`, `"tensors"`, `"tensor_name"`, `"data_type"`, `"tensor_shape"`, `"tensor_content"`,
	`"requ\u0065st"`, `"configs"`, `{"k":"v"}`, `{"k":1}`, ` `, "\n", `,`, `:`, `[`, `]`, `{`, `}`, `"`, `\`,
	`tru`, `nul`, `NaN`, `Infinity`, `+1`, `.5`, `1.`, `1e`, `1e+`, `-`, `01`, `/* */`, `//`,
}

// mutate applies one random edit: a byte edit, or splicing a token at a
// token boundary.
func mutate(r *rand.Rand, d []byte) []byte {
	if len(d) == 0 {
		return []byte(jsonTokens[r.Intn(len(jsonTokens))])
	}
	i := r.Intn(len(d) + 1)
	switch r.Intn(6) {
	case 0: // delete a byte
		if i < len(d) {
			return append(d[:i], d[i+1:]...)
		}
	case 1: // insert a structural byte
		const structural = "{}[]\",: 0-.e\\"
		return append(d[:i], append([]byte{structural[r.Intn(len(structural))]}, d[i:]...)...)
	case 2, 3: // replace a value (from a delimiter to the next) with a token
		starts := []int{}
		for k, c := range d {
			if c == ':' || c == '[' || c == ',' {
				starts = append(starts, k+1)
			}
		}
		if len(starts) == 0 {
			break
		}
		s := starts[r.Intn(len(starts))]
		e := s
		depth := 0
		inStr := false
		for e < len(d) {
			c := d[e]
			if inStr {
				if c == '\\' {
					e++
				} else if c == '"' {
					inStr = false
				}
			} else if c == '"' {
				inStr = true
			} else if c == '[' || c == '{' {
				depth++
			} else if c == ']' || c == '}' {
				if depth == 0 {
					break
				}
				depth--
			} else if c == ',' && depth == 0 {
				break
			}
			e++
		}
		if e > len(d) {
			e = len(d)
		}
		tok := jsonTokens[r.Intn(len(jsonTokens))]
		return append(append(append([]byte(nil), d[:s]...), tok...), d[e:]...)
	case 4: // duplicate a slice
		j := r.Intn(len(d) + 1)
		if j < i {
			i, j = j, i
		}
		k := r.Intn(len(d) + 1)
		return append(append(append([]byte(nil), d[:k]...), d[i:j]...), d[k:]...)
	}
	tok := jsonTokens[r.Intn(len(jsonTokens))]
	return append(append(append([]byte(nil), d[:i]...), tok...), d[i:]...)
}
