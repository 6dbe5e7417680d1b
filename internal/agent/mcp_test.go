package agent_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/agent"
	"github.com/kubeskills/kubeskills/internal/mcpskills"
	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/internal/skill"
	"github.com/kubeskills/kubeskills/internal/skillapi"
)

// Protocol revisions a client may speak: the one of the initialize
// handshake, and the newest, which discovers the server statelessly.
const (
	legacyProtocol = "2025-11-25"
	latestProtocol = ""
)

// bearer sends a token with every request.
type bearer string

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(req)
}

// mcpClient connects the official Go SDK's client to the fixture's /mcp
// with the given protocol revision and token, registering the Skills
// extension's methods.
func (f *fixture) mcpClient(t *testing.T, protocol, token string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "kubeskills-test", Version: "v1"}, opts)
	if err := mcp.AddSendingCustomMethod[*mcpskills.ListParams, *mcpskills.ListResult](c, mcpskills.MethodList); err != nil {
		t.Fatal(err)
	}
	if err := mcp.AddSendingCustomMethod[*mcpskills.GetParams, *mcpskills.GetResult](c, mcpskills.MethodGet); err != nil {
		t.Fatal(err)
	}
	tr := &mcp.StreamableClientTransport{Endpoint: f.api.URL + "/mcp", HTTPClient: &http.Client{Transport: bearer(token)}, MaxRetries: -1}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cs, err := c.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: protocol})
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

func (f *fixture) mcpSession(t *testing.T, protocol string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	cs, err := f.mcpClient(t, protocol, f.token, opts)
	if err != nil {
		t.Fatalf("connecting to /mcp: %v", err)
	}
	return cs
}

func listSkills(t *testing.T, cs *mcp.ClientSession) *mcpskills.ListResult {
	t.Helper()
	res, err := mcp.CallCustomMethod[*mcpskills.ListParams, *mcpskills.ListResult](context.Background(), cs, mcpskills.MethodList, &mcpskills.ListParams{})
	if err != nil {
		t.Fatalf("skills/list: %v", err)
	}
	return res
}

// readAll reads every file an entry lists and checks it against the
// entry's digest and size, as a host must; it returns the bytes by path.
func readAll(t *testing.T, cs *mcp.ClientSession, entry mcpskills.Skill) map[string][]byte {
	t.Helper()
	g := NewWithT(t)
	name, _, err := mcpskills.ParseURI(entry.URI)
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string][]byte{}
	for _, r := range entry.Resources.Files {
		res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: r.URI})
		g.Expect(err).NotTo(HaveOccurred(), r.URI)
		g.Expect(res.Contents).To(HaveLen(1))
		c := res.Contents[0]
		data := c.Blob
		if c.Text != "" {
			data = []byte(c.Text)
		}
		g.Expect(c.URI).To(Equal(r.URI))
		g.Expect(len(data)).To(Equal(r.Size), r.URI)
		g.Expect(mcpskills.Digest(data)).To(Equal(r.Digest), r.URI)
		n, p, err := mcpskills.ParseURI(r.URI)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(Equal(name), "a skill's files are under its own path")
		out[p] = data
	}
	return out
}

// TestMCPServesTheCatalog: a client of either protocol revision sees the
// Skills extension declared; skills/list is the Agent's catalog (the
// Disabled skill absent, the Explicit one marked), each entry's front
// matter is its SKILL.md's and its files are read with resources/read,
// text as text and bytes as a blob, each matching its digest and size;
// skills/get answers for a served skill and -32602 for anything else.
func TestMCPServesTheCatalog(t *testing.T) {
	f := newFixture(t, options{})
	want := map[string]*skill.Skill{}
	for _, s := range testSkills() {
		want[s.Name] = s
	}
	for _, protocol := range []string{legacyProtocol, latestProtocol} {
		t.Run("protocol="+protocol, func(t *testing.T) {
			g := NewWithT(t)
			cs := f.mcpSession(t, protocol, nil)
			init := cs.InitializeResult()
			g.Expect(init.Capabilities.Extensions).To(HaveKey(mcpskills.ExtensionID))
			g.Expect(init.Capabilities.Resources).NotTo(BeNil())
			g.Expect(init.Capabilities.Resources.ListChanged).To(BeTrue())

			list := listSkills(t, cs)
			g.Expect(list.ResultType).To(Equal("complete"))
			g.Expect(list.TTLMs).To(BeNumerically(">", 0))
			var uris []string
			for _, e := range list.Skills {
				uris = append(uris, e.URI)
			}
			g.Expect(uris).To(Equal([]string{"skill://crash-triage/SKILL.md", "skill://release-notes/SKILL.md"}))

			for _, e := range list.Skills {
				s := want[e.Frontmatter["name"].(string)]
				g.Expect(e.Frontmatter).To(HaveKeyWithValue("description", s.Description))
				files := readAll(t, cs, e)
				g.Expect(files).To(HaveKeyWithValue("SKILL.md", skill.Render(s)))
				g.Expect(files).To(HaveLen(len(s.Files) + 1))
				for _, file := range s.Files {
					g.Expect(files).To(HaveKeyWithValue(file.Path, file.Content))
				}
			}
			explicit := list.Skills[1]
			g.Expect(explicit.Meta).To(HaveKeyWithValue("kubeskills.io/invocation", "Explicit"))
			g.Expect(explicit.Frontmatter).To(HaveKeyWithValue("disable-model-invocation", true))
			g.Expect(list.Skills[0].Meta).To(HaveKeyWithValue("kubeskills.io/invocation", "Auto"))

			bin, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "skill://crash-triage/bin/tool"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(bin.Contents[0].Blob).To(Equal([]byte{0xff, 0xfe, 0x00, 0x01}))
			g.Expect(bin.Contents[0].Text).To(BeEmpty())

			got, err := mcp.CallCustomMethod[*mcpskills.GetParams, *mcpskills.GetResult](context.Background(), cs, mcpskills.MethodGet,
				&mcpskills.GetParams{URI: "skill://release-notes/SKILL.md"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.ResultType).To(Equal("complete"))
			g.Expect(got.Skill).To(Equal(explicit))

			for _, uri := range []string{"skill://wipe-cluster/SKILL.md", "skill://nope/SKILL.md", "skill://crash-triage/references/guide.md", "file:///etc/passwd"} {
				_, err := mcp.CallCustomMethod[*mcpskills.GetParams, *mcpskills.GetResult](context.Background(), cs, mcpskills.MethodGet,
					&mcpskills.GetParams{URI: uri})
				g.Expect(wireCode(err)).To(Equal(int64(jsonrpc.CodeInvalidParams)), uri)
			}
			for _, uri := range []string{"skill://wipe-cluster/SKILL.md", "skill://crash-triage/nope.md", "skill://crash-triage/../release-notes/SKILL.md"} {
				_, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
				g.Expect(wireCode(err)).To(Equal(int64(jsonrpc.CodeInvalidParams)), uri)
			}
		})
	}
}

// wireCode is the JSON-RPC error code of a failed call, or 0.
func wireCode(err error) int64 {
	var werr *jsonrpc.Error
	if errors.As(err, &werr) {
		return werr.Code
	}
	return 0
}

// TestMCPServesTheSampleSkills: every sample skill folder, imported as
// `kubectl skills import` does and served by the operator from its
// ConfigMaps, is served over MCP byte for byte: each file's digest and size
// in skills/list are those of the file in config/samples/skills, and
// resources/read returns those bytes.
func TestMCPServesTheSampleSkills(t *testing.T) {
	g := NewWithT(t)
	root := filepath.Join("..", "..", "config", "samples", "skills")
	dirs, err := os.ReadDir(root)
	g.Expect(err).NotTo(HaveOccurred())
	var samples []*skill.Skill
	for _, d := range dirs {
		s, err := skill.ParseDir(filepath.Join(root, d.Name()))
		g.Expect(err).NotTo(HaveOccurred(), d.Name())
		samples = append(samples, s)
	}
	g.Expect(samples).To(HaveLen(12))
	ns := namespace(t)
	var names []string
	for _, s := range samples {
		g.Expect(k8s.Create(context.Background(), skillapi.ToObject(s, ns))).To(Succeed())
		names = append(names, s.Name)
	}
	f := newFixture(t, options{ns: ns, store: mountServed(t, ns, names...)})
	cs := f.mcpSession(t, legacyProtocol, nil)
	list := listSkills(t, cs)
	g.Expect(list.Skills).To(HaveLen(len(samples)))
	for _, e := range list.Skills {
		name := e.Frontmatter["name"].(string)
		want, err := mcpskills.FolderResources(filepath.Join(root, name), name)
		g.Expect(err).NotTo(HaveOccurred())
		got := map[string]mcpskills.SkillResource{}
		for _, r := range e.Resources.Files {
			got[r.URI] = r
		}
		g.Expect(got).To(Equal(want), "the entry of %s lists every file of its folder, with its digest and size", name)
		readAll(t, cs, e)
	}
}

// TestMCPNeedsTheToken: /mcp is behind the API's token: none or a wrong
// one is 401 and opens no session; spec.mcp.enabled=false serves no /mcp.
func TestMCPNeedsTheToken(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, options{})
	init := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": legacyProtocol, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "x", "version": "1"}}}
	for _, token := range []string{"", "wrong"} {
		code, _ := f.do(t, http.MethodPost, "/mcp", token, init)
		g.Expect(code).To(Equal(http.StatusUnauthorized), "token %q", token)
		_, err := f.mcpClient(t, legacyProtocol, token, nil)
		g.Expect(err).To(HaveOccurred())
	}
	f.mcpSession(t, legacyProtocol, nil)

	off := newFixture(t, options{config: func(c *agent.Config) { c.DisableMCP = true }})
	code, _ := off.do(t, http.MethodPost, "/mcp", off.token, init)
	g.Expect(code).To(Equal(http.StatusNotFound))
}

// TestMCPSessionsAreBounded: past the session limit a new session is
// refused with 503 while the open ones go on, their streams open and their
// calls served, and the metrics count them; a session idle for longer
// than the idle timeout is closed, which frees its place.
func TestMCPSessionsAreBounded(t *testing.T) {
	g := NewWithT(t)
	const idle = 2 * time.Second
	f := newFixture(t, options{config: func(c *agent.Config) {
		c.Server.MCPMaxSessions = 2
		c.Server.MCPSessionIdle = idle
		// Each session's notification stream holds a slot: calls still
		// get theirs.
		c.Server.MaxConcurrentRequests = 2
	}})
	// The first session sends nothing more: it goes idle before the
	// second, which is used, so it is the one closed first.
	first := f.mcpSession(t, legacyProtocol, nil)
	second := f.mcpSession(t, legacyProtocol, nil)
	_, err := f.mcpClient(t, legacyProtocol, f.token, nil)
	g.Expect(err).To(MatchError(ContainSubstring("Service Unavailable")))
	g.Expect(listSkills(t, second).Skills).To(HaveLen(2), "open sessions are served")
	_, metrics := f.do(t, http.MethodGet, "/metrics", metricsToken(t), nil)
	g.Expect(string(metrics)).To(ContainSubstring("\n"+agent.MetricMCPSessions+" 2\n"), "the metrics count the sessions open")

	g.Eventually(func() error {
		_, err := f.mcpClient(t, legacyProtocol, f.token, nil)
		return err
	}, 4*idle, interval).Should(Succeed(), "idle sessions are closed and free their places")
	_, err = mcp.CallCustomMethod[*mcpskills.ListParams, *mcpskills.ListResult](context.Background(), first, mcpskills.MethodList, &mcpskills.ListParams{})
	g.Expect(err).To(HaveOccurred(), "an idle session is closed")
}

// notifications records what an MCP client was told.
type notifications struct {
	mu      sync.Mutex
	listed  int
	updated []string
}

func (n *notifications) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
			n.mu.Lock()
			defer n.mu.Unlock()
			n.listed++
		},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			n.mu.Lock()
			defer n.mu.Unlock()
			n.updated = append(n.updated, req.Params.URI)
		},
	}
}

func (n *notifications) seen() (int, []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.listed, append([]string(nil), n.updated...)
}

// TestMCPSkillChangeNotifiesOpenSessions: a Skill served by the operator
// is edited while a session is open. Once the new ConfigMaps reach the
// pod's mounts, the session is told the resource list changed, and that
// the skill's files it subscribed to were updated, with no restart; the
// next skills/list carries the new digest and the read the new bytes.
func TestMCPSkillChangeNotifiesOpenSessions(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, kube, _ := commandSetup(t, nil)
	base := t.TempDir()
	store := mountServedAt(t, base, ns, "hello")
	f := newFixture(t, options{ns: ns, kube: kube, store: store})
	followCtx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	go f.rt.FollowCatalog(followCtx, 100*time.Millisecond)

	var n notifications
	cs := f.mcpSession(t, legacyProtocol, n.options())
	before := listSkills(t, cs).Skills
	g.Expect(before).To(HaveLen(1))
	g.Expect(cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "skill://hello/SKILL.md"})).To(Succeed())
	listedBefore, updatedBefore := n.seen()
	g.Expect(updatedBefore).To(BeEmpty())

	s := &skillsv1.Skill{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hello"}, s)).To(Succeed())
	s.Spec.Instructions = strings.Replace(helloBody, "greet with echo", "greet with printf", 1)
	g.Expect(k8s.Update(ctx, s)).To(Succeed())
	mountServedAt(t, base, ns, "hello")
	g.Expect(store.Reload()).To(Succeed())

	g.Eventually(func(g Gomega) {
		listed, updated := n.seen()
		g.Expect(listed).To(BeNumerically(">", listedBefore))
		g.Expect(updated).To(ContainElement("skill://hello/SKILL.md"))
	}, timeout, interval).Should(Succeed())
	after := listSkills(t, cs).Skills
	g.Expect(after[0].Resources.Files[0].Digest).NotTo(Equal(before[0].Resources.Files[0].Digest))
	files := readAll(t, cs, after[0])
	g.Expect(string(files["SKILL.md"])).To(ContainSubstring("greet with printf"))
}

// TestMCPRunsCommandsThroughThePolicy: run_command over MCP files a
// CommandRun of this Agent, as the runtime's identity: an Always command
// reaches its Job and answers with its output; an Ask command answers at
// once, without the approval wait, with the run's name and the approve
// command, and command_status follows it once a person approved; the
// named skill's allowed-tools narrow the policy; a skill outside the
// catalog is a tool error that files nothing. The tools say which of them
// only reads.
func TestMCPRunsCommandsThroughThePolicy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f, alice := commandFixture(t, nil, func(c *agent.Config) { c.ApprovalWait = 20 * time.Second })
	cs := f.mcpSession(t, legacyProtocol, nil)

	tools, err := cs.ListTools(ctx, nil)
	g.Expect(err).NotTo(HaveOccurred())
	readOnly := map[string]bool{}
	for _, tool := range tools.Tools {
		readOnly[tool.Name] = tool.Annotations != nil && tool.Annotations.ReadOnlyHint
	}
	g.Expect(readOnly).To(Equal(map[string]bool{"run_command": false, "command_status": true}))

	call := func(name string, args map[string]any) <-chan *mcp.CallToolResult {
		out := make(chan *mcp.CallToolResult, 1)
		go func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
			if err != nil {
				res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
			}
			out <- res
		}()
		return out
	}
	structured := func(res *mcp.CallToolResult) map[string]any {
		g.Expect(res.IsError).To(BeFalse(), "%s", res.Content[0].(*mcp.TextContent).Text)
		m, ok := res.StructuredContent.(map[string]any)
		g.Expect(ok).To(BeTrue(), "structured content: %#v", res.StructuredContent)
		return m
	}

	echo := call("run_command", map[string]any{"command": "echo hi", "skill": "hello"})
	run := waitRun(t, f.ns, "echo hi", skillsv1.PhaseRunning)
	g.Expect(run.Spec.Agent).To(Equal("ops"))
	g.Expect(run.Spec.Skill).To(Equal("hello"))
	g.Expect(run.Spec.RequestedBy).To(Equal("system:serviceaccount:" + f.ns + ":ops-agent"))
	g.Expect(run.Status.JobName).NotTo(BeEmpty(), "an Always command reaches its Job")
	finishJob(t, f.ns, run.Name, &runner.Result{Stdout: "hi\n"})
	var res *mcp.CallToolResult
	g.Eventually(echo, timeout).Should(Receive(&res))
	g.Expect(structured(res)).To(Equal(map[string]any{
		"phase": "Succeeded", "run": run.Name, "exitCode": 0.0,
		"stdout": "hi\n", "stderr": "", "stdoutTruncated": false, "stderrTruncated": false,
		"decision": map[string]any{"action": "Always", "rule": "echo *", "reason": run.Status.Decision.Reason},
	}))

	start := time.Now()
	ask := call("run_command", map[string]any{"command": "kubectl scale deploy/web --replicas=3"})
	g.Eventually(ask, timeout).Should(Receive(&res))
	g.Expect(time.Since(start)).To(BeNumerically("<", 10*time.Second), "an Ask answers at once, not after the approval wait")
	pending := waitRun(t, f.ns, "kubectl scale deploy/web --replicas=3", skillsv1.PhaseAwaitingApproval)
	g.Expect(structured(res)).To(Equal(map[string]any{
		"phase": "AwaitingApproval", "run": pending.Name, "message": "awaiting approval: kubectl skills approve " + pending.Name,
	}))

	status := call("command_status", map[string]any{"run": pending.Name})
	pending.Spec.Approval = &skillsv1.Approval{Decision: skillsv1.Approved, Approver: "alice", Reason: "planned"}
	g.Expect(alice.Update(ctx, pending)).To(Succeed())
	waitRun(t, f.ns, pending.Spec.Command, skillsv1.PhaseRunning)
	finishJob(t, f.ns, pending.Name, &runner.Result{Stdout: "deployment.apps/web scaled\n"})
	g.Eventually(status, timeout).Should(Receive(&res))
	g.Expect(structured(res)).To(HaveKeyWithValue("stdout", "deployment.apps/web scaled\n"))

	// The skill's allowed-tools narrow the policy, as for /v1: `echo` is
	// Always, but not among what the skill expects to run.
	hello := &skillsv1.Skill{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "hello"}, hello)).To(Succeed())
	hello.Spec.AllowedTools = []string{"Bash(ls:*)"}
	g.Expect(k8s.Update(ctx, hello)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "hello"}, hello)).To(Succeed())
		g.Expect(hello.Status.ServedGeneration).To(Equal(hello.Generation))
	}, timeout, interval).Should(Succeed())
	g.Eventually(call("run_command", map[string]any{"command": "echo narrowed", "skill": "hello"}), timeout).Should(Receive(&res))
	g.Expect(structured(res)).To(HaveKeyWithValue("phase", "AwaitingApproval"))
	narrowed := waitRun(t, f.ns, "echo narrowed", skillsv1.PhaseAwaitingApproval)
	g.Expect(narrowed.Status.Decision.Action).To(Equal(skillsv1.ActionAsk))
	g.Expect(narrowed.Status.Decision.Reason).To(ContainSubstring("not by the skill's allowed-tools"))

	before := len(runs(g, f.ns))
	g.Eventually(call("run_command", map[string]any{"command": "echo x", "skill": "nope"}), timeout).Should(Receive(&res))
	g.Expect(res.IsError).To(BeTrue())
	g.Expect(res.Content[0].(*mcp.TextContent).Text).To(ContainSubstring("not in this agent's catalog"))
	g.Expect(runs(g, f.ns)).To(HaveLen(before), "a refused call files no run")
}
