package v1alpha1_test

import (
	"context"
	"os"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, func(e *testenv.Env) func() { env = e; return nil }))
}

const ns = "default"

func meta(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: ns} }

func skill(name string, mutate func(*skillsv1.Skill)) *skillsv1.Skill {
	s := &skillsv1.Skill{
		ObjectMeta: meta(name),
		Spec: skillsv1.SkillSpec{
			Description:  "Checks a cluster's health and explains what it finds.",
			Instructions: "# Health\n\nRun `kubectl get nodes`.\n",
		},
	}
	if mutate != nil {
		mutate(s)
	}
	return s
}

func policy(name string, mutate func(*skillsv1.CommandPolicy)) *skillsv1.CommandPolicy {
	p := &skillsv1.CommandPolicy{
		ObjectMeta: meta(name),
		Spec: skillsv1.CommandPolicySpec{
			Rules: []skillsv1.PolicyRule{{Pattern: "kubectl get *", Action: skillsv1.ActionAlways}},
		},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func run(name string, mutate func(*skillsv1.CommandRun)) *skillsv1.CommandRun {
	r := &skillsv1.CommandRun{
		ObjectMeta: meta(name),
		Spec:       skillsv1.CommandRunSpec{Agent: "ops", Command: "kubectl get pods", Skill: "health"},
	}
	if mutate != nil {
		mutate(r)
	}
	return r
}

func agent(name string, mutate func(*skillsv1.Agent)) *skillsv1.Agent {
	a := &skillsv1.Agent{
		ObjectMeta: meta(name),
		Spec: skillsv1.AgentSpec{
			Skills: skillsv1.SkillSelection{Names: []string{"health"}},
			Model:  skillsv1.Model{BaseURL: "https://api.example.com/v1", Name: "gpt-4.1"},
		},
	}
	if mutate != nil {
		mutate(a)
	}
	return a
}

func file(path, content string) skillsv1.SkillFile {
	return skillsv1.SkillFile{Path: path, Content: ptr.To(content)}
}

// TestCreateValidation shows that the API server itself refuses each broken
// object with a message naming the field, and accepts the good ones.
func TestCreateValidation(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	cases := []struct {
		name    string
		obj     client.Object
		wantErr string // "" means the object is accepted
	}{
		{"skill valid", skill("valid", nil), ""},
		{"skill name with capitals and underscore", skill("Bad_Name", nil), "metadata.name"},
		{"skill name with double hyphen", skill("bad--name", nil), "metadata.name must be a skill name"},
		{"skill name with a dot", skill("bad.name", nil), "metadata.name must be a skill name"},
		{"skill name of 65 characters", skill(long(65), nil), "metadata.name must be at most 64 characters"},
		{"skill name of 64 characters", skill(long(64), nil), ""},
		{"skill without description", skill("no-desc", func(s *skillsv1.Skill) { s.Spec.Description = "" }), "spec.description"},
		{"skill description of 5000 characters", skill("desc-5000", func(s *skillsv1.Skill) { s.Spec.Description = long(5000) }), "spec.description: Too long"},
		{"skill description of 2000 characters", skill("desc-2000", func(s *skillsv1.Skill) { s.Spec.Description = long(2000) }), ""},
		{"skill description with angle brackets", skill("desc-html", func(s *skillsv1.Skill) { s.Spec.Description = "Use <b>this</b>" }), "spec.description must not contain '<' or '>'"},
		{"skill compatibility of 501 characters", skill("compat", func(s *skillsv1.Skill) { s.Spec.Compatibility = long(501) }), "spec.compatibility: Too long"},
		{"skill invocation not in enum", skill("invocation", func(s *skillsv1.Skill) { s.Spec.Invocation = "Sometimes" }), "spec.invocation: Unsupported value"},
		{"skill absolute file path", skill("abs-path", func(s *skillsv1.Skill) { s.Spec.Files = []skillsv1.SkillFile{file("/etc/passwd", "x")} }), "spec.files[].path must be relative"},
		{"skill file path escaping", skill("dotdot", func(s *skillsv1.Skill) { s.Spec.Files = []skillsv1.SkillFile{file("../secret", "x")} }), "spec.files[].path must not contain a '..' segment"},
		{"skill file path with inner dotdot", skill("dotdot-inner", func(s *skillsv1.Skill) { s.Spec.Files = []skillsv1.SkillFile{file("a/../../b", "x")} }), "'..' segment"},
		{"skill file name with dots", skill("dots-ok", func(s *skillsv1.Skill) { s.Spec.Files = []skillsv1.SkillFile{file("notes..md", "x")} }), ""},
		{"skill duplicate file paths", skill("dup-files", func(s *skillsv1.Skill) {
			s.Spec.Files = []skillsv1.SkillFile{file("a.sh", "x"), file("a.sh", "y")}
		}), "Duplicate value"},
		{"skill with files and bundle", skill("files-and-bundle", func(s *skillsv1.Skill) {
			s.Spec.Files = []skillsv1.SkillFile{file("a", "x")}
			s.Spec.Bundle = &skillsv1.SkillBundle{Image: "example.com/skills/x:1"}
		}), "spec.files and spec.bundle are exclusive"},

		{"policy valid", policy("valid", nil), ""},
		{"policy empty pattern", policy("empty-pattern", func(p *skillsv1.CommandPolicy) { p.Spec.Rules[0].Pattern = "" }), "spec.rules[0].pattern"},
		{"policy unknown action", policy("bad-action", func(p *skillsv1.CommandPolicy) { p.Spec.Rules[0].Action = "Maybe" }), "spec.rules[0].action: Unsupported value"},
		{"policy rule trusting its children", policy("children-trusted", func(p *skillsv1.CommandPolicy) {
			p.Spec.Rules[0].Children = skillsv1.ChildrenTrusted
		}), ""},
		{"policy Ask rule trusting its children", policy("children-trusted-ask", func(p *skillsv1.CommandPolicy) {
			p.Spec.Rules[0].Action, p.Spec.Rules[0].Children = skillsv1.ActionAsk, skillsv1.ChildrenTrusted
		}), ""},
		{"policy Never rule judging its children", policy("children-judged-never", func(p *skillsv1.CommandPolicy) {
			p.Spec.Rules[0].Action, p.Spec.Rules[0].Children = skillsv1.ActionNever, skillsv1.ChildrenJudged
		}), ""},
		{"policy Never rule trusting its children", policy("children-trusted-never", func(p *skillsv1.CommandPolicy) {
			p.Spec.Rules[0].Action, p.Spec.Rules[0].Children = skillsv1.ActionNever, skillsv1.ChildrenTrusted
		}), "spec.rules[].children may be Trusted only with action Always or Ask"},
		{"policy children not in enum", policy("children-bad", func(p *skillsv1.CommandPolicy) { p.Spec.Rules[0].Children = "Sometimes" }),
			"spec.rules[0].children: Unsupported value"},
		{"policy unknown default", policy("bad-default", func(p *skillsv1.CommandPolicy) { p.Spec.DefaultAction = "Sometimes" }), "spec.defaultAction: Unsupported value"},
		{"policy bad egress CIDR", policy("bad-cidr", func(p *skillsv1.CommandPolicy) {
			p.Spec.Sandbox = &skillsv1.Sandbox{Egress: &skillsv1.Egress{CIDRs: []string{"anywhere"}}}
		}), "spec.sandbox.egress.cidrs must hold CIDRs"},
		{"policy with a ServiceAccount", policy("identity", func(p *skillsv1.CommandPolicy) {
			p.Spec.Sandbox = &skillsv1.Sandbox{ServiceAccountName: "cluster-reader.team-a"}
		}), ""},
		{"policy ServiceAccount with capitals", policy("identity-caps", func(p *skillsv1.CommandPolicy) {
			p.Spec.Sandbox = &skillsv1.Sandbox{ServiceAccountName: "Reader"}
		}), "spec.sandbox.serviceAccountName must be a ServiceAccount name"},
		{"policy ServiceAccount naming another namespace", policy("identity-ns", func(p *skillsv1.CommandPolicy) {
			p.Spec.Sandbox = &skillsv1.Sandbox{ServiceAccountName: "kube-system:admin"}
		}), "spec.sandbox.serviceAccountName must be a ServiceAccount name"},
		{"policy ServiceAccount of 254 characters", policy("identity-long", func(p *skillsv1.CommandPolicy) {
			p.Spec.Sandbox = &skillsv1.Sandbox{ServiceAccountName: long(254)}
		}), "spec.sandbox.serviceAccountName: Too long"},
		{"policy example with unknown expectation", policy("bad-example", func(p *skillsv1.CommandPolicy) {
			p.Spec.Examples = []skillsv1.PolicyExample{{Command: "ls", Expect: "Sure"}}
		}), "spec.examples[0].expect: Unsupported value"},

		{"run valid", run("valid", nil), ""},
		{"run empty command", run("empty", func(r *skillsv1.CommandRun) { r.Spec.Command = "" }), "spec.command"},
		{"run command over 16 KiB", run("huge", func(r *skillsv1.CommandRun) { r.Spec.Command = long(16385) }), "spec.command: Too long"},
		{"run without agent", run("no-agent", func(r *skillsv1.CommandRun) { r.Spec.Agent = "" }), "spec.agent"},
		{"run unknown approval decision", run("bad-decision", func(r *skillsv1.CommandRun) {
			r.Spec.Approval = &skillsv1.Approval{Decision: "Maybe"}
		}), "spec.approval.decision: Unsupported value"},

		{"agent valid", agent("valid", nil), ""},
		{"agent name with a dot", agent("ops.team", nil), "metadata.name must be a DNS label of at most 57 characters"},
		{"agent name of 58 characters", agent(long(58), nil), "metadata.name must be a DNS label of at most 57 characters"},
		{"agent selecting nothing", agent("no-skills", func(a *skillsv1.Agent) { a.Spec.Skills = skillsv1.SkillSelection{} }), "spec.skills needs a selector or names"},
		{"agent with a selector only", agent("selector", func(a *skillsv1.Agent) {
			a.Spec.Skills = skillsv1.SkillSelection{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "ops"}}}
		}), ""},
		{"agent model URL not http", agent("ftp-model", func(a *skillsv1.Agent) { a.Spec.Model.BaseURL = "ftp://models" }), "spec.model.baseURL must be an http or https URL"},
		{"agent temperature out of range", agent("hot", func(a *skillsv1.Agent) { a.Spec.Model.Temperature = "3" }), "spec.model.temperature"},
		{"agent too many tool calls", agent("chatty", func(a *skillsv1.Agent) { a.Spec.MaxToolCalls = 1000 }), "spec.maxToolCalls"},
	}
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := env.Client.Create(ctx, tc.obj)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("want the object accepted, got: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want the object refused with %q, it was accepted", tc.wantErr)
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("want an Invalid error, got: %v", err)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("want an error containing %q, got: %v", tc.wantErr, err)
			}
		})
	}
}
