//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
)

// decide approves or denies a run with `kubectl skills approve|deny`, as the
// user of kubeconfig ("" for the e2e's own), without the confirmation
// question, and returns what it printed on its standard output and error.
func decide(verb, run, kubeconfig, reason string) (stdout, stderr string, err error) {
	args := []string{"skills", verb, run, "-n", ns, "--reason", reason, "--yes"}
	if kubeconfig != "" {
		args = append(args, "--kubeconfig", kubeconfig)
	}
	cmd := exec.Command(c.kubectl, args...)
	cmd.Dir = c.root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.kubeconfig,
		"PATH="+c.pluginDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// mustDecide is decide that fails the test when the command fails.
func mustDecide(t *testing.T, verb, run, kubeconfig, reason string) string {
	t.Helper()
	out, stderr, err := decide(verb, run, kubeconfig, reason)
	if err != nil {
		t.Fatalf("kubectl skills %s %s: %v\n%s%s", verb, run, err, out, stderr)
	}
	return out
}

// serviceAccountUser is the user name the API server gives a
// ServiceAccount of the e2e namespace.
func serviceAccountUser(name string) string { return "system:serviceaccount:" + ns + ":" + name }

// twoOfTwo: a policy that names two approvers and requires both. The first
// approval leaves the command waiting, with no Job; a user the policy does
// not name and the requester are refused by the API server; the second
// approval runs it in the sandbox, and the Decided Event names both.
func twoOfTwo(t *testing.T, s *state) {
	g := NewWithT(t)
	ctx := context.Background()
	const command = "expr 40 + 2"

	// Two approvers, one user who holds kubeskills-approver but is not
	// named, and the agent, which asks: all four may patch CommandRuns, so
	// what refuses them is admission, not RBAC.
	first, second, bystander := "e2e-approver-1", "e2e-approver-2", "e2e-bystander"
	requester := agentRequester(t)
	configs := bindApprovers(t, "e2e-two-of-two", []string{first, second, bystander}, requester)
	userA, userB := serviceAccountUser(first), serviceAccountUser(second)
	requireApprovals(t, 2, userA, userB)

	pending := runAsync(s, command)
	var run skillsv1.CommandRun
	g.Eventually(func(g Gomega) {
		run = latestRun(g, command)
		g.Expect(run.Status.Phase).To(Equal(skillsv1.PhaseAwaitingApproval))
		g.Expect(run.Status.Decision).NotTo(BeNil())
		g.Expect(run.Status.Decision.Approvers).NotTo(BeNil(), "the decision does not carry the policy's approvers")
		g.Expect(run.Status.Decision.Approvers.Users).To(ConsistOf(userA, userB))
		g.Expect(run.Status.Decision.Approvers.Required).To(BeEquivalentTo(2))
	}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	g.Expect(run.Spec.RequestedBy).To(Equal(serviceAccountUser(requester)))

	// The first approval is one of two: the run waits on, with no Job.
	out := mustDecide(t, "approve", run.Name, configs[first], "first of two")
	g.Expect(out).To(ContainSubstring("approved by " + userA + " (1 of 2 approvals)"))
	g.Eventually(func(g Gomega) {
		var r skillsv1.CommandRun
		g.Expect(c.client.Get(ctx, client.ObjectKeyFromObject(&run), &r)).To(Succeed())
		cond := apimeta.FindStatusCondition(r.Status.Conditions, skillsv1.SucceededCondition)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Message).To(ContainSubstring("(1 so far, by " + userA + ")"))
	}).WithTimeout(10 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	g.Consistently(func(g Gomega) {
		var r skillsv1.CommandRun
		g.Expect(c.client.Get(ctx, client.ObjectKeyFromObject(&run), &r)).To(Succeed())
		g.Expect(r.Status.Phase).To(Equal(skillsv1.PhaseAwaitingApproval))
		g.Expect(jobsOf(t, run.Name)).To(BeZero())
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())

	// A user the policy does not name, and the requester, are refused by
	// the API server, in one line, the last, after what they were shown.
	refused := func(who, why string) {
		t.Helper()
		out, stderr, err := decide("approve", run.Name, configs[who], "not mine to approve")
		g.Expect(err).To(HaveOccurred(), "%s approved: %s", who, out)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		var errs []string
		for _, l := range lines {
			if strings.HasPrefix(l, "error:") {
				errs = append(errs, l)
			}
		}
		g.Expect(errs).To(HaveLen(1), "the refusal is not one line: %s", stderr)
		g.Expect(lines[len(lines)-1]).To(Equal(errs[0]), "the refusal is not the last line: %s", stderr)
		g.Expect(errs[0]).To(ContainSubstring("refused by admission"))
		g.Expect(errs[0]).To(ContainSubstring(why))
	}
	refused(bystander, serviceAccountUser(bystander)+" is not an approver of this command")
	refused(requester, "the user who requested a command cannot approve or deny it")

	// The second approval runs the command.
	out = mustDecide(t, "approve", run.Name, configs[second], "second of two")
	g.Expect(out).To(ContainSubstring("approved by " + userB + " (2 of 2 approvals)"))
	res := <-pending
	g.Expect(res.Phase).To(Equal(string(skillsv1.PhaseSucceeded)), res.Message)
	g.Expect(res.ExitCode).To(HaveValue(BeEquivalentTo(0)))
	g.Expect(res.Stdout).To(Equal("42\n"))
	g.Expect(jobsOf(t, run.Name)).To(Equal(1))

	g.Expect(c.client.Get(ctx, client.ObjectKeyFromObject(&run), &run)).To(Succeed())
	var approvers []string
	for _, a := range run.Spec.Approvals {
		g.Expect(a.Decision).To(Equal(skillsv1.Approved))
		approvers = append(approvers, a.Approver)
	}
	g.Expect(approvers).To(Equal([]string{userA, userB}), "spec.approvals")
	g.Eventually(func(g Gomega) {
		var events corev1.EventList
		g.Expect(c.client.List(ctx, &events, client.InNamespace(ns),
			client.MatchingFields{"involvedObject.name": run.Name, "reason": "Decided"})).To(Succeed())
		var notes []string
		for _, e := range events.Items {
			notes = append(notes, e.Message)
		}
		g.Expect(notes).To(ConsistOf(fmt.Sprintf("Approved by %s, %s (2 of 2)", userA, userB)))
	}).WithTimeout(10 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
}

// bindApprovers binds the role kubeskills-approver, until the test ends,
// to ServiceAccounts of the e2e namespace: those of create, which it
// creates, and those of existing. It returns a kubeconfig of each, by name.
func bindApprovers(t *testing.T, binding string, create []string, existing ...string) map[string]string {
	t.Helper()
	configs := map[string]string{}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: binding, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "kubeskills-approver"},
	}
	for _, name := range append(slices.Clone(create), existing...) {
		configs[name] = serviceAccountKubeconfig(t, name, slices.Contains(create, name))
		rb.Subjects = append(rb.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns})
	}
	createForTest(t, rb)
	return configs
}

// requireApprovals makes the policy of the agent ops name users as its
// approvers and require that many approvals of a command it asks about,
// until the test ends.
func requireApprovals(t *testing.T, required int, users ...string) {
	t.Helper()
	ctx := context.Background()
	var agent skillsv1.Agent
	if err := c.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: agentName}, &agent); err != nil {
		t.Fatal(err)
	}
	if agent.Spec.PolicyRef == nil {
		t.Fatalf("agent %s names no CommandPolicy", agentName)
	}
	policy := &skillsv1.CommandPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: agent.Spec.PolicyRef.Name}}
	set := func(rule string) error {
		return c.client.Patch(ctx, policy, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"approval":`+rule+`}}`)))
	}
	rule, err := json.Marshal(map[string]any{"users": users, "required": required})
	if err != nil {
		t.Fatal(err)
	}
	if err := set(string(rule)); err != nil {
		t.Fatalf("failed to set the approval rule of %s: %v", policy.Name, err)
	}
	t.Cleanup(func() {
		if err := set("null"); err != nil {
			t.Errorf("failed to clear the approval rule of %s: %v", policy.Name, err)
		}
	})
}

// agentRequester is the name of the ServiceAccount the agent files its
// runs as: the one of its pod.
func agentRequester(t *testing.T) string {
	t.Helper()
	pod := agentPod(t)
	if pod.Spec.ServiceAccountName == "" {
		t.Fatalf("the pod %s of agent %s names no ServiceAccount", pod.Name, agentName)
	}
	return pod.Spec.ServiceAccountName
}

// createForTest creates obj and deletes it when the test ends.
func createForTest(t *testing.T, obj client.Object) {
	t.Helper()
	if err := c.client.Create(context.Background(), obj); err != nil {
		t.Fatalf("failed to create %T %s: %v", obj, obj.GetName(), err)
	}
	t.Cleanup(func() {
		if err := c.client.Delete(context.Background(), obj); client.IgnoreNotFound(err) != nil {
			t.Errorf("failed to delete %T %s: %v", obj, obj.GetName(), err)
		}
	})
}

// serviceAccountKubeconfig returns the path of a kubeconfig of the cluster
// with a token of the ServiceAccount name of the e2e namespace, which it
// first creates (and deletes when the test ends) when create is set.
func serviceAccountKubeconfig(t *testing.T, name string, create bool) string {
	t.Helper()
	ctx := context.Background()
	if create {
		createForTest(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}})
	}
	expiry := int64(time.Hour / time.Second)
	tr, err := c.clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("failed to request a token of %s: %v", name, err)
	}

	// The cluster of the e2e's kubeconfig, with the user's token.
	admin, err := clientcmd.LoadFromFile(c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	current, ok := admin.Contexts[admin.CurrentContext]
	if !ok || admin.Clusters[current.Cluster] == nil {
		t.Fatalf("%s has no current context with a cluster", c.kubeconfig)
	}
	cluster := admin.Clusters[current.Cluster].DeepCopy()
	if cluster.CertificateAuthority != "" && !filepath.IsAbs(cluster.CertificateAuthority) {
		cluster.CertificateAuthority = filepath.Join(filepath.Dir(c.kubeconfig), cluster.CertificateAuthority)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = cluster
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: name, Namespace: ns}
	cfg.CurrentContext = name
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// childJudged: under the agent chart's default policy a person approves
// an awk program, and the rm that awk starts is refused in the sandbox at
// its exec: the approval covers the line, not a Never program the line's
// programs start. The run's status names rm and that awk started it.
func childJudged(t *testing.T, s *state) {
	g := NewWithT(t)
	const command = `awk 'BEGIN { system("rm -rf /tmp/e2e-child") }'`
	pending := runAsync(s, command)
	run := awaitingApproval(t, command)
	mustDecide(t, "approve", run.Name, "", "e2e: awk's child is judged on its own")
	res := <-pending
	g.Expect(res.Phase).To(Equal(string(skillsv1.PhaseFailed)), res.Message)
	g.Expect(res.ExitCode).NotTo(BeNil())
	g.Expect(*res.ExitCode).To(BeEquivalentTo(126), res.Message)

	var got skillsv1.CommandRun
	g.Expect(c.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: run.Name}, &got)).To(Succeed())
	g.Expect(got.Status.Result).NotTo(BeNil())
	msg := got.Status.Result.Message
	g.Expect(msg).To(HavePrefix("kubeskills: refused "), "the status does not carry the refusal")
	g.Expect(msg).To(ContainSubstring(`rm -rf /tmp/e2e-child`), "the status does not name the child")
	g.Expect(msg).To(ContainSubstring(`started by "awk"`), "the status does not name what started the child")
	g.Expect(msg).To(ContainSubstring("the policy says Never"))
}
