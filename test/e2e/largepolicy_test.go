//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/runner"
	"github.com/kubeskills/kubeskills/internal/sandbox/sandboxtest"
)

// limitAgent answers to the largest CommandPolicy the CRD admits.
const limitAgent = "limit"

// policyAtTheLimit runs a command under the largest CommandPolicy the CRD
// admits (sandboxtest.LargestPolicy: 256 rules of 1024 characters, far
// more than the 128 KiB Linux allows one argument): the command Succeeds,
// and its sandbox gave the runner the policy in several --policy
// arguments, each under that limit.
func policyAtTheLimit(t *testing.T, _ *state) {
	g := NewWithT(t)
	limits, err := sandboxtest.ReadLimits(c.root)
	g.Expect(err).NotTo(HaveOccurred())
	pol := sandboxtest.LargestPolicy(limits)
	pol.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: limitAgent}
	pol.Spec.Sandbox = &skillsv1.Sandbox{Image: toolbox, Timeout: &metav1.Duration{Duration: 20 * time.Second}}
	createForTest(t, pol)
	a := installAgentWith(t, limitAgent, "test/e2e/testdata/limit-agent-values.yaml")
	t.Cleanup(func() { _, _ = c.command(c.helm, "uninstall", limitAgent, "-n", ns, "--wait") })

	res := a.run(t, "echo at-the-limit")
	g.Expect(res.Phase).To(Equal(string(skillsv1.PhaseSucceeded)), res.Message)
	g.Expect(res.Stdout).To(Equal("at-the-limit\n"))

	var job batchv1.Job
	g.Expect(c.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: res.Run}, &job)).To(Succeed())
	parts := 0
	for _, arg := range job.Spec.Template.Spec.Containers[0].Command {
		g.Expect(len(arg)).To(BeNumerically("<", 128<<10), "an argument Linux refuses")
		if strings.HasPrefix(arg, "--"+runner.PolicyFlag+"=") {
			parts++
		}
	}
	g.Expect(parts).To(BeNumerically(">", 1), "the policy fits one argument: the step shows nothing")
}
