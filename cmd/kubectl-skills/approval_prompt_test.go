package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/cli"
	"github.com/kubeskills/kubeskills/internal/cli/clitest"
)

// twoOfTwo has the namespace's policy name alice and erin as approvers, both
// needed, and lets carol decide by RBAC without being named.
func twoOfTwo(t *testing.T, ns string) map[string]person {
	t.Helper()
	people := approvalSetup(t, ns)
	bind(t, ns, "carol", "ClusterRole", "kubeskills-approver")
	policy := &skillsv1.CommandPolicy{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "ops-policy"}, policy); err != nil {
		t.Fatal(err)
	}
	policy.Spec.Approval = &skillsv1.ApprovalRule{Users: []string{"alice", "erin"}, Required: 2}
	if err := env.Client.Update(context.Background(), policy); err != nil {
		t.Fatal(err)
	}
	return people
}

// TestApprovalRefusals: each refusal is one line, from the API server when
// only it knows (a user not named, the requester), and the summary shows
// what is decided.
func TestApprovalRefusals(t *testing.T) {
	const ns = "refusals"
	people := twoOfTwo(t, ns)
	alice, bob, carol, erin := people["alice"], people["bob"], people["carol"], people["erin"]
	waitAdmission(t, bob, ns)
	request(t, bob, ns, "drain", "kubectl drain node-1")
	eventually(t, "the run never waited for alice and erin", func() error {
		run := getRun(t, ns, "drain")
		if run.Status.Phase != skillsv1.PhaseAwaitingApproval || run.Status.Decision == nil || run.Status.Decision.Approvers == nil {
			return fmt.Errorf("phase %q, decision %+v", run.Status.Phase, run.Status.Decision)
		}
		return nil
	})

	// Without a terminal and without --yes, nothing happens.
	expectFailure(t, "approve without a terminal", alice.run("approve", "drain"),
		"failed to approve commandrun refusals/drain: standard input is not a terminal", "pass --yes", "nothing was changed")
	expectFailure(t, "not an approver", carol.run("approve", "drain", "--yes"),
		"failed to approve commandrun refusals/drain: refused by admission: "+
			"carol is not an approver of this command: its policy allows the users alice, erin and no group")
	expectFailure(t, "one's own command", bob.run("deny", "drain", "--yes"),
		"refused by admission: the user who requested a command cannot approve or deny it")
	if run := getRun(t, ns, "drain"); len(run.AllApprovals()) != 0 {
		t.Fatalf("a refused approval changed the run: %+v", run.AllApprovals())
	}

	res := alice.run("approve", "drain", "--yes", "--reason", "window")
	if res.Code != cli.ExitOK || res.Stdout != "commandrun.kubeskills.io/drain approved by alice (1 of 2 approvals)\n" {
		t.Fatalf("approve: exit %d, stdout %q, stderr %q", res.Code, res.Stdout, res.Stderr)
	}
	for _, want := range []string{
		"Approve commandrun refusals/drain, as alice:",
		"Command:      kubectl drain node-1\n",
		"Decision:     Ask, by the default action of CommandPolicy ops-policy (generation 2)",
		"Skill:        none",
		"Agent:        ops",
		"Requested by: bob",
		"Sandbox:      none: commands run with no Kubernetes identity",
		"Approvers:    users alice, erin; 2 required",
		"So far:       0 of 2 approvals",
	} {
		if !strings.Contains(res.Stderr, want) {
			t.Errorf("summary lacks %q:\n%s", want, res.Stderr)
		}
	}
	expectFailure(t, "N of M so far", alice.run("approve", "drain", "--yes"),
		`it was already approved by alice ("window"); 1 of 2 approvals so far, another approver must add theirs`)

	res = erin.run("approve", "drain", "--yes")
	if res.Code != cli.ExitOK || res.Stdout != "commandrun.kubeskills.io/drain approved by erin (2 of 2 approvals)\n" ||
		!strings.Contains(res.Stderr, "So far:       1 of 2 approvals (alice)") {
		t.Fatalf("second approval: exit %d, stdout %q, stderr %q", res.Code, res.Stdout, res.Stderr)
	}
	waitPhase(t, ns, "drain", skillsv1.PhaseRunning)
	expectFailure(t, "already decided", alice.run("deny", "drain", "--yes"), "it was already approved by")
}

// TestApprovalQuestion answers the question through a pseudo-terminal.
func TestApprovalQuestion(t *testing.T) {
	const ns = "question"
	people := approvalSetup(t, ns)
	alice, bob := people["alice"], people["bob"]
	waitAdmission(t, bob, ns)
	request(t, bob, ns, "restart", "kubectl rollout restart deploy/web")
	waitPhase(t, ns, "restart", skillsv1.PhaseAwaitingApproval)

	answer := func(text string, args ...string) clitest.Result {
		t.Helper()
		master, slave := openPTY(t)
		if _, err := master.WriteString(text); err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		code := cli.Execute(append(args, "--kubeconfig", alice.kubeconfig),
			genericiooptions.IOStreams{In: slave, Out: &out, ErrOut: &errOut})
		return clitest.Result{Stdout: out.String(), Stderr: errOut.String(), Code: code}
	}
	res := answer("n\n", "approve", "restart")
	if res.Code != cli.ExitFailed || res.Stdout != "" || !strings.Contains(res.Stderr, "Approve? [y/N] ") ||
		!strings.HasSuffix(res.Stderr, "error: not approved: commandrun question/restart is unchanged\n") {
		t.Fatalf("answer n: exit %d, stdout %q, stderr %q", res.Code, res.Stdout, res.Stderr)
	}
	if run := getRun(t, ns, "restart"); len(run.AllApprovals()) != 0 {
		t.Fatalf("a refused question changed the run: %+v", run.AllApprovals())
	}
	res = answer("yes\n", "approve", "restart")
	if res.Code != cli.ExitOK || res.Stdout != "commandrun.kubeskills.io/restart approved by alice\n" ||
		!strings.Contains(res.Stderr, "Sandbox:      ") {
		t.Fatalf("answer yes: exit %d, stdout %q, stderr %q", res.Code, res.Stdout, res.Stderr)
	}
}

// openPTY opens a pseudo-terminal pair: what is written to master is read
// from slave, which is a terminal.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("no pseudo-terminals here (/dev/ptmx): %v", err)
	}
	t.Cleanup(func() { _ = master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = slave.Close() })
	return master, slave
}

// TestListPendingWatch follows runs as they come to wait and leave.
func TestListPendingWatch(t *testing.T) {
	const ns = "watching"
	people := approvalSetup(t, ns)
	alice, bob := people["alice"], people["bob"]
	waitAdmission(t, bob, ns)
	request(t, bob, ns, "first", "kubectl rollout restart deploy/web")
	waitPhase(t, ns, "first", skillsv1.PhaseAwaitingApproval)

	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut clitest.SyncBuffer
	done := make(chan int)
	go func() {
		done <- cli.ExecuteContext(ctx, []string{"list", "--pending", "--watch", "--kubeconfig", alice.kubeconfig},
			genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	}()
	defer func() {
		cancel()
		if code := <-done; code != cli.ExitOK {
			t.Errorf("list --watch exited %d: %s", code, errOut.String())
		}
	}()
	rowFor := func(name, phase string) func() error {
		return func() error {
			for _, l := range strings.Split(out.String(), "\n") {
				f := strings.Fields(l)
				if len(f) > 0 && f[0] == name && f[len(f)-1] == phase {
					return nil
				}
			}
			return fmt.Errorf("no %s row of %s in:\n%s%s", phase, name, out.String(), errOut.String())
		}
	}
	eventually(t, "the header", func() error {
		if !strings.HasPrefix(out.String(), "NAME ") || !strings.Contains(strings.SplitN(out.String(), "\n", 2)[0], "PHASE") {
			return fmt.Errorf("output %q", out.String())
		}
		return nil
	})
	eventually(t, "the pending run", rowFor("first", "AwaitingApproval"))
	request(t, bob, ns, "second", "kubectl drain node-2")
	eventually(t, "the new run", rowFor("second", "AwaitingApproval"))
	if res := alice.run("deny", "second", "--yes"); res.Code != cli.ExitOK {
		t.Fatalf("deny: %+v", res)
	}
	eventually(t, "the denied run", rowFor("second", "Denied"))
}
