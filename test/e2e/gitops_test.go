//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/mcpskills"
)

// The example skill repository and what its Flux objects are named
// (examples/skill-repo/flux-sync.yaml and flux/).
const (
	skillRepoDir  = "examples/skill-repo"
	fluxSyncFile  = "examples/skill-repo/flux-sync.yaml"
	exampleGitURL = "https://git.example.com/team-a/skills.git"
	teamNS        = "team-a"
	teamAgent     = "team-a"
	teamRepo      = "team-skills" // the GitRepository, the Kustomization and the SkillRepository
)

// gitOpsWithFlux: the example skill repository, a plain folder of SKILL.md
// folders and no generated YAML, is pushed to a Git server and synced by
// Flux's real source- and kustomize-controller, through the documented
// GitRepository and Kustomization. Six transitions, each checked on the
// Skills, the Agent's catalog and MCP: the first sync; a changed skill
// served by the same pod with an open MCP session told; a broken skill that
// Flux's health check reports while its last good version keeps serving;
// the revert; a folder deleted and pruned. Then five commits measure
// commit → served, with a webhook-style reconcile request.
func gitOpsWithFlux(t *testing.T, _ *state) {
	g := NewWithT(t)
	ctx := context.Background()
	installFlux(t)

	// 1. The repository is pushed.
	repo := newGitRepo(t, filepath.Join(c.root, skillRepoDir))
	rev := repo.commit(t, "The team's skills")

	// 2. The cluster follows it, as docs/gitops.md says: the model's
	// address, then the GitRepository and the Kustomization.
	c.mustKubectl(t, "create", "namespace", teamNS)
	c.mustKubectl(t, "create", "configmap", "team-a-model", "-n", teamNS,
		fmt.Sprintf("--from-literal=MODEL_BASE_URL=http://%s:8080/v1", serviceIP(t, "model")),
		"--from-literal=MODEL_NAME=modeltest")
	sync, err := os.ReadFile(filepath.Join(c.root, fluxSyncFile))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(sync)).To(ContainSubstring(exampleGitURL))
	syncFile := filepath.Join(t.TempDir(), "flux-sync.yaml")
	g.Expect(os.WriteFile(syncFile, []byte(strings.Replace(string(sync), exampleGitURL, repo.url, 1)), 0o644)).To(Succeed())
	c.mustKubectl(t, "apply", "-f", syncFile)

	expectSynced(t, rev)
	served := expectServed(t, repo, nil)
	agent := openTeamAgent(t)
	pod := runningAgentPodIn(t, teamNS, teamAgent)
	sess := agent.connect(t)
	g.Expect(sess.names(t)).To(Equal(served))
	sess.expectFiles(t, repo, served...)

	// 3. A commit changes one skill: the same pod serves the new content,
	// and the open session hears of it.
	listed := sess.listChanged()
	repo.write(t, "skills/dns-debug/SKILL.md", repo.read(t, "skills/dns-debug/SKILL.md")+"\nCheck /etc/resolv.conf first.\n")
	repo.write(t, "skills/dns-debug/references/search-domains.md", "# Search domains\n\nndots:5 tries every search domain first.\n")
	rev = repo.commit(t, "dns-debug: check resolv.conf first")
	requestReconcile(t)
	expectSynced(t, rev)
	g.Eventually(func(g Gomega) {
		g.Expect(agent.instructions(g, "dns-debug")).To(ContainSubstring("Check /etc/resolv.conf first."))
	}, 2*time.Minute, 250*time.Millisecond).Should(Succeed())
	sess.expectFiles(t, repo, "dns-debug")
	g.Eventually(sess.listChanged, time.Minute, 250*time.Millisecond).Should(BeNumerically(">", listed),
		"the open MCP session got no notifications/resources/list_changed")
	expectSamePod(t, pod)

	// 4. A commit breaks a skill: Flux's health check says so, the Skill
	// keeps its last good version, and the agent keeps serving it.
	good := repo.read(t, "skills/rollout-check/SKILL.md")
	goodServed := agent.instructions(g, "rollout-check")
	var sk skillsv1.Skill
	g.Expect(c.client.Get(ctx, client.ObjectKey{Namespace: teamNS, Name: "rollout-check"}, &sk)).To(Succeed())
	goodGeneration := sk.Generation
	repo.write(t, "skills/rollout-check/SKILL.md", strings.Replace(good, "name: rollout-check", "name: rollout-checker", 1))
	broken := repo.commit(t, "rollout-check: a name that is not the folder's")
	requestReconcile(t)
	g.Eventually(func(g Gomega) {
		k := fluxObject(g, "kustomize.toolkit.fluxcd.io/v1", "Kustomization")
		ready := condition(g, k, "Ready")
		g.Expect(ready.Status).To(Equal("False"))
		g.Expect(ready.Reason).To(Equal("HealthCheckFailed"))
		g.Expect(ready.Message).To(ContainSubstring("SkillRepository/" + teamNS + "/" + teamRepo))
		g.Expect(nestedString(k, "status", "lastAttemptedRevision")).To(Equal("main@sha1:" + broken))
	}, 3*time.Minute, time.Second).Should(Succeed(), "Flux's health check does not report the broken skill")
	t.Logf("kubectl get kustomization: %s", c.mustKubectl(t, "get", "kustomization", "-n", teamNS, teamRepo))
	t.Logf("kubectl get skillrepository -o wide: %s", c.mustKubectl(t, "get", "skillrepository", "-n", teamNS, teamRepo, "-o", "wide"))
	var repoObj skillsv1.SkillRepository
	g.Expect(c.client.Get(ctx, client.ObjectKey{Namespace: teamNS, Name: teamRepo}, &repoObj)).To(Succeed())
	g.Expect(repoObj.Status.LastAttemptedRevision).To(Equal("main@sha1:" + broken))
	g.Expect(apimeta.IsStatusConditionTrue(repoObj.Status.Conditions, skillsv1.StalledCondition)).To(BeTrue(), "%v", repoObj.Status.Conditions)
	g.Expect(apimeta.FindStatusCondition(repoObj.Status.Conditions, skillsv1.ReadyCondition).Reason).To(Equal(skillsv1.SkillsFailedReason))
	g.Expect(fmt.Sprint(repoObj.Status.Problems)).To(ContainSubstring("rollout-check"))
	g.Expect(c.client.Get(ctx, client.ObjectKey{Namespace: teamNS, Name: "rollout-check"}, &sk)).To(Succeed())
	g.Expect(apimeta.FindStatusCondition(sk.Status.Conditions, skillsv1.ReadyCondition).Reason).To(Equal(skillsv1.SourceInvalidReason))
	g.Expect(sk.Generation).To(Equal(goodGeneration), "the broken folder changed the Skill's spec")
	g.Expect(sk.Status.ServedGeneration).To(Equal(goodGeneration))
	g.Expect(agent.instructions(g, "rollout-check")).To(Equal(goodServed), "the last good version is not served")
	g.Expect(sess.names(t)).To(ContainElement("rollout-check"))
	expectSamePod(t, pod)

	// 5. The revert: all is well again.
	git(t, repo.work, "revert", "--no-edit", "HEAD")
	git(t, repo.work, "push", "-q", "origin", "main")
	rev = strings.TrimSpace(git(t, repo.work, "rev-parse", "HEAD"))
	requestReconcile(t)
	expectSynced(t, rev)
	g.Expect(agent.instructions(g, "rollout-check")).To(Equal(goodServed))
	sess.expectFiles(t, repo, "rollout-check")
	expectSamePod(t, pod)

	// 6. A folder is deleted: its Skill is pruned, and the catalog no
	// longer has it. Removing a skill rolls the agent's pods (one volume
	// fewer), so the checks go to the new pod.
	g.Expect(os.RemoveAll(filepath.Join(repo.work, "skills", "incident-summary"))).To(Succeed())
	rev = repo.commit(t, "incident-summary is retired")
	requestReconcile(t)
	expectSynced(t, rev)
	g.Expect(c.client.Get(ctx, client.ObjectKey{Namespace: teamNS, Name: "incident-summary"}, &sk)).To(
		Satisfy(apierrors.IsNotFound), "the Skill of a deleted folder is not pruned")
	served = expectServed(t, repo, []string{"dns-debug", "rollout-check"})
	g.Eventually(func(g Gomega) {
		agent = reopenTeamAgent(t, agent)
		g.Expect(agent.catalog(g)).To(Equal(served))
	}, 3*time.Minute, time.Second).Should(Succeed())
	sess = agent.connect(t)
	g.Expect(sess.names(t)).To(Equal(served))
	pod = runningAgentPodIn(t, teamNS, teamAgent)

	// Commit → served, five times: push, the webhook's reconcile request,
	// the Skill applied at the commit, and the agent serving its content
	// (the kubelet's refresh of the skill's mounted ConfigMap, every
	// syncFrequency, is most of the wait).
	var applied, reached []time.Duration
	for i := range 5 {
		marker := fmt.Sprintf("Revision marker %d-%d.", i, time.Now().UnixNano())
		repo.write(t, "skills/dns-debug/SKILL.md", repo.read(t, "skills/dns-debug/SKILL.md")+"\n"+marker+"\n")
		start := time.Now()
		rev := repo.commit(t, "dns-debug: "+marker)
		requestReconcile(t)
		g.Eventually(func(g Gomega) {
			var r skillsv1.SkillRepository
			g.Expect(c.client.Get(ctx, client.ObjectKey{Namespace: teamNS, Name: teamRepo}, &r)).To(Succeed())
			g.Expect(r.Status.Revision).To(Equal("main@sha1:" + rev))
		}, 2*time.Minute, 50*time.Millisecond).Should(Succeed())
		applied = append(applied, time.Since(start))
		g.Eventually(func(g Gomega) {
			g.Expect(agent.instructions(g, "dns-debug")).To(ContainSubstring(marker))
		}, 2*time.Minute, 50*time.Millisecond).Should(Succeed())
		reached = append(reached, time.Since(start))
	}
	expectSamePod(t, pod)
	figures := map[string]map[string]int64{}
	for name, d := range map[string][]time.Duration{"commit_to_applied_ms": applied, "commit_to_served_ms": reached} {
		slices.Sort(d)
		figures[name] = map[string]int64{"p50": d[2].Milliseconds(), "min": d[0].Milliseconds(), "max": d[4].Milliseconds()}
		t.Logf("%s over 5 commits, with a reconcile request: p50 %v, min %v, max %v", name, d[2], d[0], d[4])
	}
	report.set("gitops", figures)
}

// installFlux installs Flux's CRDs and its source- and kustomize-controller
// (testdata/flux.yaml), into a cluster whose operator started before them:
// it watches the Flux source kinds once they are served, with no restart
// (docs/gitops.md, Install).
func installFlux(t *testing.T) {
	t.Helper()
	c.mustKubectl(t, "apply", "--server-side", "-f", filepath.Join(c.root, "bin", "flux", "crds")+"/")
	c.mustKubectl(t, "wait", "--for=condition=Established", "--timeout=1m",
		"crd/gitrepositories.source.toolkit.fluxcd.io", "crd/kustomizations.kustomize.toolkit.fluxcd.io")
	c.mustKubectl(t, "apply", "-f", "test/e2e/testdata/flux.yaml")
	c.mustKubectl(t, "rollout", "status", "-n", "flux-system", "deployment/source-controller", "deployment/kustomize-controller", "--timeout=2m")
}

// requestReconcile asks Flux to fetch the repository now, as its
// notification-controller does on a Git host's push webhook.
func requestReconcile(t *testing.T) {
	t.Helper()
	c.mustKubectl(t, "annotate", "--overwrite", "-n", teamNS, "gitrepository/"+teamRepo,
		"reconcile.fluxcd.io/requestedAt="+time.Now().Format(time.RFC3339Nano))
}

// expectSynced waits until Flux and the operator both serve the commit
// rev: the GitRepository's artifact, the Kustomization applied and
// healthy, the SkillRepository Ready at that revision, and each of its
// Skills Ready.
func expectSynced(t *testing.T, rev string) {
	t.Helper()
	revision := "main@sha1:" + rev
	NewWithT(t).Eventually(func(g Gomega) {
		src := fluxObject(g, "source.toolkit.fluxcd.io/v1", "GitRepository")
		g.Expect(nestedString(src, "status", "artifact", "revision")).To(Equal(revision))
		k := fluxObject(g, "kustomize.toolkit.fluxcd.io/v1", "Kustomization")
		g.Expect(condition(g, k, "Ready").Status).To(Equal("True"), "%v", condition(g, k, "Ready"))
		g.Expect(nestedString(k, "status", "lastAppliedRevision")).To(Equal(revision))

		var r skillsv1.SkillRepository
		g.Expect(c.client.Get(context.Background(), client.ObjectKey{Namespace: teamNS, Name: teamRepo}, &r)).To(Succeed())
		g.Expect(r.Status.Revision).To(Equal(revision))
		g.Expect(apimeta.IsStatusConditionTrue(r.Status.Conditions, skillsv1.ReadyCondition)).To(BeTrue(), "%v", r.Status.Conditions)
		for _, name := range r.Status.Skills {
			var sk skillsv1.Skill
			g.Expect(c.client.Get(context.Background(), client.ObjectKey{Namespace: teamNS, Name: name}, &sk)).To(Succeed())
			g.Expect(apimeta.IsStatusConditionTrue(sk.Status.Conditions, skillsv1.ReadyCondition)).To(BeTrue(), "%s: %v", name, sk.Status.Conditions)
		}
	}, 3*time.Minute, 500*time.Millisecond).Should(Succeed())
}

// expectServed checks that the SkillRepository lists the skill folders of
// the working tree (want, when given) and returns their names, sorted.
func expectServed(t *testing.T, repo *gitRepo, want []string) []string {
	t.Helper()
	g := NewWithT(t)
	entries, err := os.ReadDir(filepath.Join(repo.work, "skills"))
	g.Expect(err).NotTo(HaveOccurred())
	var folders []string
	for _, e := range entries {
		folders = append(folders, e.Name())
	}
	if want != nil {
		g.Expect(folders).To(Equal(want))
	}
	var r skillsv1.SkillRepository
	g.Expect(c.client.Get(context.Background(), client.ObjectKey{Namespace: teamNS, Name: teamRepo}, &r)).To(Succeed())
	got := slices.Clone(r.Status.Skills)
	sort.Strings(got)
	g.Expect(got).To(Equal(folders))
	return folders
}

// fluxObject reads the team's Flux object of a kind.
func fluxObject(g Gomega, apiVersion, kind string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	g.Expect(c.client.Get(context.Background(), client.ObjectKey{Namespace: teamNS, Name: teamRepo}, u)).To(Succeed())
	return u
}

// nestedString is a string field of an object, "" when it has none.
func nestedString(u *unstructured.Unstructured, fields ...string) string {
	s, _, _ := unstructured.NestedString(u.Object, fields...)
	return s
}

// fluxCondition is a condition of a Flux object.
type fluxCondition struct{ Status, Reason, Message string }

func condition(g Gomega, u *unstructured.Unstructured, kind string) fluxCondition {
	conds, _, err := unstructured.NestedSlice(u.Object, "status", "conditions")
	g.Expect(err).NotTo(HaveOccurred())
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == kind {
			str := func(k string) string { s, _ := m[k].(string); return s }
			return fluxCondition{str("status"), str("reason"), str("message")}
		}
	}
	return fluxCondition{Status: "Unknown", Message: "no condition " + kind}
}

// teamAgentAPI is the API of the team's agent, reached through a
// port-forward to its current pod.
type teamAgentAPI struct {
	agentAPI
	stop func()
}

// openTeamAgent waits for the Agent the Kustomization applied to be Ready
// and its pod to run, and forwards a port to it.
func openTeamAgent(t *testing.T) teamAgentAPI {
	t.Helper()
	token := waitAgentReady(t, teamNS, teamAgent)
	pod := runningAgentPodIn(t, teamNS, teamAgent)
	url, cmd := c.forward(t, teamNS, "pod/"+pod.Name, 8080)
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	t.Cleanup(stop)
	return teamAgentAPI{agentAPI: agentAPI{url: url, token: token}, stop: stop}
}

// reopenTeamAgent forwards to the agent's pod again when it changed.
func reopenTeamAgent(t *testing.T, a teamAgentAPI) teamAgentAPI {
	t.Helper()
	a.stop()
	return openTeamAgent(t)
}

// catalog is the names of the skills the agent serves, sorted.
func (a teamAgentAPI) catalog(g Gomega) []string {
	var out struct{ Skills []struct{ Name string } }
	status, body, err := do(http.MethodGet, a.url+"/v1/skills", a.token, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(Equal(http.StatusOK), string(body))
	g.Expect(json.Unmarshal(body, &out)).To(Succeed())
	var names []string
	for _, s := range out.Skills {
		names = append(names, s.Name)
	}
	sort.Strings(names)
	return names
}

// instructions is the body of a skill as the agent serves it.
func (a teamAgentAPI) instructions(g Gomega, name string) string {
	var out struct{ Instructions string }
	status, body, err := do(http.MethodGet, a.url+"/v1/skills/"+name, a.token, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(Equal(http.StatusOK), string(body))
	g.Expect(json.Unmarshal(body, &out)).To(Succeed())
	return out.Instructions
}

// expectSamePod checks that the team's agent still runs in pod, never
// restarted.
func expectSamePod(t *testing.T, pod corev1.Pod) {
	t.Helper()
	now := runningAgentPodIn(t, teamNS, teamAgent)
	g := NewWithT(t)
	g.Expect(now.UID).To(Equal(pod.UID), "the agent's pod was replaced")
	g.Expect(now.Status.ContainerStatuses[0].RestartCount).To(BeZero(), "the agent restarted")
}

// mcpSession is an MCP client session with the team's agent that counts
// the resource list changes it is told of.
type mcpSession struct {
	cs *mcp.ClientSession
	mu sync.Mutex
	n  int
}

// connect opens an MCP session with the agent.
func (a teamAgentAPI) connect(t *testing.T) *mcpSession {
	t.Helper()
	s := &mcpSession{}
	cl := mcp.NewClient(&mcp.Implementation{Name: "kubeskills-e2e", Version: "v1"}, &mcp.ClientOptions{
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.n++
		},
	})
	if err := mcp.AddSendingCustomMethod[*mcpskills.ListParams, *mcpskills.ListResult](cl, mcpskills.MethodList); err != nil {
		t.Fatal(err)
	}
	tr := &mcp.StreamableClientTransport{Endpoint: a.url + "/mcp", HTTPClient: &http.Client{Transport: bearerToken(a.token)}, MaxRetries: -1}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := cl.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatalf("connecting to the agent's /mcp: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	s.cs = cs
	return s
}

func (s *mcpSession) listChanged() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func (s *mcpSession) list(t *testing.T) *mcpskills.ListResult {
	t.Helper()
	res, err := mcp.CallCustomMethod[*mcpskills.ListParams, *mcpskills.ListResult](context.Background(), s.cs, mcpskills.MethodList, &mcpskills.ListParams{})
	if err != nil {
		t.Fatalf("skills/list: %v", err)
	}
	return res
}

// names is the skills the session lists, sorted.
func (s *mcpSession) names(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, e := range s.list(t).Skills {
		name, _, err := mcpskills.ParseURI(e.URI)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// expectFiles checks that the session lists each named skill with exactly
// the files of its folder in the working tree, and reads them back byte
// for byte.
func (s *mcpSession) expectFiles(t *testing.T, repo *gitRepo, names ...string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		entries := map[string]mcpskills.Skill{}
		for _, e := range s.list(t).Skills {
			name, _, _ := mcpskills.ParseURI(e.URI)
			entries[name] = e
		}
		for _, name := range names {
			dir := filepath.Join(repo.work, "skills", name)
			want, err := mcpskills.FolderResources(dir, name)
			g.Expect(err).NotTo(HaveOccurred())
			e, ok := entries[name]
			g.Expect(ok).To(BeTrue(), "skill %s is not listed", name)
			got := map[string]mcpskills.SkillResource{}
			for _, f := range e.Resources.Files {
				got[f.URI] = f
			}
			g.Expect(got).To(Equal(want), "the files of %s", name)
			for uri := range want {
				res, err := s.cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
				g.Expect(err).NotTo(HaveOccurred(), uri)
				g.Expect(res.Contents).To(HaveLen(1))
				data := res.Contents[0].Blob
				if res.Contents[0].Text != "" {
					data = []byte(res.Contents[0].Text)
				}
				_, path, _ := mcpskills.ParseURI(uri)
				g.Expect(string(data)).To(Equal(repo.read(t, filepath.Join("skills", name, path))), uri)
			}
		}
	}, 2*time.Minute, 500*time.Millisecond).Should(Succeed())
}

// bearerToken sends a bearer token with every request.
type bearerToken string

func (b bearerToken) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(req)
}

// argoCDPluginApplies: the Argo CD Config Management Plugin of
// examples/skill-repo/argocd renders the repository as Argo CD's
// repo-server runs it (its generate command, in a checkout with the file
// modes kept and the Application's namespace in ARGOCD_APP_NAMESPACE), and
// its output, applied server-side as Argo CD applies it, is a Ready Skill
// per folder whose files are the folder's, byte for byte.
func argoCDPluginApplies(t *testing.T, _ *state) {
	g := NewWithT(t)
	const appNS = "team-b"
	data, err := os.ReadFile(filepath.Join(c.root, skillRepoDir, "argocd", "plugin.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	var plugin struct {
		Spec struct {
			Generate struct{ Command, Args []string }
		}
	}
	g.Expect(yaml.Unmarshal(data, &plugin)).To(Succeed())
	g.Expect(plugin.Spec.Generate.Command).NotTo(BeEmpty())

	checkout := filepath.Join(t.TempDir(), "skill-repo")
	if out, err := exec.Command("cp", "-a", filepath.Join(c.root, skillRepoDir), checkout).CombinedOutput(); err != nil {
		t.Fatalf("failed to copy the repository: %v\n%s", err, out)
	}
	argv := append(slices.Clone(plugin.Spec.Generate.Command), plugin.Spec.Generate.Args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = checkout
	cmd.Env = []string{"PATH=" + c.pluginDir + ":/usr/bin:/bin", "ARGOCD_APP_NAMESPACE=" + appNS}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	manifests, err := cmd.Output()
	g.Expect(err).NotTo(HaveOccurred(), "the plugin's generate command: %s", stderr.String())

	c.mustKubectl(t, "create", "namespace", appNS)
	out := filepath.Join(t.TempDir(), "skills.yaml")
	g.Expect(os.WriteFile(out, manifests, 0o644)).To(Succeed())
	c.mustKubectl(t, "apply", "--server-side", "--field-manager=argocd-controller", "-f", out)

	entries, err := os.ReadDir(filepath.Join(checkout, "skills"))
	g.Expect(err).NotTo(HaveOccurred())
	for _, e := range entries {
		name := e.Name()
		g.Eventually(func(g Gomega) {
			var sk skillsv1.Skill
			g.Expect(c.client.Get(context.Background(), client.ObjectKey{Namespace: appNS, Name: name}, &sk)).To(Succeed())
			g.Expect(apimeta.IsStatusConditionTrue(sk.Status.Conditions, skillsv1.ReadyCondition)).To(BeTrue(), "%v", sk.Status.Conditions)
		}, time.Minute, 250*time.Millisecond).Should(Succeed())
		exported := filepath.Join(t.TempDir(), name)
		c.mustKubectl(t, "skills", "export", name, "-n", appNS, "-o", exported)
		got, err := mcpskills.FolderResources(exported, name)
		g.Expect(err).NotTo(HaveOccurred())
		want, err := mcpskills.FolderResources(filepath.Join(checkout, "skills", name), name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(want), "the files of Skill %s", name)
	}
}
