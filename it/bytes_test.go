package it

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	graphpipe "github.com/oracle/graphpipe-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/groveml/grove/api/oip/oippb"
	"github.com/groveml/grove/logging"
	"github.com/groveml/grove/logging/kafkatest"
)

// BYTES and string features end to end, against the real binary, with the
// example game_score model (examples/models/make_game_model.py): ONNX with
// STRING inputs and a STRING output.

// seedScoreRequest is ForestFlow's own gaming example of its score API,
// as its documentation gives it (String name, category; Float64 hp,
// attack, defence), text and whitespace unchanged.
func seedScoreRequest(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(), "api", "forestflow", "testdata", "gaming_request.json"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// gameRow is one row of the game model's input.
type gameRow struct {
	name, category      string
	hp, attack, defence float64
}

var seedRows = []gameRow{{"human1", "human", 67.37, 25.2, 80.6}, {"monster16", "monster", 76.5, 62, 33.9}}

// gameWant computes the game model's outputs for a row from the formula
// make_game_model.py documents, independently of Grove and ONNX Runtime.
func gameWant(r gameRow) (score float64, side string) {
	bias := map[string]float64{"human": 1.5, "monster": -0.5, "elf": 0.75}[r.category]
	side, ok := map[string]string{"human": "friend", "elf": "friend", "monster": "foe"}[r.category]
	if !ok {
		side = "unknown"
	}
	return 0.02*r.hp + 0.05*r.attack - 0.01*r.defence + bias, side
}

func wantFor(rows []gameRow) ([]float64, []string) {
	var scores []float64
	var sides []string
	for _, r := range rows {
		s, d := gameWant(r)
		scores, sides = append(scores, s), append(sides, d)
	}
	return scores, sides
}

// framed writes elements in OIP's BYTES binary form.
func framed(elems ...string) []byte {
	var b []byte
	for _, e := range elems {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(e)))
		b = append(b, e...)
	}
	return b
}

// unframe splits OIP BYTES binary data.
func unframe(t *testing.T, b []byte) []string {
	t.Helper()
	var out []string
	for len(b) > 0 {
		if len(b) < 4 || int(binary.LittleEndian.Uint32(b)) > len(b)-4 {
			t.Fatalf("bad BYTES framing % x", b)
		}
		n := int(binary.LittleEndian.Uint32(b))
		out, b = append(out, string(b[4:4+n])), b[4+n:]
	}
	return out
}

// gameBucket serves game_score/ directly and through contract games/arena/1.
func gameBucket(t *testing.T) *dirBucket {
	t.Helper()
	model, err := os.ReadFile(filepath.Join(repoRoot(), "examples", "bucket", "game_score", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	b := newDirBucket(t)
	b.Put(t, "game_score/model.onnx", model)
	b.Put(t, "model_config.json", []byte(`{"model_metadata": [{"model_path": "game_score/", "max_batch_rows": 64, "max_queue_delay_us": 100000}],
 "contracts": [{"organization": "games", "project": "arena", "contract_number": 1,
   "servables": [{"release_version": "v1", "model_path": "game_score/", "logging": {"log_level": "FULL", "key_features": ["playerid"]}}]}]}`))
	return b
}

// Budget: 30 s.
func TestBytesAndStringsEndToEnd(t *testing.T) {
	t.Parallel()
	emb := startBroker(t, "127.0.0.1:0")
	g := startGrove(t, gameBucket(t).URL(), nil, writeServerConfig(t, kafkaConfig(emb.Addr(), "proto", ""))...)
	wantScores, wantSides := wantFor(seedRows)
	nums := []float64{67.37, 25.2, 80.6, 76.5, 62, 33.9}
	logged := 0

	t.Run("ForestFlow seed example scores through the contract", func(t *testing.T) {
		seed := seedScoreRequest(t)
		resp, err := client.Post(g.url+"/games/arena/1/score", "application/json", strings.NewReader(seed))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var p struct {
			Prediction struct {
				Schema []struct {
					Type   string   `json:"type"`
					Fields []string `json:"fields"`
				} `json:"schema"`
				Datum []struct {
					Tensors []struct {
						Float64 *struct{ Data []float64 } `json:"Float64"`
						String  *struct{ Data []string }  `json:"String"`
					} `json:"tensors"`
				} `json:"datum"`
			} `json:"Prediction"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("score: HTTP %d, %v", resp.StatusCode, err)
		}
		logged++
		pr := p.Prediction
		if len(pr.Schema) != 2 || pr.Schema[0].Type != "Float64" || pr.Schema[1].Type != "String" || !slices.Equal(pr.Schema[1].Fields, []string{"side"}) || len(pr.Datum) != 2 {
			t.Fatalf("prediction %+v", pr)
		}
		for r, d := range pr.Datum {
			if len(d.Tensors) != 2 || d.Tensors[0].Float64 == nil || d.Tensors[1].String == nil {
				t.Fatalf("datum %d: %+v", r, d)
			}
			checkClose(t, fmt.Sprintf("datum %d score", r), d.Tensors[0].Float64.Data, wantScores[r:r+1], 1e-9)
			if got := d.Tensors[1].String.Data; !slices.Equal(got, wantSides[r:r+1]) {
				t.Errorf("datum %d side %q, want %q", r, got, wantSides[r])
			}
		}
		// A Bytes entry where the model takes String: the model's input names are the types.
		bad := strings.Replace(seed, `"type": "String"`, `"type": "Bytes"`, 1)
		bad = strings.ReplaceAll(bad, `{ "String": {`, `{ "Byte": {`)
		bad = strings.NewReplacer(`"human1"`, `"aHVtYW4x"`, `"human"`, `"aHVtYW4="`, `"monster16"`, `"bW9uc3RlcjE2"`, `"monster"`, `"bW9uc3Rlcg=="`).Replace(bad)
		resp2, err := client.Post(g.url+"/games/arena/1/score", "application/json", strings.NewReader(bad))
		if err != nil {
			t.Fatal(err)
		}
		body := new(bytes.Buffer)
		body.ReadFrom(resp2.Body)
		resp2.Body.Close()
		if resp2.StatusCode != http.StatusBadRequest || !strings.Contains(body.String(), `unknown input \"Bytes\"; the model's inputs are: String BYTES [-1 2]`) {
			t.Errorf("Bytes entry for a String input: HTTP %d %s", resp2.StatusCode, body)
		}
	})

	oipInputs := `{"name":"String","shape":[2,2],"datatype":"BYTES","data":[["human1","human"],["monster16","monster"]]},` +
		`{"name":"Float64","shape":[2,3],"datatype":"FP64","data":[67.37,25.2,80.6,76.5,62,33.9]}`
	t.Run("OIP REST takes and gives BYTES as JSON strings", func(t *testing.T) {
		code, _, raw := oipPost(t, g, "/v2/models/game_score/infer", []byte(`{"inputs":[`+oipInputs+`]}`), 0)
		var out struct {
			Outputs []struct {
				Name, Datatype string
				Shape          []int64
				Data           json.RawMessage
			}
		}
		if code != http.StatusOK || json.Unmarshal(raw, &out) != nil || len(out.Outputs) != 2 {
			t.Fatalf("HTTP %d %s", code, raw)
		}
		logged++
		var scores []float64
		var sides []string
		json.Unmarshal(out.Outputs[0].Data, &scores)
		json.Unmarshal(out.Outputs[1].Data, &sides)
		checkClose(t, "score", scores, wantScores, 1e-9)
		if out.Outputs[1].Datatype != "BYTES" || !slices.Equal(out.Outputs[1].Shape, []int64{2, 1}) || !slices.Equal(sides, wantSides) {
			t.Errorf("side output %+v %q", out.Outputs[1], sides)
		}
		if _, md := g.get("/v2/models/game_score"); !strings.Contains(string(md), `{"name":"String","datatype":"BYTES","shape":[-1,2]}`) ||
			!strings.Contains(string(md), `{"name":"side","datatype":"BYTES","shape":[-1,1]}`) {
			t.Errorf("metadata %s", md)
		}
		// A string the model cannot take, and a number where a string belongs: 400s naming them.
		for _, tc := range []struct{ body, says string }{
			{strings.Replace(oipInputs, `"monster16"`, `"a\u0000b"`, 1), `input \"String\": element 2 has a NUL byte at 1`},
			{strings.Replace(oipInputs, `"monster16"`, `16`, 1), `input \"String\": data[1][0] is a number; BYTES data must be JSON strings`},
		} {
			if code, _, raw := oipPost(t, g, "/v2/models/game_score/infer", []byte(`{"inputs":[`+tc.body+`]}`), 0); code != http.StatusBadRequest || !strings.Contains(string(raw), tc.says) {
				t.Errorf("HTTP %d %s, want 400 saying %s", code, raw, tc.says)
			}
		}
	})

	t.Run("OIP REST binary BYTES are length-prefixed elements", func(t *testing.T) {
		strs := framed("human1", "human", "monster16", "monster")
		var f64 []byte
		for _, v := range nums {
			f64 = binary.LittleEndian.AppendUint64(f64, math.Float64bits(v))
		}
		header := `{"inputs":[{"name":"String","shape":[2,2],"datatype":"BYTES","parameters":{"binary_data_size":` + strconv.Itoa(len(strs)) + `}},` +
			`{"name":"Float64","shape":[2,3],"datatype":"FP64","parameters":{"binary_data_size":48}}],"parameters":{"binary_data_output":true}}`
		code, h, raw := oipPost(t, g, "/v2/models/game_score/infer", append(append([]byte(header), strs...), f64...), len(header))
		if code != http.StatusOK {
			t.Fatalf("HTTP %d %s", code, raw)
		}
		logged++
		n, _ := strconv.Atoi(h.Get("Inference-Header-Content-Length"))
		if n <= 0 || n > len(raw) || !strings.Contains(string(raw[:n]), `"name":"side","datatype":"BYTES","shape":[2,1],"parameters":{"binary_data_size":17}`) {
			t.Fatalf("binary response header %q", raw[:min(n, len(raw))])
		}
		tail := raw[n:]
		got := []float64{math.Float64frombits(binary.LittleEndian.Uint64(tail)), math.Float64frombits(binary.LittleEndian.Uint64(tail[8:]))}
		checkClose(t, "binary score", got, wantScores, 1e-9)
		if sides := unframe(t, tail[16:]); !slices.Equal(sides, wantSides) {
			t.Errorf("binary side %q, want %q", sides, wantSides)
		}
		// A length that runs past the data is a 400 that says where.
		broken := append(framed("human1", "human", "monster16"), 200, 0, 0, 0, 'm')
		header = strings.Replace(header, strconv.Itoa(len(strs)), strconv.Itoa(len(broken)), 1)
		code, _, raw = oipPost(t, g, "/v2/models/game_score/infer", append(append([]byte(header), broken...), f64...), len(header))
		if code != http.StatusBadRequest || !strings.Contains(string(raw), `BYTES element 3 at byte 32 has length 200, but only 1 bytes follow it`) {
			t.Errorf("broken framing: HTTP %d %s", code, raw)
		}
	})

	t.Run("OIP gRPC takes bytes_contents and raw BYTES, gives raw BYTES", func(t *testing.T) {
		c := oippb.NewGRPCInferenceServiceClient(g.dial())
		ctx := withTimeout(t, time.Minute)
		var f64 []byte
		for _, v := range nums {
			f64 = binary.LittleEndian.AppendUint64(f64, math.Float64bits(v))
		}
		typed := &oippb.ModelInferRequest{ModelName: "game_score", Inputs: []*oippb.ModelInferRequest_InferInputTensor{
			{Name: "String", Datatype: "BYTES", Shape: []int64{2, 2}, Contents: &oippb.InferTensorContents{BytesContents: [][]byte{[]byte("human1"), []byte("human"), []byte("monster16"), []byte("monster")}}},
			{Name: "Float64", Datatype: "FP64", Shape: []int64{2, 3}, Contents: &oippb.InferTensorContents{Fp64Contents: nums}}}}
		raw := &oippb.ModelInferRequest{ModelName: "game_score", Inputs: []*oippb.ModelInferRequest_InferInputTensor{
			{Name: "String", Datatype: "BYTES", Shape: []int64{2, 2}}, {Name: "Float64", Datatype: "FP64", Shape: []int64{2, 3}}},
			RawInputContents: [][]byte{framed("human1", "human", "monster16", "monster"), f64}}
		for name, req := range map[string]*oippb.ModelInferRequest{"bytes_contents": typed, "raw_input_contents": raw} {
			resp, err := c.ModelInfer(ctx, req)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			logged++
			if len(resp.Outputs) != 2 || resp.Outputs[1].Datatype != "BYTES" || !bytes.Equal(resp.RawOutputContents[1], framed(wantSides...)) {
				t.Errorf("%s: outputs %v, raw side %q", name, resp.Outputs, resp.RawOutputContents[1])
			}
			checkClose(t, name+" score", fromRawLE(t, "FP64", resp.RawOutputContents[0]), wantScores, 1e-9)
		}
		raw.RawInputContents[0] = framed("human1", "human", "monster16")
		if _, err := c.ModelInfer(ctx, raw); err == nil || !strings.Contains(err.Error(), "BYTES data holds 3 element(s), the shape needs 4") {
			t.Errorf("3 elements for 4: %v", err)
		}
		md, err := c.ModelMetadata(ctx, &oippb.ModelMetadataRequest{Name: "game_score"})
		if err != nil || md.Inputs[0].Datatype != "BYTES" || md.Outputs[1].Datatype != "BYTES" {
			t.Errorf("ModelMetadata: %v %v", md, err)
		}
	})

	t.Run("GraphPipe strings score through the contract", func(t *testing.T) {
		outs, err := graphpipe.MultiRemote(http.DefaultClient, g.url+"/games/arena/1/gp",
			[]interface{}{[][]string{{"human1", "human"}, {"monster16", "monster"}}, [][]float64{nums[:3], nums[3:]}},
			[]string{"String", "Float64"}, []string{"score", "side"})
		if err != nil || len(outs) != 2 {
			t.Fatalf("GraphPipe: %v %v", outs, err)
		}
		logged++
		scores, ok1 := outs[0].([][]float64)
		sides, ok2 := outs[1].([][]string)
		if !ok1 || !ok2 || len(scores) != 2 || len(sides) != 2 {
			t.Fatalf("GraphPipe outputs %#v", outs)
		}
		checkClose(t, "GraphPipe score", []float64{scores[0][0], scores[1][0]}, wantScores, 1e-9)
		if got := []string{sides[0][0], sides[1][0]}; !slices.Equal(got, wantSides) {
			t.Errorf("GraphPipe side %q, want %q", got, wantSides)
		}
		md := graphPipeMetadata(t, g.url+"/games/arena/1/gp")
		if got := graphPipeIOs(md.InputsLength(), md.Inputs); got != "String String [-1 2]; Float64 Float64 [-1 3]" {
			t.Errorf("GraphPipe metadata inputs %q", got)
		}
		if got := graphPipeIOs(md.OutputsLength(), md.Outputs); got != "score Float64 [-1 1]; side String [-1 1]" {
			t.Errorf("GraphPipe metadata outputs %q", got)
		}
	})

	t.Run("concurrent string requests batch together and each gets its own answer", func(t *testing.T) {
		cats := []string{"human", "monster", "elf", "wyrm", "human", "elf", "monster", "dragon"}
		errs := make(chan error, len(cats))
		for i, cat := range cats {
			go func() {
				r := gameRow{fmt.Sprintf("p%d", i), cat, float64(i), float64(2 * i), float64(i * i)}
				body := fmt.Sprintf(`{"inputs":[{"name":"String","shape":[1,2],"datatype":"BYTES","data":[%q,%q]},{"name":"Float64","shape":[1,3],"datatype":"FP64","data":[%g,%g,%g]}]}`,
					r.name, r.category, r.hp, r.attack, r.defence)
				code, _, raw := oipPost(t, g, "/v2/models/game_score/infer", []byte(body), 0)
				var out struct {
					Outputs []struct{ Data json.RawMessage }
				}
				var score []float64
				var side []string
				if code != http.StatusOK || json.Unmarshal(raw, &out) != nil || len(out.Outputs) != 2 ||
					json.Unmarshal(out.Outputs[0].Data, &score) != nil || json.Unmarshal(out.Outputs[1].Data, &side) != nil {
					errs <- fmt.Errorf("request %d: HTTP %d %s", i, code, raw)
					return
				}
				ws, wd := gameWant(r)
				if len(score) != 1 || math.Abs(score[0]-ws) > 1e-9 || len(side) != 1 || side[0] != wd {
					errs <- fmt.Errorf("request %d (%s): score %v side %q, want %v %q", i, cat, score, side, ws, wd)
					return
				}
				errs <- nil
			}()
		}
		for range cats {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
		logged += len(cats)
		_, m := g.get("/metrics")
		if !regexp.MustCompile(`(?m)^grove_model_batched_requests_total [1-9]`).Match(m) {
			t.Errorf("no request ran in a batch: %s", regexp.MustCompile(`(?m)^grove_model_batched.*$`).Find(m))
		}
	})

	t.Run("the prediction log carries the strings", func(t *testing.T) {
		// The refused requests above are logged too (with their error):
		// wait for every answered one.
		answered := func(recs []*kgo.Record) int {
			n := 0
			for _, r := range recs {
				if ev, err := logging.Decode(r.Value, r.Headers); err == nil && ev.GetError() == nil {
					n++
				}
			}
			return n
		}
		recs := kafkatest.ReadUntil(t, emb.Addr(), logTopic, 20*time.Second, func(r []*kgo.Record) bool { return answered(r) >= logged })
		apis, values := map[string]bool{}, 0
		for _, r := range recs {
			ev, err := logging.Decode(r.Value, r.Headers)
			if err != nil {
				t.Fatal(err)
			}
			if ev.GetError() != nil {
				continue // the refused requests above
			}
			apis[ev.GetApi()] = true
			in, out := ev.GetInputs(), ev.GetOutputs()
			if len(in) != 2 || len(out) != 2 || in[0].GetDatatype() != "BYTES" || out[1].GetDatatype() != "BYTES" {
				t.Fatalf("%s event: inputs %v outputs %v", ev.GetApi(), in, out)
			}
			// Every logged side is the one of its logged category.
			var gotIn, gotOut, wantOut []string
			for _, b := range in[0].GetBytesData() {
				gotIn = append(gotIn, string(b))
			}
			for _, b := range out[1].GetBytesData() {
				gotOut = append(gotOut, string(b))
			}
			for k := 1; k < len(gotIn); k += 2 {
				_, side := gameWant(gameRow{category: gotIn[k]})
				wantOut = append(wantOut, side)
			}
			if len(gotIn) != 2*len(gotOut) || !slices.Equal(gotOut, wantOut) {
				t.Errorf("%s event: String %q, side %q", ev.GetApi(), gotIn, gotOut)
			}
			values += 2 * len(gotOut)
		}
		if len(apis) < 4 {
			t.Errorf("events from APIs %v, want ForestFlow, OIP REST, OIP gRPC and GraphPipe", apis)
		}
		brokers := []string{"--brokers", emb.Addr(), "--topic", logTopic}
		out, _ := runGrove(t, 0, append([]string{"logs", "tail", "--from-beginning", "--model", "game_score/"}, brokers...)...)
		out = compactLines(out) // protojson varies its spacing on purpose
		if !strings.Contains(out, `"bytes_data":["aHVtYW4x","aHVtYW4=","bW9uc3RlcjE2","bW9uc3Rlcg=="]`) || !strings.Contains(out, `"bytes_data":["ZnJpZW5k","Zm9l"]`) {
			t.Errorf("logs tail shows no strings:\n%s", out)
		}
		s := replayJSON(t, append([]string{"--model", filepath.Join(repoRoot(), "examples", "bucket", "game_score") + "/", "--tolerance", "1e-9"}, brokers...)...)
		if s.Compared != logged || s.Within != logged || s.Values != values {
			t.Errorf("replay of the logged string traffic with the same model: %+v (want %d compared, all within)", s, logged)
		}
	})
}

// compactLines returns out with each line that is a JSON document
// compacted, so that tests can look for values whatever the spacing.
func compactLines(out string) string {
	var b strings.Builder
	for line := range strings.Lines(out) {
		var buf bytes.Buffer
		if err := json.Compact(&buf, []byte(strings.TrimSpace(line))); err == nil {
			b.Write(buf.Bytes())
			b.WriteByte('\n')
			continue
		}
		b.WriteString(line)
	}
	return b.String()
}
