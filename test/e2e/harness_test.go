//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeskills/kubeskills/internal/agent/modeltest"
	"github.com/kubeskills/kubeskills/internal/scheme"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

// cluster is what the tests know of the cluster hack/cluster/up.sh started.
type cluster struct {
	root       string
	kubeconfig string
	kubectl    string
	helm       string
	pluginDir  string // holds kubectl-skills, put on kubectl's PATH
	config     *rest.Config
	client     client.WithWatch
	clientset  kubernetes.Interface // for what controller-runtime lacks: pod logs

	mu       sync.Mutex
	forwards []*exec.Cmd // port-forwards, which outlive the step that made them
}

// stopForwards ends every port-forward.
func (c *cluster) stopForwards() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cmd := range c.forwards {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	c.forwards = nil
}

func newCluster() (*cluster, error) {
	c := &cluster{root: testenv.RepoRoot()}
	c.kubeconfig = filepath.Join(c.root, "bin", "cluster", "kubeconfig")
	if _, err := os.Stat(c.kubeconfig); err != nil {
		return nil, fmt.Errorf("no cluster: %w (start one with `make cluster-up`, or run `make e2e`)", err)
	}
	version, err := testenv.KubernetesVersion()
	if err != nil {
		return nil, err
	}
	c.kubectl = filepath.Join(c.root, "bin", "k8s", version, "kubectl")
	c.helm = filepath.Join(c.root, "bin", "helm")
	c.pluginDir = filepath.Join(c.root, "bin", "e2e", "plugins")
	build := exec.Command("go", "build", "-o", c.pluginDir+"/", "./cmd/kubectl-skills")
	build.Dir = c.root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("failed to build kubectl-skills: %v\n%s", err, out)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 100, 200
	c.config = cfg
	sch, err := scheme.New()
	if err != nil {
		return nil, err
	}
	if c.client, err = client.NewWithWatch(cfg, client.Options{Scheme: sch}); err != nil {
		return nil, err
	}
	if c.clientset, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return c, nil
}

// command runs a program with the cluster's kubeconfig and the plugin on
// PATH, and returns its standard output.
func (c *cluster) command(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = c.root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.kubeconfig,
		"PATH="+c.pluginDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v\n%s%s", filepath.Base(name), strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return string(out), nil
}

func (c *cluster) mustKubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := c.command(c.kubectl, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (c *cluster) mustHelm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := c.command(c.helm, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// portForward forwards a local port to a Service, the way a user reaches
// one, and returns the local base URL. It runs until stopForwards.
func (c *cluster) portForward(t *testing.T, namespace, service string, port int) string {
	t.Helper()
	url, cmd := c.forward(t, namespace, "svc/"+service, port)
	c.mu.Lock()
	c.forwards = append(c.forwards, cmd)
	c.mu.Unlock()
	return url
}

// forward forwards a local port to target (svc/NAME or pod/NAME) and
// returns the local base URL and the port-forward, which the caller ends.
func (c *cluster) forward(t *testing.T, namespace, target string, port int) (string, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(c.kubectl, "--kubeconfig", c.kubeconfig, "port-forward", "-n", namespace,
		"--address", "127.0.0.1", target, fmt.Sprintf(":%d", port))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+)`)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case p := <-found:
		return "http://127.0.0.1:" + p, cmd
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("port-forward to %s/%s did not start: %s", namespace, target, stderr.String())
		return "", nil
	}
}

// impersonate returns a client that acts as user, as the API server sees a
// ServiceAccount's own requests.
func (c *cluster) impersonate(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(c.config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	if sa := strings.Split(user, ":"); len(sa) == 4 && sa[0] == "system" && sa[1] == "serviceaccount" {
		cfg.Impersonate.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:" + sa[2], "system:authenticated"}
	}
	cl, err := client.New(cfg, client.Options{Scheme: c.client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// postJSON sends body as JSON and decodes the answer into out; it fails the
// test on a status other than 200.
func postJSON(t *testing.T, url, token string, body, out any) {
	t.Helper()
	status, data := postJSONStatus(t, url, token, body)
	if status != http.StatusOK {
		t.Fatalf("POST %s: %d %s", url, status, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("POST %s: %v in %s", url, err, data)
		}
	}
}

func postJSONStatus(t *testing.T, url, token string, body any) (int, []byte) {
	t.Helper()
	status, data, err := post(url, token, body)
	if err != nil {
		t.Fatal(err)
	}
	return status, data
}

// get fetches url with the bearer token.
func get(t *testing.T, url, token string) (int, []byte) {
	t.Helper()
	status, data, err := do(http.MethodGet, url, token, nil)
	if err != nil {
		t.Fatal(err)
	}
	return status, data
}

// post sends body as JSON; it is safe to call from any goroutine.
func post(url, token string, body any) (int, []byte, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	return do(http.MethodPost, url, token, data)
}

func do(method, url, token string, body []byte) (int, []byte, error) {
	return doWith(method, url, token, body, nil)
}

// doWith is do with more request headers.
func doWith(method, url, token string, body []byte, header http.Header) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// model is the scripted model server running in the cluster.
type model struct{ url string }

// script replaces the model's remaining steps.
func (m model) script(t *testing.T, steps ...modeltest.Step) {
	t.Helper()
	postJSON(t, m.url+"/admin/reset", "", struct{}{}, nil)
	postJSON(t, m.url+"/admin/steps", "", steps, nil)
}

// agentAPI is an agent's HTTP API, reached through a port-forward.
type agentAPI struct{ url, token string }

// chat asks one question and returns the final answer.
func (a agentAPI) chat(t *testing.T, question string) string {
	t.Helper()
	return chatWith(t, a, agentName, question)
}

// commandResult is the agent's answer to POST /v1/commands.
type commandResult struct {
	Phase           string `json:"phase"`
	Run             string `json:"run"`
	ExitCode        *int32 `json:"exitCode"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdoutTruncated"`
	StderrTruncated bool   `json:"stderrTruncated"`
	Message         string `json:"message"`
	Decision        *struct {
		Action string `json:"action"`
		Rule   string `json:"rule"`
	} `json:"decision"`
}

// run asks the agent to run a command, as run_command does, and waits for
// its result.
func (a agentAPI) run(t *testing.T, command string) commandResult {
	t.Helper()
	return a.runFor(t, command, "")
}

// runFor is run on behalf of a skill, with the skill's folder mounted.
func (a agentAPI) runFor(t *testing.T, command, skill string) commandResult {
	t.Helper()
	var res commandResult
	postJSON(t, a.url+"/v1/commands", a.token, map[string]string{"command": command, "skill": skill}, &res)
	return res
}

// timings records how long each step took, for the run's report.
type timings struct {
	mu    sync.Mutex
	steps []timing
	extra map[string]any
}

type timing struct {
	Step    string  `json:"step"`
	Seconds float64 `json:"seconds"`
	Passed  bool    `json:"passed"`
}

func (r *timings) add(step string, d time.Duration, passed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steps = append(r.steps, timing{Step: step, Seconds: d.Seconds(), Passed: passed})
}

func (r *timings) set(key string, v any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.extra == nil {
		r.extra = map[string]any{}
	}
	r.extra[key] = v
}

// write prints the table and saves it as JSON under bin/e2e/.
func (r *timings) write(root string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Println("end-to-end steps:")
	for _, s := range r.steps {
		mark := "ok"
		if !s.Passed {
			mark = "FAIL"
		}
		fmt.Printf("  %-4s %6.1fs  %s\n", mark, s.Seconds, s.Step)
	}
	keys := make([]string, 0, len(r.extra))
	for k := range r.extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Printf("  %s: %v\n", k, r.extra[k])
	}
	data, _ := json.MarshalIndent(map[string]any{"steps": r.steps, "measurements": r.extra}, "", "  ")
	dir := filepath.Join(root, "bin", "e2e")
	_ = os.MkdirAll(dir, 0o755)
	_ = os.WriteFile(filepath.Join(dir, "timings.json"), append(data, '\n'), 0o644)
}

// writeJSON writes v as indented JSON to the file at bin/PATH... of the
// checkout.
func writeJSON(t *testing.T, v any, path ...string) {
	t.Helper()
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(append([]string{c.root, "bin"}, path...)...)
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
