package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kubeskills/kubeskills/internal/agent/modeltest"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

// TestSmoke runs the local demo as `make run-local` does, in its smoke mode:
// the control plane starts, the samples apply and become Ready, kubectl
// lists every kind (it fails on a kind the API server does not serve), and
// the sample agent, the real agent binary, serves its catalog and answers a
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
	for _, want := range []string{
		"skill.kubeskills.io/cluster-health condition met",
		"commandpolicy.kubeskills.io/read-only",
		"agent.kubeskills.io/ops",
		`GET /v1/skills: {`,
		`"name":"cluster-health"`,
		"The cluster is healthy: 3 nodes Ready.",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	reqs := model.Requests()
	if len(reqs) == 0 || !strings.Contains(reqs[0].System(), "cluster-health") {
		t.Errorf("the model was not sent the catalog: %+v", reqs)
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
