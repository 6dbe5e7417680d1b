//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/mcpskills"
)

// The MCP client of test/e2e/mcp: client.mjs, run by node with the npm
// packages its package-lock.json pins (the official TypeScript SDK,
// @modelcontextprotocol/sdk). installMCPClient installs them with `npm ci`
// into bin/e2e/mcp, which git ignores, once per lockfile.
const (
	mcpClientSource = "test/e2e/mcp"
	mcpClientScript = "client.mjs"
	// mcpLockStamp, in node_modules, holds the SHA-256 of the
	// package-lock.json the packages were installed from.
	mcpLockStamp = ".kubeskills-lock-sha256"
	// nodeMajor is the oldest Node.js the SDK runs on.
	nodeMajor = 18
)

// installMCPClient copies the MCP client to bin/e2e/mcp and installs its
// pinned packages there with `npm ci`, unless the packages of the same
// lockfile are there from an earlier run. It returns the directory.
func installMCPClient(t *testing.T) string {
	t.Helper()
	src := filepath.Join(c.root, mcpClientSource)
	dir := filepath.Join(c.root, "bin", "e2e", "mcp")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var lock []byte
	for _, name := range []string{"package.json", "package-lock.json", mcpClientScript} {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatalf("failed to read the MCP client: %v", err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if name == "package-lock.json" {
			lock = data
		}
	}
	sum := sha256.Sum256(lock)
	want := hex.EncodeToString(sum[:])
	stamp := filepath.Join(dir, "node_modules", mcpLockStamp)
	if got, err := os.ReadFile(stamp); err == nil && string(got) == want {
		return dir
	}

	out, err := exec.Command("node", "--version").Output()
	if err != nil {
		t.Fatalf("the MCP client needs Node.js %d or later and npm (make test-tools installs Debian's): %v", nodeMajor, err)
	}
	version := strings.TrimSpace(string(out))
	if major, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(version, "v"), ".", 2)[0]); err != nil || major < nodeMajor {
		t.Fatalf("the MCP client needs Node.js %d or later; node is %s", nodeMajor, version)
	}
	start := time.Now()
	npm := exec.Command("npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	npm.Dir = dir
	if out, err := npm.CombinedOutput(); err != nil {
		t.Fatalf("npm ci of the MCP client in %s failed: %v\n%s", dir, err, out)
	}
	if err := os.WriteFile(stamp, []byte(want), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("installed the MCP client's packages (node %s) in %.1fs", version, time.Since(start).Seconds())
	return dir
}

// mcpSeen is what client.mjs prints.
type mcpSeen struct {
	ProtocolVersion     string          `json:"protocolVersion"`
	SkillsExtension     json.RawMessage `json:"skillsExtension"`
	ResourcesCapability bool            `json:"resourcesCapability"`
	Skills              []mcpSkill      `json:"skills"`
	Get                 *struct {
		URI         string `json:"uri"`
		MatchesList bool   `json:"matchesList"`
	} `json:"get"`
	Reads []struct {
		Skill        string `json:"skill"`
		URI          string `json:"uri"`
		Size         int    `json:"size"`
		Digest       string `json:"digest"`
		ListedSize   int    `json:"listedSize"`
		ListedDigest string `json:"listedDigest"`
		Verified     bool   `json:"verified"`
	} `json:"reads"`
	Tools []struct {
		Name        string `json:"name"`
		Annotations *struct {
			ReadOnlyHint *bool `json:"readOnlyHint"`
		} `json:"annotations"`
	} `json:"tools"`
	Run struct {
		Command string        `json:"command"`
		First   mcpToolResult `json:"first"`
		Last    mcpToolResult `json:"last"`
		Polls   int           `json:"polls"`
	} `json:"run"`
	// Bridge is how the server the client started over stdio ended, once
	// the client closed its stdin; nil over HTTP.
	Bridge *struct {
		ExitCode *int   `json:"exitCode"`
		Signal   string `json:"signal"`
		Error    string `json:"error"`
	} `json:"bridge"`
}

// mcpSkill is a Skill entry of the Skills extension.
type mcpSkill struct {
	URI         string `json:"uri"`
	Frontmatter struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	} `json:"frontmatter"`
	Resources []struct {
		URI    string `json:"uri"`
		Digest string `json:"digest"`
		Size   int    `json:"size"`
	} `json:"resources"`
}

// mcpToolResult is a run_command or command_status result as the client
// saw it.
type mcpToolResult struct {
	IsError           bool          `json:"isError"`
	StructuredContent commandResult `json:"structuredContent"`
	TextMatches       bool          `json:"textMatches"`
}

// runMCPClient runs client.mjs with args, and env added to the test's, and
// returns what it saw. It fails the test when the client fails, with its
// stderr, where the stderr of a server it starts goes too; on success that
// stderr is logged.
func runMCPClient(t *testing.T, dir string, env []string, args ...string) mcpSeen {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{filepath.Join(dir, mcpClientScript)}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("the MCP client failed: %v\nstderr:\n%s\nstdout:\n%s", err, stderr.String(), stdout.String())
	}
	if stderr.Len() > 0 {
		t.Logf("the MCP client's stderr:\n%s", stderr.String())
	}
	var seen mcpSeen
	if err := json.Unmarshal(stdout.Bytes(), &seen); err != nil {
		t.Fatalf("the MCP client printed what is not its report: %v\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	t.Logf("the MCP client (protocol %s) saw %d skills, read %d files, and ran %q: %s, in %.1fs",
		seen.ProtocolVersion, len(seen.Skills), len(seen.Reads), seen.Run.Command,
		seen.Run.Last.StructuredContent.Phase, time.Since(start).Seconds())
	return seen
}

// mcpClientDrivesTheAgent: an MCP host that is not kubeskills's own, the
// official TypeScript SDK, reaches the kube agent's /mcp through its
// Service with the agent's token. It lists the agent's catalog through the
// Skills extension, reads every file of it with resources/read and checks
// each SHA-256 and size against the listing, which also match the folder
// `kubectl skills export` writes; and run_command runs
// `kubectl get pods -o name`, Always by the kube agent's policy, in a
// sandbox with the policy's identity, with the cluster's real pods as its
// output. Then the same client does the same over stdio, through
// `kubectl skills mcp` (mcpBridgeDrivesTheAgent).
func mcpClientDrivesTheAgent(t *testing.T, s *state) {
	g := NewWithT(t)
	url := s.kube.url + "/mcp"

	// No token or a wrong one: no session.
	initialize := map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "e2e", "version": "1"}}}
	for _, token := range []string{"", "not-" + s.kube.token} {
		status, body := postJSONStatus(t, url, token, initialize)
		g.Expect(status).To(Equal(http.StatusUnauthorized), "POST /mcp with the token %q: %s", token, body)
	}

	seen := runMCPClient(t, s.mcpClient, []string{"MCP_TOKEN=" + s.kube.token}, url, "kubectl get pods -o name")
	judgeMCPSession(t, seen)

	t.Run("over stdio through kubectl skills mcp", func(t *testing.T) { mcpBridgeDrivesTheAgent(t, s) })
}

// judgeMCPSession checks what client.mjs saw of the kube agent: its
// catalog, every file of it, the tools, and a run of
// `kubectl get pods -o name`.
func judgeMCPSession(t *testing.T, seen mcpSeen) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()

	// The listing is the agent's catalog.
	var agent skillsv1.Agent
	g.Expect(c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: kubeAgent}, &agent)).To(Succeed())
	var catalog, listed []string
	for _, sk := range agent.Status.Skills {
		catalog = append(catalog, sk.Name)
	}
	g.Expect(catalog).NotTo(BeEmpty())
	g.Expect(seen.SkillsExtension).NotTo(BeEmpty(), "the server does not declare io.modelcontextprotocol/skills")
	g.Expect(string(seen.SkillsExtension)).NotTo(Equal("null"), "the server does not declare io.modelcontextprotocol/skills")
	g.Expect(seen.ResourcesCapability).To(BeTrue(), "the server does not declare resources")
	for _, sk := range seen.Skills {
		listed = append(listed, sk.Frontmatter.Name)
		g.Expect(sk.URI).To(Equal("skill://"+sk.Frontmatter.Name+"/SKILL.md"), "entry %s", sk.Frontmatter.Name)
		g.Expect(sk.Frontmatter.Description).NotTo(BeEmpty(), "entry %s", sk.URI)
	}
	g.Expect(listed).To(ConsistOf(catalog), "skills/list is not the agent's catalog")
	g.Expect(seen.Get).NotTo(BeNil())
	g.Expect(seen.Get.MatchesList).To(BeTrue(), "skills/get of %s differs from its skills/list entry", seen.Get.URI)

	// Every file was read and is what its entry says; the entries are the
	// files `kubectl skills export` writes, byte for byte.
	files := 0
	for _, sk := range seen.Skills {
		files += len(sk.Resources)
		exported := exportedFiles(t, sk.Frontmatter.Name)
		served := map[string]mcpskills.SkillResource{}
		for _, r := range sk.Resources {
			served[r.URI] = mcpskills.SkillResource{URI: r.URI, Digest: r.Digest, Size: r.Size}
		}
		g.Expect(served).To(Equal(exported), "the files of %s are not those kubectl skills export writes", sk.URI)
	}
	g.Expect(seen.Reads).To(HaveLen(files))
	for _, r := range seen.Reads {
		g.Expect(r.Verified).To(BeTrue(), "%s: read %d bytes, %s; listed %d bytes, %s", r.URI, r.Size, r.Digest, r.ListedSize, r.ListedDigest)
	}

	// The tools, and which only read.
	readOnly := map[string]bool{}
	for _, tool := range seen.Tools {
		readOnly[tool.Name] = tool.Annotations != nil && tool.Annotations.ReadOnlyHint != nil && *tool.Annotations.ReadOnlyHint
	}
	g.Expect(readOnly).To(HaveKeyWithValue("run_command", false))
	g.Expect(readOnly).To(HaveKeyWithValue("command_status", true))

	// run_command ran the command in a sandbox, as the policy's identity,
	// and its output is the cluster's pods.
	for _, res := range []mcpToolResult{seen.Run.First, seen.Run.Last} {
		g.Expect(res.TextMatches).To(BeTrue(), "a tool result's text is not its structured content: %+v", res)
	}
	res := seen.Run.Last.StructuredContent
	g.Expect(seen.Run.Last.IsError).To(BeFalse(), res.Message)
	g.Expect(res.Phase).To(Equal(string(skillsv1.PhaseSucceeded)), "%s %s", res.Message, res.Stderr)
	g.Expect(res.ExitCode).To(HaveValue(BeEquivalentTo(0)))
	g.Expect(res.Decision).NotTo(BeNil())
	g.Expect(res.Decision.Action).To(Equal("Always"))
	g.Expect(res.Stdout).To(MatchRegexp(`^(pod/\S+\n)+$`), "not the output of kubectl get pods -o name")
	g.Expect(res.Stdout).To(MatchRegexp(`(?m)^pod/web-`))
	g.Expect(res.Stdout).To(MatchRegexp(`(?m)^pod/model-`))
	var run skillsv1.CommandRun
	g.Expect(c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: res.Run}, &run)).To(Succeed())
	g.Expect(run.Spec.Agent).To(Equal(kubeAgent))
	g.Expect(run.Spec.Command).To(Equal("kubectl get pods -o name"))
	g.Expect(run.Status.Phase).To(Equal(skillsv1.PhaseSucceeded))
	g.Expect(run.Status.ServiceAccountName).To(Equal(viewer))
}

// mcpBridgeDrivesTheAgent: the client of mcpClientDrivesTheAgent, as a
// host that starts its MCP servers as commands, starts
// `kubectl-skills mcp --agent kube` and speaks to it on stdio. The bridge
// runs as a user who holds nothing but the Role of docs/mcp.md ("The rights
// it needs"), with no token of the agent's: it reads it from the Agent's
// Secret, and reaches the agent through the kubelet's port-forward of a
// ready pod. The client sees the same catalog, files and run as through the
// Service, and the bridge ends with status 0 when the client closes its
// stdin.
func mcpBridgeDrivesTheAgent(t *testing.T, s *state) {
	g := NewWithT(t)
	kubeconfig := bridgeUser(t)
	bridge := filepath.Join(c.pluginDir, "kubectl-skills")
	seen := runMCPClient(t, s.mcpClient, nil, "--stdio", "kubectl get pods -o name", "--",
		bridge, "mcp", "--agent", kubeAgent, "-n", ns, "--kubeconfig", kubeconfig)
	judgeMCPSession(t, seen)
	g.Expect(seen.Bridge).NotTo(BeNil(), "the client did not report how the bridge ended")
	g.Expect(seen.Bridge.Error).To(BeEmpty())
	g.Expect(seen.Bridge.ExitCode).To(HaveValue(Equal(0)),
		"the bridge did not end by itself, with status 0, when the client closed its stdin (signal %q)", seen.Bridge.Signal)
}

// bridgeUser makes a user who may run the bridge to the kube agent and no
// more: a ServiceAccount bound to the Role of docs/mcp.md, read from the
// page, with the sample's names (agent ops, Service agent-ops, Secret
// ops-token) those of the kube agent. It returns the path of a kubeconfig
// of the cluster with a token of the user's; the objects go when the test
// ends.
func bridgeUser(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	var agent skillsv1.Agent
	if err := c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: kubeAgent}, &agent); err != nil {
		t.Fatal(err)
	}
	if agent.Status.TokenSecretName == "" {
		t.Fatalf("agent %s/%s names no token Secret in its status", ns, kubeAgent)
	}

	role := docsBridgeRole(t)
	names := map[string]string{
		"ops":       kubeAgent,
		"agent-ops": "agent-" + kubeAgent,
		"ops-token": agent.Status.TokenSecretName,
	}
	for i, rule := range role.Rules {
		for j, name := range rule.ResourceNames {
			renamed, ok := names[name]
			if !ok {
				t.Fatalf("the Role of docs/mcp.md names %q, which is not of the sample agent ops", name)
			}
			role.Rules[i].ResourceNames[j] = renamed
		}
	}
	const user = "e2e-mcp-bridge"
	role.Name, role.Namespace = user, ns
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns}}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: user, Namespace: ns}},
	}
	for _, obj := range []client.Object{sa, role, binding} {
		if err := c.client.Create(ctx, obj); err != nil {
			t.Fatalf("failed to create %T %s: %v", obj, obj.GetName(), err)
		}
		t.Cleanup(func() {
			if err := c.client.Delete(context.Background(), obj); client.IgnoreNotFound(err) != nil {
				t.Errorf("failed to delete %T %s: %v", obj, obj.GetName(), err)
			}
		})
	}
	return serviceAccountKubeconfig(t, user, false)
}

// docsBridgeRole is the Role of docs/mcp.md's "The rights it needs": the
// first YAML block of the section.
func docsBridgeRole(t *testing.T) *rbacv1.Role {
	t.Helper()
	page, err := os.ReadFile(filepath.Join(c.root, "docs", "mcp.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(page), "\n### The rights it needs\n")
	if !ok {
		t.Fatal(`docs/mcp.md has no section "The rights it needs"`)
	}
	m := regexp.MustCompile("(?s)\n```yaml\n(.*?)\n```").FindStringSubmatch(section)
	if m == nil {
		t.Fatal(`docs/mcp.md's "The rights it needs" has no YAML block`)
	}
	var role rbacv1.Role
	if err := yaml.UnmarshalStrict([]byte(m[1]), &role); err != nil {
		t.Fatalf(`the YAML of docs/mcp.md's "The rights it needs" is not a Role: %v`, err)
	}
	if role.Kind != "Role" || len(role.Rules) == 0 {
		t.Fatalf(`the YAML of docs/mcp.md's "The rights it needs" is not a Role with rules: %s`, m[1])
	}
	return &role
}

// exportedFiles writes the Skill name with `kubectl skills export` and
// returns what a Skills extension entry lists for that folder.
func exportedFiles(t *testing.T, name string) map[string]mcpskills.SkillResource {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	c.mustKubectl(t, "skills", "export", name, "-n", ns, "-o", dir)
	files, err := mcpskills.FolderResources(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	return files
}
