package policy_test

import (
	"testing"

	"github.com/kubeskills/kubeskills/internal/policy"
	"github.com/kubeskills/kubeskills/internal/policy/policytest"
)

// The tests in this file reproduce the findings of a security review of
// the judge, each named after its finding. Each line was Always (or not
// Never) before the finding was closed.

// rules builds a policy with the default Ask from pattern/action pairs.
func rules(pairs ...string) policy.Policy {
	p := policy.Policy{Default: policy.Ask}
	for i := 0; i+1 < len(pairs); i += 2 {
		p.Rules = append(p.Rules, policy.Rule{Pattern: pairs[i], Action: policy.Action(pairs[i+1])})
	}
	return p
}

// chartDefault is the agent chart's default policy, as the corpus reads it
// from charts/agent/values.yaml.
func chartDefault(t *testing.T) policy.Policy {
	t.Helper()
	c, err := policytest.Default()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range c.Policies {
		if p.Name == "chart-default" {
			return p.Policy
		}
	}
	t.Fatal("the corpus has no chart-default policy")
	return policy.Policy{}
}

// expect judges each command under p and checks that it gets want, where
// "NotAlways" accepts Ask and Never.
func expect(t *testing.T, p policy.Policy, want string, commands ...string) {
	t.Helper()
	m, err := policy.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range commands {
		if d := m.Decide(c); !policytest.Matches(want, d.Action) {
			t.Errorf("Decide(%q) = %s, want %s: %s", c, d.Action, want, d.Reason)
		}
	}
}

func TestFinding_DoubleBracketRedirectIsNotAlways(t *testing.T) {
	// dash and ash run [[ as a command: > ~/.bashrc truncates the file.
	expect(t, rules("test *", "Always"), "NotAlways", "[[ a > ~/.bashrc ]]", "[[ a < ~/.bashrc ]]")
}

func TestFinding_DoubleBracketRegexIsNotAlways(t *testing.T) {
	// To dash, | in [[ x =~ a|b ]] is a pipe into touch.
	expect(t, rules("test *", "Always"), "NotAlways", "[[ x =~ a|touch${IFS}/tmp/p ]]")
}

func TestFinding_AnsiCQuoteThatDashSplitsIsNotAlways(t *testing.T) {
	// One echo to bash; echo $\, touch and a comment to dash.
	expect(t, rules("echo *", "Always"), "NotAlways", `echo $'\' ; touch /tmp/p ; #'`, `echo $"x" ; touch /tmp/p`)
}

func TestFinding_NULInAnsiCQuoteIsNever(t *testing.T) {
	// The precedence example of docs/policy.md allows kubectl *; bash and
	// busybox cut the word at the NUL and run kubectl delete.
	precedence := rules("kubectl *", "Always", "kubectl get secrets *", "Ask")
	expect(t, precedence, "Never", `kubectl $'delete\0' pod web-0`, "kubectl delete\x00 pod web-0")
	expect(t, rules("rm *", "Never"), "Never", `$'rm\0' -rf /`, `$'rm\x00' -rf /`, `echo $'\u0000'`, `echo $'\c@'`)
}

func TestFinding_FindActionInExpansionIsNotAlways(t *testing.T) {
	p := rules("find *", "Always", "rm *", "Never")
	expect(t, p, "NotAlways",
		`find . ${x:--exec} rm {} \;`, `find . "${x:--delete}"`, `find . {-exec,touch} x \;`, `find . -exe? touch /tmp/p \;`)
	expect(t, p, "Never", `find . -exec rm {} \;`, `find . ${x:--exec} rm {} \;`)
	expect(t, p, "Always", `find . -name '*.go'`, `find ./*.yaml -prune`)
}

func TestFinding_TestVInExpansionIsNotAlways(t *testing.T) {
	// bash evaluates the subscript of test -v, and runs its substitution.
	p := rules("test *", "Always", "[ *", "Always")
	expect(t, p, "NotAlways", `test ${x:--v} 'a[$(touch /tmp/p)]'`, `[ "$a" 'a[$(touch /tmp/p)]' ]`, `test $X`)
	expect(t, p, "Always", `test -n "$x"`, `[ "$x" = yes ]`, `[ -f /etc/hostname ]`)
}

func TestFinding_KubectlKubeconfigFromStdinIsNotAlways(t *testing.T) {
	// A kubeconfig with an exec credential plugin runs any program.
	hdoc := "\napiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n    exec:\n      command: touch\n      args: [/tmp/p]\nEOF"
	expect(t, chartDefault(t), "NotAlways",
		"kubectl get pods --kubeconfig=/dev/stdin <<EOF"+hdoc,
		"kubectl describe pod web-0 --kubeconfig /dev/stdin <<EOF"+hdoc,
		"kubectl logs web-0 --kubeconfig=/dev/stdin <<EOF"+hdoc,
		"kubectl --kubeconfig=/tmp/k get pods", "kubectl get pods --token=x", "kubectl get pods -s https://x",
		"kubectl get pods --as=system:admin", "kubectl get pods --as-group=system:masters", "kubectl get pods --as-uid=0")
}

func TestFinding_KubectlRawProxyIsNotAlways(t *testing.T) {
	expect(t, chartDefault(t), "NotAlways",
		"kubectl get --raw /api/v1/namespaces/default/services/web:80/proxy/", "kubectl get --raw=/api/v1/nodes/n1/proxy/configz")
}

func TestFinding_KubectlSecretSpellingsAreNotAlways(t *testing.T) {
	expect(t, chartDefault(t), "NotAlways",
		"kubectl get SECRETS", "kubectl get Secret db", "kubectl get secret db", "kubectl get secrets.v1.",
		"kubectl get secret.v1 db", "kubectl get pods,SECRETS", "kubectl get Secret/db -o yaml",
		"kubectl get --raw /api/v1/namespaces/x/%73ecrets")
	precedence := rules("kubectl *", "Always", "kubectl get secrets *", "Ask")
	expect(t, precedence, "NotAlways", "kubectl get secret db", "kubectl get SECRETS", "kubectl get pods,secrets",
		"kubectl get secret/db", "kubectl get secrets.v1.core db")
	expect(t, chartDefault(t), "Always", "kubectl get PODS -A", "kubectl get po,svc", "kubectl logs deploy/web --tail=5")
}

func TestFinding_KubectlSubcommandsThatRunAreNotAlways(t *testing.T) {
	p := rules("kubectl *", "Always")
	expect(t, p, "NotAlways", "kubectl exec web-0 -- touch /tmp/p", "kubectl cp web-0:/a /tmp/p",
		"kubectl port-forward svc/web 8080:80", "kubectl proxy", "kubectl debug node/n1 --image=busybox",
		"kubectl attach web-0", "kubectl run x --image=busybox", "kubectl plugin list", "kubectl foo",
		"kubectl config set-credentials u --exec-command=touch", `kubectl get pods "$FLAG"`)
	expect(t, p, "Always", "kubectl get pods -A", "kubectl config view", `kubectl get pods -n "$NS"`)
}

func TestFinding_GitConfigFlagIsNotAlways(t *testing.T) {
	p := rules("git *", "Always", "rm *", "Never")
	expect(t, p, "NotAlways", "git -c core.pager='touch /tmp/p' log", "git -c alias.x='!touch /tmp/p' x",
		"git --config-env=core.pager=X log", "git --exec-path=/tmp log")
	expect(t, p, "Never", "git -c alias.x='!rm -rf /tmp/x' x", "git submodule foreach 'rm -rf x'")
}

func TestFinding_GitLogOutputIsNotAlways(t *testing.T) {
	p := rules("git log *", "Always", "git diff *", "Always", "git grep *", "Always")
	expect(t, p, "NotAlways", "git log --output=/tmp/p", "git log --output /tmp/p", "git diff --output=/tmp/p",
		"git diff --ext-diff", "git log -p --textconv", "git grep -O'touch /tmp/p' x", `git log ${X:---output=/tmp/p}`)
	expect(t, p, "Always", "git log --oneline -n 5", "git grep -o foo")
}

func TestFinding_UniqOutputOperandIsNotAlways(t *testing.T) {
	p := rules("uniq *", "Always")
	expect(t, p, "NotAlways", "uniq in.txt out.txt", "uniq -c - /tmp/p", "uniq $FILES")
	expect(t, p, "Always", "uniq in.txt", "uniq -c -f 1 in.txt")
}

func TestFinding_XxdRevertIsNotAlways(t *testing.T) {
	p := rules("xxd *", "Always")
	expect(t, p, "NotAlways", "xxd -r in.hex", "xxd -revert in.hex", "xxd -r -p in.hex /tmp/p", "xxd in /tmp/p")
	expect(t, p, "Always", "xxd -l 16 /etc/hostname")
}

func TestFinding_TarCommandFlagsAreNotAlways(t *testing.T) {
	p := rules("tar *", "Always")
	expect(t, p, "NotAlways", "tar -I 'touch /tmp/p' -tf x.tar", "tar -tf x.tar --to-command='touch /tmp/p'",
		"tar --checkpoint=1 --checkpoint-action=exec='touch /tmp/p' -tf x.tar", "tar -xf x.tar", "tar xf x.tar",
		"tar tIf 'touch /tmp/p' x.tar", "tar -tf host:/x.tar")
	expect(t, p, "Always", "tar -tf x.tar", "tar tzvf x.tgz", "tar --list --file=x.tar")
}

func TestFinding_FileCompileIsNotAlways(t *testing.T) {
	p := rules("file *", "Always")
	expect(t, p, "NotAlways", "file -C -m /tmp/p", "file --compile -m /tmp/p")
	expect(t, p, "Always", "file -b /etc/hostname")
}

func TestFinding_UnknownWrappersCarryNoCommandPastItsRules(t *testing.T) {
	p := policy.Policy{Default: policy.Always, Rules: []policy.Rule{{Pattern: "rm *", Action: policy.Never}}}
	expect(t, p, "Never", "setarch x86_64 rm -rf /tmp/x", "linux64 rm -rf /tmp/x",
		"/lib64/ld-linux-x86-64.so.2 /bin/rm -rf /tmp/x", "ld.so --library-path /lib /bin/rm x",
		"toybox rm -rf /tmp/x", "hush -c 'rm -rf /tmp/x'", "perf stat -e cycles rm -rf /tmp/x")
	expect(t, p, "NotAlways", "make -f /dev/stdin", "make", "perf trace touch /tmp/p")
}

func TestFinding_QuotesInDoubleQuotedExpansionAreNotAlways(t *testing.T) {
	// bash reads the single quotes in "${x:-'...'}" as quotes, dash and
	// ash as characters: to them the string ends early and touch runs.
	expect(t, rules("echo *", "Always"), "NotAlways", `echo "${x:-'}" ; touch /tmp/p ; #'}"`)
}

func TestFinding_CommentEndingInBackslashHidesNoCommand(t *testing.T) {
	// The parser continued a comment that ends in a backslash onto the
	// next line; shells end it at the newline and run that line.
	p := policy.Policy{Default: policy.Always, Rules: []policy.Rule{{Pattern: "rm *", Action: policy.Never}}}
	expect(t, p, "Never", "echo a #x\\\nrm -rf /tmp/x", "ls # \\\nrm -rf /tmp/x")
	expect(t, p, "NotAlways", "echo #\\\ntouch /tmp/p")
}
