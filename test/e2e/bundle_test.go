//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/agent/modeltest"
	"github.com/kubeskills/kubeskills/internal/sandbox"
)

// The skill served from an OCI image (testdata/bundled-skill.yaml), the
// agent that serves it (testdata/bundle-agent-values.yaml) and where the
// image's files come from (hack/images builds the image from that folder).
const (
	bundleAgent  = "bundled"
	bundledSkill = "cost-report-image"
	bundleImage  = "docker.io/kubeskills/skill-cost-report:dev"
	bundleSource = "config/samples/skills/cost-report"
)

// skillFromImage: a Skill whose files are served from an OCI image
// (spec.bundle.image) runs for real. The agent's pod mounts the image and
// lists and reads its files; the sandbox mounts it read-only at /skill,
// where the files are the folder's bytes, its script runs from the image,
// and nothing can write to it.
func skillFromImage(t *testing.T, s *state) {
	g := NewWithT(t)
	ctx := context.Background()
	c.mustKubectl(t, "apply", "-f", "test/e2e/testdata/identity.yaml")
	c.mustKubectl(t, "apply", "-f", "test/e2e/testdata/bundled-skill.yaml")
	g.Eventually(func(g Gomega) {
		var sk skillsv1.Skill
		g.Expect(c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: bundledSkill}, &sk)).To(Succeed())
		g.Expect(apimeta.IsStatusConditionTrue(sk.Status.Conditions, skillsv1.ReadyCondition)).To(BeTrue(), "%v", sk.Status.Conditions)
		g.Expect(sk.Status.ServedGeneration).To(Equal(sk.Generation))
	}, time.Minute, time.Second).Should(Succeed())

	agent := installAgentWith(t, bundleAgent, "test/e2e/testdata/bundle-agent-values.yaml")
	g.Expect(imageVolumes(runningAgentPod(t, bundleAgent).Spec.Volumes)).To(ContainElement(bundleImage),
		"the agent's pod mounts the skill's image")

	// A chat: the agent lists the image's files and reads one from its own
	// mount; the skill's script runs in the sandbox from the image.
	s.model.script(t,
		modeltest.Tools(modeltest.Call("use_skill", map[string]string{"name": bundledSkill})),
		modeltest.Tools(modeltest.Call("read_skill_file", map[string]string{"name": bundledSkill, "path": "references/pricing.md"})),
		modeltest.Tools(modeltest.Call("run_command", map[string]string{
			"command": "/skill/scripts/cost-by-namespace.sh", "skill": bundledSkill,
		})),
		modeltest.Step{Content: "The skill's files said: ", EchoToolResults: true})
	answer := chatWith(t, agent, bundleAgent, "What does each namespace cost?")
	g.Expect(answer).To(ContainSubstring(
		"Files bundled with " + bundledSkill + " (read them with read_skill_file): " +
			"assets/legend.png, assets/report-template.csv, references/pricing.md, scripts/cost-by-namespace.sh"))
	g.Expect(answer).To(ContainSubstring(source(t, "references/pricing.md")))
	g.Expect(answer).To(ContainSubstring(`namespace,cpu_cores,memory_gib,storage_gib,cpu_cost,memory_cost,storage_cost,total_cost,pods_without_requests\n`))
	g.Expect(answer).To(MatchRegexp(`\\nkube-system,[0-9.]+,`), "the script read the cluster as e2e-viewer")
	g.Expect(answer).To(MatchRegexp(`"exitCode":\s*0`))
	t.Logf("the skill's script, run from the image in the sandbox: %s", answer[strings.LastIndex(answer, "\n")+1:])

	// The sandbox's /skill holds the folder's files byte for byte, a binary
	// one too, SKILL.md included.
	res := agent.runFor(t, "sha256sum /skill/SKILL.md /skill/assets/legend.png /skill/references/pricing.md", bundledSkill)
	g.Expect(res.Phase).To(Equal(string(skillsv1.PhaseSucceeded)), "%s %s", res.Message, res.Stderr)
	var want strings.Builder
	for _, f := range []string{"SKILL.md", "assets/legend.png", "references/pricing.md"} {
		fmt.Fprintf(&want, "%x  /skill/%s\n", sha256.Sum256([]byte(source(t, f))), f)
	}
	g.Expect(res.Stdout).To(Equal(want.String()))
	t.Logf("sha256sum in the sandbox:\n%s", res.Stdout)

	// The Job mounts the image itself: no ConfigMap shards, no init
	// container unpacking the skill.
	var run skillsv1.CommandRun
	g.Expect(c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: res.Run}, &run)).To(Succeed())
	var job batchv1.Job
	g.Expect(c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: run.Status.JobName}, &job)).To(Succeed())
	pod := job.Spec.Template.Spec
	g.Expect(imageVolumes(pod.Volumes)).To(ContainElement(bundleImage))
	for _, v := range pod.Volumes {
		g.Expect(v.ConfigMap).To(BeNil(), "volume %s: the skill comes from its image only", v.Name)
	}
	for _, ic := range pod.InitContainers {
		g.Expect(ic.Name).NotTo(Equal(sandbox.ContainerUnpackSkill))
	}

	// The command cannot change the skill: the image is mounted read-only.
	res = agent.runFor(t, "grep ' /skill ' /proc/self/mountinfo", bundledSkill)
	g.Expect(res.Phase).To(Equal(string(skillsv1.PhaseSucceeded)), "%s %s", res.Message, res.Stderr)
	g.Expect(res.Stdout).To(MatchRegexp(`^\S+ \S+ \S+ / /skill ro[, ]`))
	t.Logf("/skill in the sandbox: %s", res.Stdout)
	res = agent.runFor(t, "touch /skill/references/pricing.md", bundledSkill)
	g.Expect(res.Phase).To(Equal(string(skillsv1.PhaseFailed)), res.Message)
	g.Expect(res.Stderr).To(ContainSubstring("Read-only file system"))
}

// source is a file of the skill folder the image is built from.
func source(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(c.root, bundleSource, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// imageVolumes lists the references of a pod's image volumes.
func imageVolumes(volumes []corev1.Volume) []string {
	var refs []string
	for _, v := range volumes {
		if v.Image != nil {
			refs = append(refs, v.Image.Reference)
		}
	}
	return refs
}

// runningAgentPod is the one running pod of an agent.
func runningAgentPod(t *testing.T, agent string) corev1.Pod {
	t.Helper()
	return runningAgentPodIn(t, ns, agent)
}

// runningAgentPodIn is an agent's one running pod in a namespace, once
// there is exactly one (a rollout may be ending).
func runningAgentPodIn(t *testing.T, namespace, agent string) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	NewWithT(t).Eventually(func(g Gomega) {
		var pods corev1.PodList
		g.Expect(c.client.List(context.Background(), &pods, client.InNamespace(namespace),
			client.MatchingLabels{"app.kubernetes.io/name": "kubeskills-agent", sandbox.LabelAgent: agent})).To(Succeed())
		var running []corev1.Pod
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				running = append(running, p)
			}
		}
		g.Expect(running).To(HaveLen(1), "running pods of agent %s of %d", agent, len(pods.Items))
		pod = running[0]
	}, time.Minute, 250*time.Millisecond).Should(Succeed())
	return pod
}

// chatWith asks an agent, whose one model is named after it, one question
// and returns the final answer.
func chatWith(t *testing.T, a agentAPI, model, question string) string {
	t.Helper()
	var resp struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	postJSON(t, a.url+"/v1/chat/completions", a.token, map[string]any{
		"model":    model,
		"messages": []map[string]string{{"role": "user", "content": question}},
	}, &resp)
	if len(resp.Choices) == 0 {
		t.Fatalf("agent %s answered no choices", model)
	}
	return resp.Choices[0].Message.Content
}
