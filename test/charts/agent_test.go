package charts

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/policy"
	"github.com/kubeskills/kubeskills/internal/policyapi"
)

// modelValues are the values a minimal agent install sets.
var modelValues = []string{"model.baseURL=http://ollama.ollama:11434/v1", "model.name=llama3.1"}

// agentRelease renders the agent chart as release ops.
func agentRelease(chart string, valueFiles []string, set ...string) release {
	return release{name: "ops", namespace: agentNamespace, chart: chart, valueFiles: valueFiles, set: set}
}

// TestAgentChartDefaults renders `helm install ops charts/agent` with only
// the model set: an Agent that knows every Skill of its namespace and a
// CommandPolicy that lets read-only commands run, asks a person for the
// others and refuses destructive ones.
func TestAgentChartDefaults(t *testing.T) {
	r := agentRelease(chartPath("agent"), nil, modelValues...)
	objs := render(t, r)
	dryRun(t, r, objs)
	if got, want := kindNames(objs), []string{"Agent/ops", "CommandPolicy/ops"}; !slices.Equal(got, want) {
		t.Errorf("rendered objects %v, want %v", got, want)
	}

	a := toTyped[skillsv1.Agent](t, objs.get(t, "Agent", "ops"))
	wantModel := skillsv1.Model{BaseURL: "http://ollama.ollama:11434/v1", Name: "llama3.1"}
	if !reflect.DeepEqual(a.Spec.Model, wantModel) {
		t.Errorf("model = %+v, want %+v", a.Spec.Model, wantModel)
	}
	if a.Spec.PolicyRef == nil || a.Spec.PolicyRef.Name != "ops" {
		t.Errorf("policyRef = %+v, want ops", a.Spec.PolicyRef)
	}
	if s := a.Spec.Skills; s.Selector == nil || !reflect.DeepEqual(*s.Selector, metav1.LabelSelector{}) || len(s.Names) != 0 {
		t.Errorf("skills = %+v, want an empty selector: every Skill of the namespace", s)
	}
	if a.Spec.Instructions == "" || a.Spec.MaxToolCalls != 20 {
		t.Errorf("instructions %q, maxToolCalls %d", a.Spec.Instructions, a.Spec.MaxToolCalls)
	}
	if !a.MCPEnabled() || a.Spec.MCP != nil {
		t.Errorf("mcp = %+v, want it left to the API's default (on)", a.Spec.MCP)
	}
	if sb := a.Spec.Sandbox; sb == nil || sb.Warm != 1 || sb.IdleTimeout == nil || sb.IdleTimeout.Duration != 10*time.Minute || sb.MaxRunning != 5 {
		t.Errorf("sandbox = %+v, want one warm sandbox, replaced after 10m idle, and 5 commands at once", sb)
	}

	p := toTyped[skillsv1.CommandPolicy](t, objs.get(t, "CommandPolicy", "ops"))
	m := compilePolicy(t, p)
	if p.Spec.DefaultAction != skillsv1.ActionAsk {
		t.Errorf("defaultAction = %s, want Ask", p.Spec.DefaultAction)
	}
	if p.Spec.Approval != nil {
		t.Errorf("approval = %+v, want none: one approval from any approver", p.Spec.Approval)
	}
	for _, action := range []skillsv1.PolicyAction{skillsv1.ActionAlways, skillsv1.ActionAsk, skillsv1.ActionNever} {
		if !slices.ContainsFunc(p.Spec.Examples, func(e skillsv1.PolicyExample) bool { return e.Expect == action }) {
			t.Errorf("no example expects %s", action)
		}
	}
	for _, tc := range []struct {
		command string
		want    policy.Action
	}{
		{"kubectl get pods -A", policy.Always},
		{"kubectl describe node worker-1", policy.Always},
		{"kubectl logs deploy/web --tail=100", policy.Always},
		{"cat /etc/os-release", policy.Always},
		{"ls -la /tmp", policy.Always},
		{"grep -rn error /var/log/app", policy.Always},
		{"jq .items[0].metadata.name pods.json", policy.Always},
		{"kubectl get pods -o json | jq '.items | length'", policy.Always},
		{"kubectl get secrets -A", policy.Ask},
		{"kubectl get SECRETS -A", policy.Ask},
		{"kubectl get Secret/db -o yaml", policy.Ask},
		{"kubectl get pods,secrets.v1. -n shop", policy.Ask},
		{"kubectl get --raw /api/v1/namespaces/shop/%73ecrets", policy.Ask},
		{"kubectl get pods --kubeconfig=/dev/stdin", policy.Ask},
		{"kubectl logs web-0 --token=x", policy.Ask},
		{"kubectl exec web-0 -- ls", policy.Ask},
		{"[[ a > ~/.bashrc ]]", policy.Ask},
		{"cat $'/etc/hostname'", policy.Ask},
		{"sort -o /tmp/out /etc/hostname", policy.Ask},
		{"kubectl $'delete\\0' pod web-0", policy.Never},
		{"kubectl apply -f web.yaml", policy.Ask},
		{"helm upgrade web ./chart", policy.Ask},
		{"curl https://example.com", policy.Ask},
		{"rm -rf /tmp/cache", policy.Never},
		{"kubectl delete namespace prod", policy.Never},
		{"kubectl --context prod delete pod web-0", policy.Never},
		{"dd if=/dev/zero of=/dev/sda bs=1M", policy.Never},
		{"mkfs -t ext4 /dev/sdb", policy.Never},
		{"mkfs.xfs /dev/sdc", policy.Never},
		{"ls; rm -rf /", policy.Never},
	} {
		if got := m.Decide(tc.command); got.Action != tc.want {
			t.Errorf("%q: %s (%s), want %s", tc.command, got.Action, got.Reason, tc.want)
		}
	}
}

// TestAgentChartValues renders the agent chart with every kind of value
// and with skills shipped as files in the chart.
func TestAgentChartValues(t *testing.T) {
	chart := chartWithSkill(t)
	r := agentRelease(chart, []string{testdata("agent-values.yaml")})
	objs := render(t, r)
	dryRun(t, r, objs)
	want := []string{"Agent/platform-bot", "CommandPolicy/platform-policy", "Skill/pod-triage", "Skill/restart-checklist"}
	if got := kindNames(objs); !slices.Equal(got, want) {
		t.Errorf("rendered objects %v, want %v", got, want)
	}

	a := toTyped[skillsv1.Agent](t, objs.get(t, "Agent", "platform-bot"))
	maxTokens := int32(2048)
	wantModel := skillsv1.Model{
		BaseURL: "https://api.openai.com/v1", Name: "gpt-4o-mini", Temperature: "0.2", MaxTokens: &maxTokens,
		APIKeySecretRef: &skillsv1.SecretKeyRef{Name: "openai", Key: "token"},
	}
	if !reflect.DeepEqual(a.Spec.Model, wantModel) {
		t.Errorf("model = %+v, want %+v", a.Spec.Model, wantModel)
	}
	wantSkills := skillsv1.SkillSelection{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "platform"}},
		Names:    []string{"cluster-health", "restart-checklist", "pod-triage"},
	}
	if !reflect.DeepEqual(a.Spec.Skills, wantSkills) {
		t.Errorf("skills = %+v, want %+v", a.Spec.Skills, wantSkills)
	}
	if a.Spec.PolicyRef == nil || a.Spec.PolicyRef.Name != "platform-policy" || a.Spec.MaxToolCalls != 50 {
		t.Errorf("policyRef %+v, maxToolCalls %d", a.Spec.PolicyRef, a.Spec.MaxToolCalls)
	}
	if ac := a.Spec.Access; ac == nil || ac.TokenSecretName != "platform-bot-api" || len(ac.From) != 1 {
		t.Errorf("access = %+v", ac)
	}
	if a.MCPEnabled() {
		t.Errorf("mcp = %+v, want mcp.enabled=false carried over", a.Spec.MCP)
	}
	if sb := a.Spec.Sandbox; sb == nil || sb.Warm != 0 || sb.IdleTimeout.Duration != 2*time.Minute || sb.MaxRunning != 20 {
		t.Errorf("sandbox = %+v, want no warm sandbox, 2m idle and 20 commands at once", sb)
	}
	if rt := a.Spec.Runtime; rt == nil || rt.Image != "registry.example.com/kubeskills:v1.2.3" || *rt.Replicas != 2 ||
		rt.Resources == nil || len(rt.Tolerations) != 1 || rt.NodeSelector["kubernetes.io/os"] != "linux" {
		t.Errorf("runtime = %+v", rt)
	}

	inline := objs.get(t, "Skill", "restart-checklist")
	if l := inline.GetLabels(); l["team"] != "platform" || l["tier"] != "ops" {
		t.Errorf("Skill restart-checklist labels %v lack skills.labels and its own", l)
	}
	s := toTyped[skillsv1.Skill](t, inline)
	if s.Spec.Invocation != skillsv1.InvocationExplicit || s.Spec.License != "Apache-2.0" || s.Spec.Metadata["owner"] != "sre" ||
		len(s.Spec.Files) != 2 || !s.Spec.Files[0].Executable || !strings.HasPrefix(s.Spec.Instructions, "# Restart checklist") {
		t.Errorf("Skill restart-checklist spec = %+v", s.Spec)
	}
	checkFileSkill(t, toTyped[skillsv1.Skill](t, objs.get(t, "Skill", "pod-triage")))

	p := toTyped[skillsv1.CommandPolicy](t, objs.get(t, "CommandPolicy", "platform-policy"))
	m := compilePolicy(t, p)
	if got := m.Decide("kubectl rollout restart deployment/api"); got.Action != policy.Ask {
		t.Errorf("extraRules: rollout restart is %s", got.Action)
	}
	if r := p.Spec.Rules[len(p.Spec.Rules)-1]; r.Pattern != "/skill/scripts/triage.sh" || r.Children != skillsv1.ChildrenTrusted {
		t.Errorf("extraRules: the last rule is %+v, want triage.sh with children Trusted", r)
	}
	sb := p.Spec.Sandbox
	if sb == nil || sb.Image != "registry.example.com/toolbox:1" || sb.Timeout.Duration.Minutes() != 2 || *sb.OutputLimitBytes != 16384 ||
		sb.Egress == nil || !sb.Egress.DNS || *sb.RuntimeClassName != "gvisor" || len(sb.EnvFromSecrets) != 1 ||
		sb.TTLSecondsAfterFinished == nil || *sb.TTLSecondsAfterFinished != 0 || sb.Resources == nil {
		t.Errorf("sandbox = %+v", sb)
	}
	if a := p.Spec.Approval; a == nil || !reflect.DeepEqual(*a, skillsv1.ApprovalRule{Users: []string{"alice", "bob"}, Groups: []string{"sre"}, Required: 2}) {
		t.Errorf("approval = %+v", a)
	}
	if h := p.Spec.History; h == nil || *h.MaxRuns != 10 || h.MaxAge.Duration.Hours() != 24 || p.Spec.ApprovalTimeout.Duration.Minutes() != 15 {
		t.Errorf("history %+v, approvalTimeout %v", h, p.Spec.ApprovalTimeout)
	}
}

// TestAgentChartPolicyChoice covers an Agent that answers to an existing
// CommandPolicy, and one that runs no commands.
func TestAgentChartPolicyChoice(t *testing.T) {
	for _, tt := range []struct {
		name string
		set  []string
		want string
	}{
		{name: "existing policy", set: []string{"policy.create=false", "policy.name=shared"}, want: "shared"},
		{name: "no policy", set: []string{"policy.create=false"}, want: ""},
		{name: "named policy", set: []string{"policy.name=ops-commands"}, want: "ops-commands"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := agentRelease(chartPath("agent"), nil, append(tt.set, modelValues...)...)
			objs := render(t, r)
			dryRun(t, r, objs)
			a := toTyped[skillsv1.Agent](t, objs.get(t, "Agent", "ops"))
			got := ""
			if a.Spec.PolicyRef != nil {
				got = a.Spec.PolicyRef.Name
			}
			if got != tt.want {
				t.Errorf("policyRef = %q, want %q", got, tt.want)
			}
			policies := objs.ofKind("CommandPolicy")
			wantPolicy := !slices.Contains(tt.set, "policy.create=false")
			if wantPolicy != (len(policies) == 1) || len(policies) > 1 {
				t.Errorf("%d CommandPolicies rendered", len(policies))
			}
		})
	}
}

// TestAgentChartErrors checks that helm template refuses, with a message
// that says what to do, values the chart cannot turn into a working agent.
func TestAgentChartErrors(t *testing.T) {
	chart := chartWithSkill(t)
	broken := chartWithSkill(t)
	writeFile(t, filepath.Join(broken, "files", "skills", "no-description", "SKILL.md"), "---\nname: no-description\n---\nBody.\n")
	misnamed := chartWithSkill(t)
	writeFile(t, filepath.Join(misnamed, "files", "skills", "folder", "SKILL.md"), "---\nname: other\ndescription: d\n---\nBody.\n")
	bare := chartWithSkill(t)
	writeFile(t, filepath.Join(bare, "files", "skills", "bare", "SKILL.md"), "# No front matter\n")
	tests := []struct {
		name  string
		chart string
		set   []string
		want  string
	}{
		{name: "no model URL", chart: chartPath("agent"), set: []string{"model.name=m"}, want: "model.baseURL is required"},
		{name: "no model name", chart: chartPath("agent"), set: []string{"model.baseURL=http://m/v1"}, want: "model.name is required"},
		{name: "skill twice", chart: chart, set: append([]string{"skills.inline[0].name=pod-triage", "skills.inline[0].description=d", "skills.inline[0].instructions=i"}, modelValues...), want: "pod-triage is defined twice"},
		{name: "skill without description", chart: broken, set: modelValues, want: "description is required"},
		{name: "skill named after another folder", chart: misnamed, set: modelValues, want: "but the folder is folder"},
		{name: "skill without front matter", chart: bare, set: modelValues, want: "must start with YAML front matter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := agentRelease(tt.chart, nil, tt.set...)
			_, err := helm(append([]string{"template"}, r.args()...)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("helm template: got %v, want an error containing %q", err, tt.want)
			}
		})
	}
	// A release name may hold dots; an Agent's name may not.
	r := release{name: "ops.v2", namespace: agentNamespace, chart: chartPath("agent"), set: modelValues}
	if _, err := helm(append([]string{"template"}, r.args()...)...); err == nil || !strings.Contains(err.Error(), "must be a DNS label") {
		t.Errorf("release name ops.v2: got %v", err)
	}
}

// compilePolicy compiles a rendered CommandPolicy as the operator does and
// checks its examples.
func compilePolicy(t *testing.T, p *skillsv1.CommandPolicy) *policy.Matcher {
	t.Helper()
	m, err := policyapi.Compile(p)
	if err != nil {
		t.Fatalf("CommandPolicy %s does not compile or fails its examples: %v", p.Name, err)
	}
	return m
}

// skillMD is the SKILL.md of the skill chartWithSkill adds.
const skillMD = `---
name: pod-triage
description: Finds why a pod is not running. Use it when a pod crash-loops or stays Pending.
license: Apache-2.0
allowed-tools: Bash(kubectl get:*) Bash(kubectl describe:*), Read
metadata:
  owner: platform
  version: 2
disable-model-invocation: true
x-other-product: dropped
---

# Pod triage

1. Run ` + "`scripts/triage.sh NAMESPACE`" + `.
2. Read references/probes.md for probe failures.
`

// pngHeader is the start of a PNG file: binary, with NUL bytes.
var pngHeader = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01")

// chartWithSkill copies the agent chart and adds files/skills/pod-triage:
// a SKILL.md, a script, a reference and a binary asset.
func chartWithSkill(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "agent")
	if err := os.CopyFS(dir, os.DirFS(chartPath("agent"))); err != nil {
		t.Fatal(err)
	}
	skill := filepath.Join(dir, "files", "skills", "pod-triage")
	writeFile(t, filepath.Join(skill, "SKILL.md"), skillMD)
	writeFile(t, filepath.Join(skill, "scripts", "triage.sh"), "#!/bin/sh\nkubectl get pods -n \"$1\"\n")
	writeFile(t, filepath.Join(skill, "references", "probes.md"), "# Probes\n\nA failing readiness probe keeps a pod out of its Service.\n")
	writeFile(t, filepath.Join(skill, "assets", "logo.png"), string(pngHeader))
	return dir
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkFileSkill checks the Skill made from chartWithSkill's folder.
func checkFileSkill(t *testing.T, s *skillsv1.Skill) {
	t.Helper()
	spec := s.Spec
	if spec.Description != "Finds why a pod is not running. Use it when a pod crash-loops or stays Pending." || spec.License != "Apache-2.0" {
		t.Errorf("description %q, license %q", spec.Description, spec.License)
	}
	if want := []string{"Bash(kubectl get:*)", "Bash(kubectl describe:*)", "Read"}; !slices.Equal(spec.AllowedTools, want) {
		t.Errorf("allowedTools = %q, want %q", spec.AllowedTools, want)
	}
	if want := map[string]string{"owner": "platform", "version": "2"}; !reflect.DeepEqual(spec.Metadata, want) {
		t.Errorf("metadata = %v, want %v", spec.Metadata, want)
	}
	if spec.Invocation != skillsv1.InvocationExplicit {
		t.Errorf("invocation = %s, want Explicit (disable-model-invocation)", spec.Invocation)
	}
	if want := "# Pod triage\n\n1. Run `scripts/triage.sh NAMESPACE`.\n2. Read references/probes.md for probe failures.\n"; spec.Instructions != want {
		t.Errorf("instructions = %q, want %q", spec.Instructions, want)
	}
	files := map[string]skillsv1.SkillFile{}
	for _, f := range spec.Files {
		files[f.Path] = f
	}
	if len(files) != 3 {
		t.Errorf("files = %v, want the script, the reference and the asset", spec.Files)
	}
	if f := files["scripts/triage.sh"]; f.Content == nil || !strings.HasPrefix(*f.Content, "#!/bin/sh") || !f.Executable {
		t.Errorf("scripts/triage.sh = %+v, want executable text", f)
	}
	if f := files["references/probes.md"]; f.Content == nil || f.Executable {
		t.Errorf("references/probes.md = %+v, want text", f)
	}
	if f := files["assets/logo.png"]; f.Content != nil || string(f.BinaryContent) != string(pngHeader) {
		t.Errorf("assets/logo.png = %+v, want its bytes as binaryContent", f)
	}
}
