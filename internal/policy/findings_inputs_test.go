package policy_test

import (
	"strings"
	"testing"

	"github.com/kubeskills/kubeskills/internal/policy"
)

// Findings of the review "judge every program that starts in the
// sandbox": what a command acts on that its words do not show (kubectl's
// files, redirection sources) and configuration that names programs.

// secretList is a here-document naming a Secret, as kubectl -f - reads it.
const secretList = "\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Secret\n  metadata:\n    name: db\nEOF"

func TestFinding_KubectlFileStdinIsNotAlways(t *testing.T) {
	// No word says "secret", so kubectl get ** *secret* ** never applied.
	expect(t, chartDefault(t), "NotAlways",
		"kubectl get -o yaml -f - <<EOF"+secretList,
		"kubectl get -o yaml --filename=/dev/stdin <<EOF"+secretList,
		"kubectl get -o yaml --filename /dev/stdin <<EOF"+secretList,
		"kubectl get -o yaml -f=/dev/stdin <<EOF"+secretList,
		"kubectl get -o yaml -f/dev/stdin <<EOF"+secretList,
		"kubectl get -o yaml -f list.yaml",
		"kubectl get -o yaml -f https://example.com/list.yaml",
		"kubectl get -o yaml -R -f dir",
		"kubectl get -o yaml -Rf dir",
		"kubectl get -o yaml --recursive -f dir",
		"kubectl get -o yaml -k dir",
		"kubectl describe -f - <<EOF"+secretList,
		"kubectl -f - get -o yaml <<EOF"+secretList)
	// kubectl logs -f follows: it names no objects.
	expect(t, chartDefault(t), "Always", "kubectl logs -f web-0", "kubectl logs web-0 -f --tail=5", "kubectl get pods --recursive=false")
}

func TestFinding_KubectlReplaceForceIsDelete(t *testing.T) {
	p := rules("kubectl *", "Always", "kubectl ** delete **", "Never")
	expect(t, p, "Never",
		"kubectl replace --force -f - <<EOF"+secretList,
		"kubectl replace --force=true -f x.yaml",
		"kubectl apply --prune -l app=web -f dir",
		"kubectl apply --force -f x.yaml",
		"kubectl drain worker-1",
		"kubectl -n x replace -f x.yaml --force")
	expect(t, rules("kubectl replace *", "Always", "kubectl delete *", "Never"), "Never", "kubectl replace --force -f x.yaml")
	expect(t, rules("kubectl replace ** -f *", "Always", "kubectl ** delete **", "Never"), "Always", "kubectl replace --force=false -f x.yaml")
}

func TestKubectlNamedForms(t *testing.T) {
	tests := []struct {
		rule    string
		command string
		want    policy.Action
	}{
		// a rule that names -f allows it
		{"kubectl get -f *", "kubectl get -f -", policy.Always},
		{"kubectl get -f *", "kubectl get -f x.yaml -o yaml", policy.Always},
		{"kubectl get ** -f *", "kubectl get -o yaml -f x.yaml", policy.Always},
		{"kubectl apply -f manifests/*", "kubectl apply -f manifests/web.yaml", policy.Always},
		{"kubectl apply --filename=manifests/*", "kubectl apply --filename=manifests/web.yaml", policy.Always},
		{"kubectl apply -fmanifests/*", "kubectl apply -fmanifests/web.yaml", policy.Always},
		{"kubectl get --filename *", "kubectl get --filename x.yaml", policy.Always},
		// one that does not name it does not
		{"kubectl get *", "kubectl get -f -", policy.Ask},
		{"kubectl get -* *", "kubectl get -f -", policy.Ask},
		{"kubectl *", "kubectl apply -f x.yaml", policy.Ask},
		{"kubectl get -f *", "kubectl get -R -f dir", policy.Ask},
		{"kubectl get -f x.yaml", "kubectl get -f x.yaml", policy.Always},
		// a Never rule still applies
		{"kubectl get -f *", "kubectl get -f - -k x", policy.Ask},
	}
	for _, tt := range tests {
		m, err := policy.Compile(rules(tt.rule, "Always"))
		if err != nil {
			t.Fatal(err)
		}
		if d := m.Decide(tt.command); d.Action != tt.want {
			t.Errorf("rule %q: Decide(%q) = %s, want %s: %s", tt.rule, tt.command, d.Action, tt.want, d.Reason)
		}
	}
}

func TestKubectlImpliedVerbs(t *testing.T) {
	p := rules("kubectl *", "Always", "kubectl delete *", "Never", "kubectl edit *", "Never")
	tests := []struct {
		command string
		want    policy.Action
		reason  string
	}{
		{"kubectl replace --force -f x.yaml", policy.Never, "as kubectl delete, which this form of kubectl replace does too"},
		{"kubectl apply --prune --all -f dir", policy.Never, "kubectl delete"},
		{"kubectl apply --force -f x.yaml", policy.Never, "kubectl delete"},
		{"kubectl drain worker-1 --ignore-daemonsets", policy.Never, "kubectl delete"},
		{"kubectl create --edit -f x.yaml", policy.Never, "kubectl edit"},
		{"kubectl apply edit-last-applied deploy/web", policy.Never, "kubectl edit"},
		{"kubectl replace -f x.yaml", policy.Ask, "-f"},
		{"kubectl apply --force=false -f x.yaml", policy.Ask, "-f"},
		{"kubectl apply view-last-applied deploy/web", policy.Always, ""},
		{"kubectl scale deploy/web --replicas=2", policy.Always, ""},
	}
	m, err := policy.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		d := m.Decide(tt.command)
		if d.Action != tt.want || !strings.Contains(d.Reason, tt.reason) {
			t.Errorf("Decide(%q) = %s (%s), want %s with %q", tt.command, d.Action, d.Reason, tt.want, tt.reason)
		}
	}
	// without a Never rule for the verb, create --edit still asks: it runs an editor
	expect(t, rules("kubectl *", "Always"), "Ask", "kubectl create --edit -f x.yaml", "kubectl apply edit-last-applied deploy/web")
}

func TestFinding_RedirectionSourceIsJudged(t *testing.T) {
	p := rules("cat *", "Always", "cat ** *secret* **", "Never", "head *", "Always", "head ** *secret* **", "Never",
		"sort *", "Always", "sort ** *secret* **", "Never", "jq *", "Always", "jq ** *secret* **", "Never",
		"wc *", "Always")
	expect(t, p, "Never",
		"cat < secret.txt", "head < secret.txt", "sort < secret.txt", "jq . < secret.txt",
		"cat 0< secret.txt", "cat 3< secret.txt", "cat <> secret.txt", "cat < x 3< secret.txt",
		"{ cat; } < secret.txt", "while read -r l; do cat; done < secret.txt", "cat < $f",
		"cat <secret.txt | wc -l")
	expect(t, p, "Always", "cat < notes.txt", "wc -l < secret.txt", "cat <<EOF\nsecret\nEOF")
	// a source that is not literal is never Always
	expect(t, rules("cat *", "Always"), "Ask", "cat < $f", `cat < "$f"`, "cat < *.txt")
	// the default action applies to the words with the file too
	expect(t, rules("wc -l", "Always"), "Ask", "wc -l < notes.txt")
}

func TestFinding_ConfigurationThatNamesProgramsIsNotAlways(t *testing.T) {
	p := rules("less *", "Always", "man *", "Always", "git *", "Always", "kubectl *", "Always", "env *", "Always")
	expect(t, p, "Ask",
		"LESSOPEN='|touch /tmp/p %s' less x", "PAGER=touch man ls", "MANPAGER=touch man ls", "LESSKEYIN=/tmp/k less x",
		"LESSKEY_CONTENT='#env LESSOPEN=|touch' less x", "LESS=--lesskey-src=/tmp/k less x",
		"GIT_EXTERNAL_DIFF=touch git diff", "GIT_PAGER=touch git log", "EDITOR=touch kubectl edit x",
		"KUBE_EDITOR=touch kubectl edit x", "KUBECTL_EXTERNAL_DIFF=touch kubectl diff -f x",
		"KUBECONFIG=/tmp/k kubectl get pods", "LD_PRELOAD=/tmp/x.so less x", "BASH_ENV=/tmp/x less x",
		"ENV=/tmp/x less x", "XDG_CONFIG_HOME=/tmp less x", "HOME=/tmp git log", "VISUAL=touch less x",
		"env PAGER=touch man ls", "env -i GIT_PAGER=touch git log", "export PAGER=touch",
		"less --lesskey-file=/tmp/k x", "less --lesskey-src /tmp/k x", "less --lesskey-content='#env' x",
		"less --lesskey-s=/tmp/k x", "less --lessk=/tmp/k x", "less -k /tmp/k x", "less -k/tmp/k x", "less -o /tmp/log x",
		"less '+!touch /tmp/p' x",
		"man -C /tmp/man.conf ls", "man --config-file=/tmp/man.conf ls", "man --config=/tmp/c ls", "man -P touch ls",
		"man --pager=touch ls", "man -Htouch ls", "man --html=touch ls", "man -X ls")
	expect(t, p, "Always", "less x", "less -N -S x", "man ls", "man 5 crontab", "man -k printf", "LANG=C less x")
	m, err := policy.Compile(p)
	if err != nil {
		t.Fatal(err)
	}
	for cmd, want := range map[string]string{
		"PAGER=touch man ls":        "environment assignment PAGER=... names a program or a configuration that man may load and run",
		"env PAGER=touch man ls":    "environment assignment PAGER=... names a program or a configuration that the command env runs may load and run",
		"export GIT_PAGER=touch":    "environment assignment GIT_PAGER=... names a program or a configuration that every later command may load and run",
		"less --lesskey-src=/tmp/k": "less --lesskey-src=/tmp/k loads key bindings that can name programs",
		"man -C /tmp/man.conf ls":   "man -C names a configuration, a pager or a browser that man runs",
	} {
		if d := m.Decide(cmd); !strings.Contains(d.Reason, want) {
			t.Errorf("Decide(%q).Reason = %q, want it to say %q", cmd, d.Reason, want)
		}
	}
}
