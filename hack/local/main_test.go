package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kubeskills/kubeskills/internal/agent/modeltest"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

// TestSmoke runs the local demo as `make run-local` does, in its smoke mode:
// the control plane starts, the samples apply and become Ready, a sample
// skill deleted and applied again becomes Ready again (no garbage collector
// runs here, as in make run-local), kubectl lists every kind (it fails on a
// kind the API server does not serve), and
// the sample agent, the real agent binary, serves the sample skill folders
// that `make demo` serves, prints its OpenAI-compatible and MCP URLs and its
// token, serves the folders' bytes to an MCP client there, and answers a
// chat through a scripted model.
func TestSmoke(t *testing.T) {
	dir := t.TempDir()
	binary := buildAgent(t, dir)
	model := modeltest.New(modeltest.Reply("The cluster is healthy: 3 nodes Ready."))
	defer model.Close()

	var out bytes.Buffer
	o := options{stateDir: filepath.Join(dir, "state"), smoke: true, agentBinary: binary, modelURL: model.URL(), modelName: "scripted"}
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("run-local failed: %v\n%s", err, out.String())
	}
	folders, err := os.ReadDir(filepath.Join(testenv.RepoRoot(), "config", "samples", "skills"))
	if err != nil {
		t.Fatal(err)
	}
	var samples []string
	files := 0
	for _, f := range folders {
		samples = append(samples, f.Name())
		err := filepath.WalkDir(filepath.Join(testenv.RepoRoot(), "config", "samples", "skills", f.Name()), func(_ string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files++
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	token, err := os.ReadFile(filepath.Join(o.stateDir, "agent", "token"))
	if err != nil || len(token) == 0 {
		t.Fatalf("no agent token in the state directory: %v", err)
	}
	for _, want := range []string{
		"skill.kubeskills.io/cluster-health condition met",
		`skill.kubeskills.io "cluster-health" deleted`,
		"skill.kubeskills.io/pvc-resize condition met",
		"commandpolicy.kubeskills.io/read-only",
		"agent.kubeskills.io/ops",
		fmt.Sprintf("GET /v1/skills: %d skills: %s\n", len(samples), strings.Join(samples, " ")),
		"Bearer token:           " + string(token) + "\n",
		fmt.Sprintf("MCP skills/list: %d skills, %d files, each the bytes of its folder in config/samples/skills\n", len(samples), files),
		"The cluster is healthy: 3 nodes Ready.",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// Both URLs are on the agent's one listener.
	urls := regexp.MustCompile(`(?m)^  OpenAI-compatible API:  (http://127\.0\.0\.1:\d+)/v1\n  MCP \(streamable HTTP\):  (\S+)\n`).
		FindStringSubmatch(out.String())
	if urls == nil || urls[2] != urls[1]+"/mcp" {
		t.Errorf("the output does not give the MCP URL beside the OpenAI one (%q):\n%s", urls, out.String())
	}
	// The model is sent the catalog of the sample folders: cluster-health
	// as its folder describes it, not as another manifest would.
	reqs := model.Requests()
	if len(reqs) == 0 {
		t.Fatal("the model was never asked")
	}
	for _, want := range []string{"(nodes, control-plane and system pods, warning events, pending workloads)", "pvc-resize"} {
		if !strings.Contains(reqs[0].System(), want) {
			t.Errorf("the model was not sent the sample folders' catalog (it lacks %q): %s", want, reqs[0].System())
		}
	}
}

// TestSmokeWithoutModelURL: `make run-local` with no MODEL_URL runs the
// scripted model of hack/local/model-script.json and points the sample
// agent at it, so a newcomer's first chat is answered: the agent loads the
// skill the script names and answers with the script's words.
func TestSmokeWithoutModelURL(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	o := options{stateDir: filepath.Join(dir, "state"), smoke: true, agentBinary: buildAgent(t, dir)}
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatalf("run-local failed: %v\n%s", err, out.String())
	}
	for _, want := range []string{
		"The sample agent's model is the scripted model",
		"POST /v1/chat/completions: {",
		"This is the scripted model of make run-local",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// buildAgent builds the agent binary into dir.
func buildAgent(t *testing.T, dir string) string {
	t.Helper()
	binary := filepath.Join(dir, "agent")
	build := exec.Command("go", "build", "-o", binary, "./cmd/agent")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("failed to build the agent: %v\n%s", err, out)
	}
	return binary
}
