package v1alpha1_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// TestRoundTrip stores a fully populated object of each kind and reads it
// back: every field survives, and the schema's defaults are applied.
func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	dur := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

	fullSkill := skill("round-trip", func(s *skillsv1.Skill) {
		s.Spec.License = "Apache-2.0"
		s.Spec.Compatibility = "Needs kubectl 1.30 or later"
		s.Spec.AllowedTools = []string{"Bash(kubectl get *)", "Read"}
		s.Spec.Metadata = map[string]string{"author": "platform-team", "version": "1.2"}
		s.Spec.Invocation = skillsv1.InvocationExplicit
		s.Spec.FrontMatter = "name: round-trip\ndescription: x\n"
		s.Spec.Files = []skillsv1.SkillFile{
			{Path: "scripts/check.sh", Content: ptr.To("#!/bin/sh\necho ok\n"), Executable: true},
			{Path: "assets/logo.png", BinaryContent: []byte{0x89, 'P', 'N', 'G', 0, 0xff}},
		}
	})
	wantSkill := fullSkill.Spec.DeepCopy()

	fullPolicy := policy("round-trip", func(p *skillsv1.CommandPolicy) {
		p.Spec.Rules = append(p.Spec.Rules, skillsv1.PolicyRule{Pattern: "rm *", Action: skillsv1.ActionNever, Description: "no deletes"})
		p.Spec.Examples = []skillsv1.PolicyExample{{Command: "rm -rf /", Expect: skillsv1.ActionNever}}
		p.Spec.History = &skillsv1.RunHistory{MaxRuns: ptr.To[int32](10)}
		p.Spec.Sandbox = &skillsv1.Sandbox{
			Image:            "docker.io/library/busybox:1.37",
			Resources:        &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
			Egress:           &skillsv1.Egress{CIDRs: []string{"10.0.0.0/8"}, Ports: []int32{443}, DNS: true},
			RuntimeClassName: ptr.To("gvisor"),
			EnvFromSecrets:   []skillsv1.SecretEnv{{SecretName: "github-token", Prefix: "GH_"}},
		}
	})
	wantPolicy := fullPolicy.Spec.DeepCopy()
	wantPolicy.DefaultAction = skillsv1.ActionAsk
	wantPolicy.ApprovalTimeout = dur(time.Hour)
	wantPolicy.History.MaxAge = dur(168 * time.Hour)
	wantPolicy.Sandbox.Timeout = dur(5 * time.Minute)
	wantPolicy.Sandbox.OutputLimitBytes = ptr.To[int32](65536)
	wantPolicy.Sandbox.TTLSecondsAfterFinished = ptr.To[int32](300)

	fullRun := run("round-trip", func(r *skillsv1.CommandRun) {
		r.Spec.Timeout = dur(30 * time.Second)
		r.Spec.RequestedBy = "system:serviceaccount:default:ops"
	})
	wantRun := fullRun.Spec.DeepCopy()

	fullAgent := agent("round-trip", func(a *skillsv1.Agent) {
		a.Spec.Skills.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "ops"}}
		a.Spec.Model.APIKeySecretRef = &skillsv1.SecretKeyRef{Name: "openai"}
		a.Spec.Model.Temperature = "0.2"
		a.Spec.Model.MaxTokens = ptr.To[int32](4096)
		a.Spec.PolicyRef = &skillsv1.LocalRef{Name: "read-only"}
		a.Spec.Instructions = "Be brief."
		a.Spec.Access = &skillsv1.AgentAccess{TokenSecretName: "ops-token"}
		a.Spec.Runtime = &skillsv1.AgentRuntime{NodeSelector: map[string]string{"pool": "agents"}}
	})
	wantAgent := fullAgent.Spec.DeepCopy()
	wantAgent.MaxToolCalls = 20
	wantAgent.Model.APIKeySecretRef.Key = "apiKey"
	wantAgent.Runtime.Replicas = ptr.To[int32](1)
	wantSkill.Invocation = skillsv1.InvocationExplicit

	cases := []struct {
		obj      client.Object
		empty    client.Object
		spec     func(client.Object) any
		wantSpec any
	}{
		{fullSkill, &skillsv1.Skill{}, func(o client.Object) any { return &o.(*skillsv1.Skill).Spec }, wantSkill},
		{fullPolicy, &skillsv1.CommandPolicy{}, func(o client.Object) any { return &o.(*skillsv1.CommandPolicy).Spec }, wantPolicy},
		{fullRun, &skillsv1.CommandRun{}, func(o client.Object) any { return &o.(*skillsv1.CommandRun).Spec }, wantRun},
		{fullAgent, &skillsv1.Agent{}, func(o client.Object) any { return &o.(*skillsv1.Agent).Spec }, wantAgent},
	}
	for _, tc := range cases {
		t.Run(tc.obj.GetObjectKind().GroupVersionKind().Kind+tc.obj.GetName(), func(t *testing.T) {
			if err := env.Client.Create(ctx, tc.obj); err != nil {
				t.Fatalf("create: %v", err)
			}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tc.obj), tc.empty); err != nil {
				t.Fatalf("get: %v", err)
			}
			if got := tc.spec(tc.empty); !equality.Semantic.DeepEqual(got, tc.wantSpec) {
				t.Fatalf("spec changed in the round trip:\n got: %+v\nwant: %+v", got, tc.wantSpec)
			}
		})
	}
}

// TestDefaultInvocation shows that a Skill without an invocation is Auto.
func TestDefaultInvocation(t *testing.T) {
	ctx := context.Background()
	s := skill("default-invocation", nil)
	if err := env.Client.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	if s.Spec.Invocation != skillsv1.InvocationAuto {
		t.Fatalf("invocation = %q, want Auto", s.Spec.Invocation)
	}
}

// TestCommandRunUpdates shows that only the approval of a CommandRun may
// change, and only once.
func TestCommandRunUpdates(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name    string
		mutate  func(*skillsv1.CommandRun)
		wantErr string
	}{
		{"change the command", func(r *skillsv1.CommandRun) { r.Spec.Command = "rm -rf /" }, "spec.command is immutable"},
		{"change the agent", func(r *skillsv1.CommandRun) { r.Spec.Agent = "other" }, "spec.agent is immutable"},
		{"remove the skill", func(r *skillsv1.CommandRun) { r.Spec.Skill = "" }, "spec.skill is immutable"},
		{"add a timeout", func(r *skillsv1.CommandRun) { r.Spec.Timeout = &metav1.Duration{Duration: time.Hour} }, "spec.timeout is immutable"},
		{"forge the requester", func(r *skillsv1.CommandRun) { r.Spec.RequestedBy = "alice" }, "spec.requestedBy is immutable"},
		{"approve", func(r *skillsv1.CommandRun) {
			r.Spec.Approval = &skillsv1.Approval{Decision: skillsv1.Approved, Approver: "alice", Reason: "read-only"}
		}, ""},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := run("update-"+strings.Repeat("x", i+1), nil)
			if err := env.Client.Create(ctx, r); err != nil {
				t.Fatal(err)
			}
			tc.mutate(r)
			err := env.Client.Update(ctx, r)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("want the update accepted, got: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("want an error containing %q, got: %v", tc.wantErr, err)
			}
		})
	}

	t.Run("change an approval", func(t *testing.T) {
		r := run("approved-once", func(r *skillsv1.CommandRun) {
			r.Spec.Approval = &skillsv1.Approval{Decision: skillsv1.Denied, Approver: "alice"}
		})
		if err := env.Client.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		for _, change := range []func(*skillsv1.CommandRun){
			func(r *skillsv1.CommandRun) { r.Spec.Approval.Decision = skillsv1.Approved },
			func(r *skillsv1.CommandRun) { r.Spec.Approval = nil },
		} {
			changed := r.DeepCopy()
			change(changed)
			err := env.Client.Update(ctx, changed)
			if err == nil || !strings.Contains(err.Error(), "spec.approval cannot be changed once set") {
				t.Fatalf("want the approval change refused, got: %v", err)
			}
		}
	})
}

// TestKubectlApply shows what a person sees: kubectl apply of a broken Skill
// is refused with a message naming the field, and nothing is stored.
func TestKubectlApply(t *testing.T) {
	dir := t.TempDir()
	kubeconfig, err := env.WriteAdminKubeconfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	manifest := func(name, description string) string {
		return "apiVersion: kubeskills.io/v1alpha1\nkind: Skill\nmetadata:\n  name: " + name +
			"\n  namespace: default\nspec:\n  description: " + description + "\n  instructions: Do it.\n"
	}
	cases := []struct {
		name, manifest, want string
	}{
		{"bad name", manifest("Bad_Name", "Checks things."), `metadata.name: Invalid value: "Bad_Name"`},
		{"long description", manifest("long-description", strings.Repeat("d", 5000)), "spec.description: Too long: may not be more than 4096"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "skill.yaml")
			if err := os.WriteFile(path, []byte(tc.manifest), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(env.KubectlPath(), "--kubeconfig", kubeconfig, "apply", "-f", path).CombinedOutput()
			if err == nil {
				t.Fatalf("kubectl apply succeeded, want a refusal:\n%s", out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Fatalf("kubectl said:\n%s\nwant it to contain %q", out, tc.want)
			}
		})
	}
	var skills skillsv1.SkillList
	if err := env.Client.List(context.Background(), &skills, client.MatchingFields{"metadata.name": "long-description"}); err != nil {
		t.Fatal(err)
	}
	if len(skills.Items) != 0 {
		t.Fatalf("a refused Skill was stored")
	}
}
