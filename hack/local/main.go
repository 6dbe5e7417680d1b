// Command local runs kubeskills without a cluster: a real kube-apiserver and
// etcd (the ones the tests use), the CRDs, the operator in-process, the
// samples of config/samples, and the sample skill folders of
// config/samples/skills imported as `make demo` imports them. It prints the
// sample agent's OpenAI-compatible and MCP URLs and token, writes a
// kubeconfig and stops everything on Ctrl-C.
//
//	go run ./hack/local            (what `make run-local` does)
//	go run ./hack/local --smoke    (start, apply, check, chat once, stop)
//
// Without --model-base-url the sample agent talks to the scripted model of
// internal/agent/modeltest, replaying hack/local/model-script.json, run
// in-process.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/kubeskills/kubeskills/internal/agent/modeltest"
	"github.com/kubeskills/kubeskills/internal/cli"
	"github.com/kubeskills/kubeskills/internal/manager"
	"github.com/kubeskills/kubeskills/internal/mcpskills"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

type options struct {
	stateDir    string
	smoke       bool
	agentBinary string
	modelURL    string
	modelName   string
}

func main() {
	var o options
	flag.StringVar(&o.stateDir, "state-dir", filepath.Join(testenv.RepoRoot(), "bin", "local"), "Directory for the kubeconfig and logs.")
	flag.BoolVar(&o.smoke, "smoke", false, "Start, apply the samples, check them and the agent, chat once, and stop.")
	flag.StringVar(&o.agentBinary, "agent-binary", filepath.Join(testenv.RepoRoot(), "bin", "agent"), "The agent runtime binary (make build).")
	flag.StringVar(&o.modelURL, "model-base-url", "", "OpenAI-compatible endpoint of the sample agent; the scripted model of hack/local/model-script.json when empty.")
	flag.StringVar(&o.modelName, "model-name", "", "Model of the sample agent; the Agent's own when empty.")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, out io.Writer) error {
	if err := os.MkdirAll(o.stateDir, 0o755); err != nil {
		return fmt.Errorf("failed to create state directory %s: %w", o.stateDir, err)
	}
	logFile, err := os.Create(filepath.Join(o.stateDir, "manager.log"))
	if err != nil {
		return fmt.Errorf("failed to create manager log: %w", err)
	}
	defer logFile.Close()
	ctrl.SetLogger(zap.New(zap.WriteTo(logFile)))

	fmt.Fprintln(out, "Starting etcd and kube-apiserver ...")
	start := time.Now()
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(out, "Stopping the control plane ...")
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "failed to stop the control plane:", err)
		}
	}()
	kubeconfig, err := writeKubeconfig(env, o.stateDir)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Control plane up in %s, CRDs installed.\n", time.Since(start).Round(time.Millisecond))

	// Its tests run it more than once in a process, a manager each time.
	mgr, err := manager.New(ctx, env.Config, manager.Options{MetricsAddr: "0", ProbeAddr: "0", SkillWorkers: 4, RunWorkers: 4,
		Image: manager.DefaultImage, SandboxImage: manager.DefaultSandboxImage, SkipControllerNameValidation: true})
	if err != nil {
		return err
	}
	mgrCtx, cancelMgr := context.WithCancel(ctx)
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Start(mgrCtx) }()
	defer func() {
		cancelMgr()
		if err := <-mgrDone; err != nil {
			fmt.Fprintln(os.Stderr, "the manager stopped with an error:", err)
		}
	}()

	// As in a cluster: identities on CommandRuns, the agent a run is filed
	// for, who changes what keeps a run, what an Agent names and the
	// ServiceAccount a CommandPolicy names, who writes a skill source or a
	// skill repository, and
	// who makes a run's Job, are checked at admission.
	if err := env.ApplyFiles(ctx, "config/admission/commandrun-identity.yaml", "config/admission/commandrun-agent.yaml",
		"config/admission/commandrun-records.yaml",
		"config/admission/agent-references.yaml", "config/admission/commandpolicy-identity.yaml",
		"config/admission/skill-sources.yaml", "config/admission/skill-repositories.yaml", "config/admission/sandbox-jobs.yaml",
		"config/admission/warm-sandboxes.yaml",
		"config/rbac/approver_role.yaml", "config/rbac/runner_role.yaml"); err != nil {
		return err
	}
	kubectl := kubectlFunc(env, kubeconfig, out)
	skills, manifest, err := importSampleSkills(o.stateDir, out)
	if err != nil {
		return err
	}
	if err := kubectl(ctx, "apply", "--server-side", "-f", manifest); err != nil {
		return err
	}
	if err := kubectl(ctx, "apply", "-k", filepath.Join(testenv.RepoRoot(), "config", "samples")); err != nil {
		return err
	}
	model, err := scriptedModel(&o, out)
	if err != nil {
		return err
	}
	defer model()
	agentCtx, stopAgent := context.WithCancel(ctx)
	defer stopAgent()
	agent, err := runAgent(agentCtx, env, o, "default", "ops")
	if err != nil {
		return err
	}
	if o.smoke {
		return smoke(ctx, kubectl, agent, skills, manifest, out)
	}
	bin := filepath.Join(testenv.RepoRoot(), "bin")
	fmt.Fprintf(out, `
kubeskills runs locally (logs: %s, %s).

  export KUBECONFIG=%s
  export PATH=%s:%s:$PATH
  kubectl get skills,agents,commandpolicies,commandruns
  kubectl describe skill cluster-health

The sample agent "ops" serves the sample skills (its model: --model-base-url,
--model-name) on one port, behind one token:

%s
Chat with it:

  curl -s %s/v1/chat/completions -H 'Authorization: Bearer %s' \
    -H 'Content-Type: application/json' \
    -d '{"model":"ops","messages":[{"role":"user","content":"Is the cluster healthy?"}]}'

Or connect any MCP client to the MCP URL with the same Authorization
header: it lists the skills (skills/list), reads their files
(resources/read) and runs commands (run_command) under the same policy.

Commands the agent asks for appear in 'kubectl skills list --pending'; approve
one with 'kubectl skills approve NAME'. There is no kubelet here: approved
commands get their sandbox Job, which only a real cluster runs.

Press Ctrl-C to stop.
`, logFile.Name(), agent.log, kubeconfig, bin, filepath.Dir(env.KubectlPath()), endpoints(agent), agent.url, agent.token)
	select {
	case <-ctx.Done():
		return nil
	case err := <-mgrDone:
		mgrDone <- err
		return fmt.Errorf("manager stopped: %w", err)
	}
}

// smoke checks what a newcomer sees: every kind is served, the samples are
// Ready, a sample skill deleted and applied again from the same manifest is
// Ready again, the agent serves every sample skill behind its token, on /v1
// and to an MCP client at the MCP URL it prints, and a chat is answered.
func smoke(ctx context.Context, kubectl func(context.Context, ...string) error, agent *localAgent, skills []string, manifest string, out io.Writer) error {
	if err := kubectl(ctx, "wait", "--for=condition=Ready", "--timeout=60s", "skills", "--all"); err != nil {
		return err
	}
	// No garbage collector runs here: the deleted Skill's ConfigMap stays,
	// and the Skill made again must take it over.
	if err := kubectl(ctx, "delete", "skill", "cluster-health", "--wait"); err != nil {
		return err
	}
	if err := kubectl(ctx, "apply", "--server-side", "-f", manifest); err != nil {
		return err
	}
	if err := kubectl(ctx, "wait", "--for=condition=Ready", "--timeout=30s", "skill/cluster-health"); err != nil {
		return err
	}
	if err := kubectl(ctx, "get", "skills,agents,commandpolicies,commandruns"); err != nil {
		return err
	}
	// The local runtime loads the Agent's catalog once the operator has
	// written it, and again as it grows (the Agent is never Ready here: no
	// kubelet runs its Deployment): ask until it lists every sample skill,
	// for a while.
	var served []string
	for deadline := time.Now().Add(30 * time.Second); ; {
		body, err := agentCall(ctx, agent, http.MethodGet, "/v1/skills", "")
		if err != nil {
			return err
		}
		var catalog struct {
			Skills []struct {
				Name string `json:"name"`
			} `json:"skills"`
		}
		if err := json.Unmarshal(body, &catalog); err != nil {
			return fmt.Errorf("GET /v1/skills answered what is not a catalog: %w: %s", err, body)
		}
		served = served[:0]
		for _, sk := range catalog.Skills {
			served = append(served, sk.Name)
		}
		slices.Sort(served)
		if slices.Equal(served, skills) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the agent serves the skills %v, not the sample skills %v", served, skills)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	fmt.Fprintf(out, "GET /v1/skills: %d skills: %s\n", len(served), strings.Join(served, " "))
	fmt.Fprintf(out, "The sample agent \"ops\" serves:\n%s", endpoints(agent))
	if err := mcpSmoke(ctx, agent, skills, out); err != nil {
		return err
	}
	answer, err := agentCall(ctx, agent, http.MethodPost, "/v1/chat/completions",
		`{"model":"ops","messages":[{"role":"user","content":"Is the cluster healthy?"}]}`)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "POST /v1/chat/completions: %s\n", answer)
	return nil
}

// endpoints lists where the sample agent listens, its OpenAI-compatible API
// and its MCP endpoint, and the bearer token both take.
func endpoints(agent *localAgent) string {
	return fmt.Sprintf("  OpenAI-compatible API:  %s/v1\n  MCP (streamable HTTP):  %s/mcp\n  Bearer token:           %s\n",
		agent.url, agent.url, agent.token)
}

// bearer sends the agent's token with every request.
type bearer string

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(req)
}

// mcpSmoke connects the official Go SDK's client to the MCP URL it printed,
// with the token it printed, as an MCP host would: skills/list must list
// the sample skills, every file with the digest and size of its bytes in
// the sample folder, and resources/read must give cluster-health's
// SKILL.md back as the folder holds it.
func mcpSmoke(ctx context.Context, agent *localAgent, skills []string, out io.Writer) error {
	c := mcp.NewClient(&mcp.Implementation{Name: "run-local", Version: "v1"}, nil)
	if err := mcp.AddSendingCustomMethod[*mcpskills.ListParams, *mcpskills.ListResult](c, mcpskills.MethodList); err != nil {
		return err
	}
	transport := &mcp.StreamableClientTransport{Endpoint: agent.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearer(agent.token)}, MaxRetries: -1}
	cs, err := c.Connect(ctx, transport, nil)
	if err != nil {
		return fmt.Errorf("failed to connect to %s/mcp: %w", agent.url, err)
	}
	defer func() { _ = cs.Close() }()

	var listed []mcpskills.Skill
	err = poll(ctx, 30*time.Second, func() (bool, error) {
		listed = listed[:0]
		params := &mcpskills.ListParams{}
		for {
			page, err := mcp.CallCustomMethod[*mcpskills.ListParams, *mcpskills.ListResult](ctx, cs, mcpskills.MethodList, params)
			if err != nil {
				return false, fmt.Errorf("skills/list: %w", err)
			}
			listed = append(listed, page.Skills...)
			if page.NextCursor == "" {
				break
			}
			params.Cursor = page.NextCursor
		}
		return len(listed) == len(skills), nil
	})
	if err != nil {
		return fmt.Errorf("skills/list of %s/mcp lists %d skills, not the %d sample skills: %w", agent.url, len(listed), len(skills), err)
	}
	root := filepath.Join(testenv.RepoRoot(), "config", "samples", "skills")
	var names []string
	files := 0
	for _, sk := range listed {
		name, _, err := mcpskills.ParseURI(sk.URI)
		if err != nil {
			return fmt.Errorf("skills/list: %w", err)
		}
		names = append(names, name)
		want, err := mcpskills.FolderResources(filepath.Join(root, name), name)
		if err != nil {
			return err
		}
		got := map[string]mcpskills.SkillResource{}
		for _, r := range sk.Resources.Files {
			got[r.URI] = r
		}
		if !maps.Equal(got, want) {
			return fmt.Errorf("skills/list: the files of %s are not those of its folder in config/samples/skills:\n served %v\n folder %v", sk.URI, got, want)
		}
		files += len(got)
	}
	slices.Sort(names)
	if !slices.Equal(names, skills) {
		return fmt.Errorf("skills/list lists %v, not the sample skills %v", names, skills)
	}
	uri := mcpskills.SkillURI("cluster-health")
	res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		return fmt.Errorf("resources/read %s: %w", uri, err)
	}
	folder, err := os.ReadFile(filepath.Join(root, "cluster-health", "SKILL.md"))
	if err != nil {
		return err
	}
	if len(res.Contents) != 1 || res.Contents[0].Text != string(folder) {
		return fmt.Errorf("resources/read %s is not the SKILL.md of config/samples/skills/cluster-health", uri)
	}
	fmt.Fprintf(out, "MCP skills/list: %d skills, %d files, each the bytes of its folder in config/samples/skills\n", len(names), files)
	return nil
}

// importSampleSkills writes the Skill manifests of the sample skill folders
// of config/samples/skills to dir/skills.yaml, as `make demo` imports them
// (`kubectl skills import -n default config/samples/skills/*`), and returns
// the skills' names, sorted, and the manifest's path. The import's warnings
// are printed to out.
func importSampleSkills(dir string, out io.Writer) ([]string, string, error) {
	folders, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "samples", "skills", "*"))
	if err != nil || len(folders) == 0 {
		return nil, "", fmt.Errorf("found no sample skill folders in config/samples/skills (%v)", err)
	}
	var manifest, warnings bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(""), Out: &manifest, ErrOut: &warnings}
	if cli.Execute(append([]string{"import", "-n", "default"}, folders...), streams) != cli.ExitOK {
		return nil, "", fmt.Errorf("failed to import the sample skills:\n%s", warnings.String())
	}
	_, _ = out.Write(warnings.Bytes())
	path := filepath.Join(dir, "skills.yaml")
	if err := os.WriteFile(path, manifest.Bytes(), 0o644); err != nil {
		return nil, "", fmt.Errorf("failed to write the sample skills' manifest: %w", err)
	}
	names := make([]string, len(folders))
	for i, f := range folders {
		names[i] = filepath.Base(f)
	}
	slices.Sort(names)
	return names, path, nil
}

// agentCall calls the agent's API with its token and returns the body of a
// 200 answer.
func agentCall(ctx context.Context, agent *localAgent, method, path, body string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, agent.url+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+agent.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("failed to call %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the agent answered %d to %s %s: %s (%v)", resp.StatusCode, method, path, answer, err)
	}
	return answer, nil
}

// scriptedModel starts, when o names no model, the scripted model of
// hack/local/model-script.json on loopback (looping, so it answers every
// chat) and points o at it. The returned func stops it.
func scriptedModel(o *options, out io.Writer) (func(), error) {
	if o.modelURL != "" {
		return func() {}, nil
	}
	script := filepath.Join(testenv.RepoRoot(), "hack", "local", "model-script.json")
	steps, err := modeltest.LoadSteps(script)
	if err != nil {
		return nil, fmt.Errorf("failed to load the scripted model's steps: %w", err)
	}
	model := modeltest.New(steps...)
	model.Loop()
	o.modelURL = model.URL()
	if o.modelName == "" {
		o.modelName = "scripted"
	}
	fmt.Fprintf(out, "The sample agent's model is the scripted model of %s on %s; set MODEL_URL (and MODEL) for a real one.\n", script, o.modelURL)
	return model.Close, nil
}

// writeKubeconfig writes a cluster-admin kubeconfig for the control plane.
func writeKubeconfig(env *testenv.Env, dir string) (string, error) {
	return env.WriteAdminKubeconfig(dir)
}

// kubectlFunc runs the kubectl built beside the control plane.
func kubectlFunc(env *testenv.Env, kubeconfig string, out io.Writer) func(context.Context, ...string) error {
	return func(ctx context.Context, args ...string) error {
		cmd := exec.CommandContext(ctx, env.KubectlPath(), append([]string{"--kubeconfig", kubeconfig}, args...)...)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Run(); err != nil && !errors.Is(ctx.Err(), context.Canceled) {
			return fmt.Errorf("failed to run kubectl %v: %w", args, err)
		}
		return nil
	}
}
