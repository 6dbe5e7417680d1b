//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// doctor runs `kubectl skills doctor` on the e2e namespace, proving the
// identity of the kube agent's policy too, and returns its report and
// whether it passed.
func doctor(t *testing.T) (string, bool) {
	t.Helper()
	out, err := c.command(c.kubectl, "skills", "doctor", "-n", ns, "--policy", kubeAgent)
	return out, err == nil
}

// doctorFindsAnOpenFence: the doctor passes on this cluster, its sandbox
// stopping a program that a command started, and fails,
// naming it, once a namespace-wide allow-all egress NetworkPolicy opens the
// sandboxes again.
func doctorFindsAnOpenFence(t *testing.T, _ *state) {
	g := NewWithT(t)
	out, ok := doctor(t)
	g.Expect(ok).To(BeTrue(), "the doctor fails on a fit cluster:\n%s", out)
	g.Expect(out).To(ContainSubstring("The cluster is fit for kubeskills"))
	g.Expect(out).To(MatchRegexp(`(?m)^ok +canary-identity: .*e2e-viewer`))
	g.Expect(out).To(MatchRegexp(`(?m)^ok +canary-exec: .*refused .*touch /tmp/kubeskills-doctor.*started by`),
		"a sandbox stops the program awk starts, which the policy refuses")

	c.mustKubectl(t, "apply", "-f", "test/e2e/testdata/allow-all-egress.yaml")
	out, ok = doctor(t)
	c.mustKubectl(t, "delete", "-f", "test/e2e/testdata/allow-all-egress.yaml")
	g.Expect(ok).To(BeFalse(), "the doctor passes with an allow-all egress policy:\n%s", out)
	g.Expect(out).To(MatchRegexp(`(?m)^FAIL netpol: .*allow-all-egress`))
	g.Expect(out).To(MatchRegexp(`(?m)^FAIL canary: .*allow-all-egress`))
}

// doctorFindsAStoppedEnforcer: with kube-router stopped, new sandbox pods
// are not fenced, and the doctor's canary shows it. The last step: the
// cluster's teardown follows.
func doctorFindsAStoppedEnforcer(t *testing.T, _ *state) {
	g := NewWithT(t)
	state := os.Getenv("KUBESKILLS_CLUSTER_DIR")
	if state == "" {
		state = "/var/lib/kubeskills-cluster"
	}
	data, err := os.ReadFile(filepath.Join(state, "pids", "kube-router"))
	g.Expect(err).NotTo(HaveOccurred())
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(syscall.Kill(pid, syscall.SIGTERM)).To(Succeed())
	g.Eventually(func() error { return syscall.Kill(pid, 0) }).WithTimeout(30*time.Second).Should(HaveOccurred(), "kube-router did not stop")

	out, ok := doctor(t)
	g.Expect(ok).To(BeFalse(), "the doctor passes with the enforcer stopped:\n%s", out)
	g.Expect(out).To(MatchRegexp(`(?m)^FAIL canary: .*does not enforce NetworkPolicy`))
}
