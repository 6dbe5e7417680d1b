package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/agent"
	"github.com/kubeskills/kubeskills/internal/agent/modeltest"
	"github.com/kubeskills/kubeskills/internal/catalog"
	"github.com/kubeskills/kubeskills/internal/kubeletfs"
	"github.com/kubeskills/kubeskills/internal/manager"
	"github.com/kubeskills/kubeskills/internal/operatortest"
	"github.com/kubeskills/kubeskills/internal/skill"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

// env is the real API server; the operator's manager runs against it for
// the whole package, so CommandRuns are judged and get Jobs as in a cluster.
var env *testenv.Env

// k8s reads and writes straight to the API server as an admin.
var k8s client.Client

// operator is the operator's manager, running for the whole package.
var operator *operatortest.Operator

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, func(e *testenv.Env) func() {
		env, k8s = e, e.Client
		// The operator's RBAC (the approver role among it) and the
		// identities on CommandRuns are checked as the operator ships them.
		if _, err := e.InstallOperatorConfig(context.Background(), "rbac"); err != nil {
			panic(err)
		}
		if err := e.ApplyFiles(context.Background(), "config/admission/commandrun-identity.yaml"); err != nil {
			panic(err)
		}
		var err error
		if operator, err = operatortest.Start(e, manager.Options{}); err != nil {
			panic(err)
		}
		return operator.Stop
	}))
}

const (
	timeout  = 20 * time.Second
	interval = 50 * time.Millisecond
)

// Skills most tests serve. Their bodies carry markers, so a test can tell
// whether a body reached the model.
const (
	triageBody  = "# Crash triage\n\nBODY-MARKER-TRIAGE: read the logs of the previous container first.\n"
	notesBody   = "# Release notes\n\nBODY-MARKER-NOTES: group changes by kind.\n"
	disableBody = "# Wipe\n\nBODY-MARKER-WIPE\n"
	guideText   = "# Guide\n\nLook at restartCount first.\n"
)

func testSkills() []*skill.Skill {
	return []*skill.Skill{
		{Name: "crash-triage", Description: "Diagnose pods in CrashLoopBackOff.", Body: triageBody, Files: []skill.File{
			{Path: "bin/tool", Content: []byte{0xff, 0xfe, 0x00, 0x01}, Executable: true},
			{Path: "references/guide.md", Content: []byte(guideText)},
			{Path: "references/huge.txt", Content: bytes.Repeat([]byte("x"), 100<<10)},
		}},
		{Name: "release-notes", Description: "Write release notes from merged changes.", Body: notesBody,
			Invocation: skill.InvocationExplicit, Files: []skill.File{{Path: "template.md", Content: []byte("## Changes\n")}}},
		{Name: "wipe-cluster", Description: "Never offered.", Body: disableBody, Invocation: skill.InvocationDisabled},
	}
}

// mount writes a catalog of skills and their shards the way the Agent's
// pod sees them, and opens a store on them.
func mount(t *testing.T, instructions string, skills ...*skill.Skill) *catalog.Store {
	t.Helper()
	base := t.TempDir()
	writeMount(t, base, instructions, skills...)
	store, err := catalog.Open(filepath.Join(base, "catalog"), filepath.Join(base, "skills"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return store
}

// writeMount writes, under base, the catalog of skills into catalog/ and
// their shards into skills/. Disabled skills are left out of the catalog,
// as the Agent controller leaves them out.
func writeMount(t *testing.T, base, instructions string, skills ...*skill.Skill) {
	t.Helper()
	c := &catalog.Catalog{Agent: "ops", Instructions: instructions}
	for _, s := range skills {
		if s.Invocation == skill.InvocationDisabled {
			continue
		}
		shards, err := skill.Pack(s, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, sh := range shards {
			keys := map[string][]byte{}
			for k, v := range sh.Data {
				keys[k] = []byte(v)
			}
			for k, v := range sh.BinaryData {
				keys[k] = v
			}
			writeKeys(t, filepath.Join(base, "skills", s.Name, strconv.Itoa(i)), keys)
		}
		invocation := s.Invocation
		if invocation == "" {
			invocation = skill.InvocationAuto
		}
		c.Skills = append(c.Skills, catalog.Entry{Name: s.Name, Description: s.Description, Invocation: invocation,
			ContentHash: skill.Hash(s), Shards: len(shards), AllowedTools: s.AllowedTools})
	}
	writeCatalog(t, filepath.Join(base, "catalog"), c)
}

// writeCatalog encodes a catalog into shard folders under dir.
func writeCatalog(t *testing.T, dir string, c *catalog.Catalog) {
	t.Helper()
	shards, err := catalog.Encode(c, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, data := range shards {
		keys := map[string][]byte{}
		for k, v := range data {
			keys[k] = []byte(v)
		}
		writeKeys(t, filepath.Join(dir, strconv.Itoa(i)), keys)
	}
}

// writeKeys writes keys into dir as the kubelet updates a ConfigMap
// volume, in one atomic swap: a catalog watcher never reads half of an
// update.
func writeKeys(t *testing.T, dir string, keys map[string][]byte) {
	t.Helper()
	kubeletfs.MountConfigMap(t, dir, keys)
}

// fixture is a runtime serving its API on loopback, talking to a scripted
// model, in a namespace of its own.
type fixture struct {
	ns        string
	model     *modeltest.Server
	rt        *agent.Runtime
	api       *httptest.Server
	token     string
	tokenFile string
}

// options shape a fixture.
type options struct {
	store *catalog.Store
	// skills, when set, is served instead of store.
	skills agent.Skills
	kube   client.WithWatch
	ns     string
	config func(*agent.Config)
	log    logr.Logger
}

// newFixture starts a runtime for agent "ops" that replays steps as its
// model, serves testSkills, and authenticates as an admin unless opts say
// otherwise.
func newFixture(t *testing.T, opts options, steps ...modeltest.Step) *fixture {
	t.Helper()
	f := &fixture{ns: opts.ns, model: modeltest.New(steps...), token: "s3cret-token"}
	t.Cleanup(f.model.Close)
	if f.ns == "" {
		f.ns = namespace(t)
	}
	if opts.store == nil {
		opts.store = mount(t, "You are the ops agent of the shop team.", testSkills()...)
	}
	if opts.kube == nil {
		kube, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		opts.kube = kube
	}
	f.tokenFile = filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f.tokenFile, []byte(f.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := agent.Config{
		Agent: "ops", Namespace: f.ns, Identity: "admin",
		Model: agent.ModelConfig{BaseURL: f.model.URL(), Name: "test-model", Timeout: 10 * time.Second,
			MaxRetries: 2, MaxRetryDelay: 5 * time.Millisecond},
		TokenFile:    f.tokenFile,
		KubeConfig:   env.Config,
		CommandWait:  timeout,
		ApprovalWait: time.Second,
	}
	if opts.config != nil {
		opts.config(&cfg)
	}
	log := opts.log
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	var skills agent.Skills = opts.store
	if opts.skills != nil {
		skills = opts.skills
	}
	rt, err := agent.New(cfg, skills, opts.kube, log)
	if err != nil {
		t.Fatal(err)
	}
	f.rt = rt
	// The API is served as cmd/agent serves it: the runtime's server, with
	// its timeouts, behind its connection limit.
	f.api = httptest.NewUnstartedServer(nil)
	f.api.Config = rt.Server()
	f.api.Listener = rt.Listener(f.api.Listener)
	f.api.Start()
	t.Cleanup(f.api.Close)
	return f
}

// do sends a request to the runtime's API with a bearer token (none when
// empty) and returns the status and body.
func (f *fixture) do(t *testing.T, method, path, token string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, f.api.URL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, data
}

// completion is the part of a chat.completion the tests read.
type completion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Choices []struct {
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
}

// chat sends user messages to the runtime and returns its answer.
func (f *fixture) chat(t *testing.T, messages ...string) string {
	t.Helper()
	msgs := make([]map[string]string, 0, len(messages))
	for _, m := range messages {
		msgs = append(msgs, map[string]string{"role": "user", "content": m})
	}
	code, body := f.do(t, http.MethodPost, "/v1/chat/completions", f.token, map[string]any{"model": "ops", "messages": msgs})
	if code != http.StatusOK {
		t.Fatalf("chat answered %d: %s", code, body)
	}
	var c completion
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatal(err)
	}
	if c.Object != "chat.completion" || len(c.Choices) != 1 || c.Choices[0].Message.Role != "assistant" {
		t.Fatalf("not a chat completion: %s", body)
	}
	return c.Choices[0].Message.Content
}

// runs lists the CommandRuns of a namespace.
func runs(g Gomega, ns string) []skillsv1.CommandRun {
	var list skillsv1.CommandRunList
	g.Expect(k8s.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	return list.Items
}

// toolResult decodes a JSON tool result the model received.
func toolResult(t *testing.T, text string) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		t.Fatalf("tool result is not JSON: %q", text)
	}
	return out
}

// namespace creates a namespace of its own for a test.
func namespace(t *testing.T) string { return env.Namespace(t) }
