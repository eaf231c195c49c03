package check

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

const dockerfilePath = "../container/Dockerfile"

// finalStage is what the image's last stage sets.
type finalStage struct {
	base       string
	user       string // the last USER; "" when none
	entrypoint []string
	copiesFrom []string // stages or images COPY --from names
}

// parseDockerfile parses a Dockerfile with BuildKit's own parser and
// returns its last stage and every stage's name.
func parseDockerfile(data []byte) (finalStage, []string, error) {
	ast, err := parser.Parse(bytes.NewReader(data))
	if err != nil {
		return finalStage{}, nil, err
	}
	stages, _, err := instructions.Parse(ast.AST, nil)
	if err != nil {
		return finalStage{}, nil, err
	}
	if len(stages) == 0 {
		return finalStage{}, nil, fmt.Errorf("no stage")
	}
	var names []string
	for _, s := range stages {
		names = append(names, s.Name)
	}
	last := stages[len(stages)-1]
	f := finalStage{base: last.BaseName}
	for _, c := range last.Commands {
		switch c := c.(type) {
		case *instructions.UserCommand:
			f.user = c.User
		case *instructions.EntrypointCommand:
			if c.PrependShell {
				return f, names, fmt.Errorf("ENTRYPOINT in shell form: signals would go to the shell, not grove")
			}
			f.entrypoint = c.CmdLine
		case *instructions.CopyCommand:
			if c.From != "" {
				f.copiesFrom = append(f.copiesFrom, c.From)
			}
		}
	}
	return f, names, nil
}

// checkNonRoot reports what is wrong with the final stage's user and
// entrypoint.
func checkNonRoot(f finalStage) []string {
	var bad []string
	user, group, _ := strings.Cut(f.user, ":")
	switch {
	case user == "":
		bad = append(bad, "the final stage sets no USER: the image would run as root")
	case user == "root" || user == "0" || group == "root" || group == "0":
		bad = append(bad, fmt.Sprintf("the final stage's USER %q is root", f.user))
	}
	if len(f.entrypoint) < 2 || path.Base(f.entrypoint[0]) != "grove" || f.entrypoint[1] != "serve" {
		bad = append(bad, fmt.Sprintf("ENTRYPOINT %q is not grove serve", f.entrypoint))
	}
	return bad
}

// dockerfileUser is the numeric user the image runs as.
func dockerfileUser(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(dockerfilePath)
	if err != nil {
		t.Fatal(err)
	}
	f, _, err := parseDockerfile(data)
	if err != nil {
		t.Fatal(err)
	}
	user, _, _ := strings.Cut(f.user, ":")
	return user
}

func TestDockerfileRunsGroveServeAsNonRoot(t *testing.T) {
	data, err := os.ReadFile(dockerfilePath)
	if err != nil {
		t.Fatal(err)
	}
	f, stages, err := parseDockerfile(data)
	if err != nil {
		t.Fatalf("%s: %v", dockerfilePath, err)
	}
	for _, b := range checkNonRoot(f) {
		t.Error(b)
	}
	if len(stages) < 2 {
		t.Errorf("stages %q: want a multi-stage build (the release is built in one, run in another)", stages)
	}
	if f.base != "debian:bookworm-slim" {
		t.Errorf("the final stage is FROM %q, want debian:bookworm-slim", f.base)
	}
	if len(f.copiesFrom) == 0 || f.copiesFrom[0] != stages[0] {
		t.Errorf("the final stage copies from %q, want the release from stage %q", f.copiesFrom, stages[0])
	}
	if !bytes.Contains(data, []byte("make dist")) {
		t.Error("no stage runs make dist: the image would not hold the release")
	}
}

// TestNonRootCheckCatchesRoot shows the check above fails on an image that
// runs as root or does not run grove serve.
func TestNonRootCheckCatchesRoot(t *testing.T) {
	for name, df := range map[string]string{
		"no user":    "FROM debian:bookworm-slim\nENTRYPOINT [\"/opt/grove/bin/grove\", \"serve\"]\n",
		"root":       "FROM debian:bookworm-slim\nUSER root\nENTRYPOINT [\"/opt/grove/bin/grove\", \"serve\"]\n",
		"uid 0":      "FROM debian:bookworm-slim\nUSER 0:0\nENTRYPOINT [\"/opt/grove/bin/grove\", \"serve\"]\n",
		"root later": "FROM debian:bookworm-slim\nUSER 10001\nRUN true\nUSER root\nENTRYPOINT [\"/opt/grove/bin/grove\", \"serve\"]\n",
		"not serve":  "FROM debian:bookworm-slim\nUSER 10001\nENTRYPOINT [\"/opt/grove/bin/grove\"]\n",
		"shell form": "FROM debian:bookworm-slim\nUSER 10001\nENTRYPOINT /opt/grove/bin/grove serve\n",
	} {
		f, _, err := parseDockerfile([]byte(df))
		if err == nil && len(checkNonRoot(f)) == 0 {
			t.Errorf("%s: passed the check", name)
		}
	}
}
