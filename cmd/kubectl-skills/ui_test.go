package main

import (
	"bufio"
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/cli"
	"github.com/kubeskills/kubeskills/internal/cli/clitest"
	"github.com/kubeskills/kubeskills/internal/runner"
)

// console is `kubectl skills ui` started as a person, and a browser-like
// client with its session.
type console struct {
	base string
	http *http.Client
}

// startConsole starts the console as p, without a browser, until the test
// ends, and opens its printed URL.
func startConsole(t *testing.T, p person) *console {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out clitest.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.ExecuteContext(ctx, []string{"ui", "--port", "0", "--no-browser", "--kubeconfig", p.kubeconfig},
			genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != cli.ExitOK {
			t.Errorf("the console of %s ended with %d: %s", p.name, code, out.String())
		}
	})
	var printed string
	eventually(t, "the console printed no URL", func() error {
		m := regexp.MustCompile(`http://127\.0\.0\.1:\d+/\?token=\S+`).FindString(out.String())
		if m == "" {
			return fmt.Errorf("printed %q", out.String())
		}
		printed = m
		return nil
	})
	if !strings.Contains(out.String(), "as "+p.name+",") {
		t.Errorf("the console says %q, want it to name %s", out.String(), p.name)
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &console{http: &http.Client{Jar: jar, Timeout: timeout}}
	u, _ := url.Parse(printed)
	c.base = "http://" + u.Host
	res, err := c.http.Get(printed)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Request.URL.RawQuery != "" {
		t.Fatalf("the printed URL answered %d at %s, want the inbox without the token", res.StatusCode, res.Request.URL)
	}
	return c
}

// get reads a page; it returns the status and the body.
func (c *console) get(t *testing.T, path string) (int, string) {
	t.Helper()
	res, err := c.http.Get(c.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

// decide submits the decision form of run on page as the page's own
// script-less form would: its hidden fields, the reason and the button.
func (c *console) decide(t *testing.T, page, ns, name, decision, reason string) (int, string) {
	t.Helper()
	return c.submit(t, page, "/runs/"+ns+"/"+name+"/decide", url.Values{"reason": {reason}, "decision": {decision}}, "csrf", "shown")
}

// submit posts the form of page whose action is action, with its hidden
// fields named hidden and values, from the console's origin.
func (c *console) submit(t *testing.T, page, action string, values url.Values, hidden ...string) (int, string) {
	t.Helper()
	i := strings.Index(page, `action="`+action+`"`)
	if i < 0 {
		t.Fatalf("the page has no form for %s:\n%s", action, page)
	}
	form := page[i:]
	form = form[:strings.Index(form, "</form>")]
	for _, name := range hidden {
		m := regexp.MustCompile(`name="` + name + `" value="([^"]*)"`).FindStringSubmatch(form)
		if m == nil {
			t.Fatalf("the form has no %s: %s", name, form)
		}
		values.Set(name, html.UnescapeString(m[1]))
	}
	req, err := http.NewRequest(http.MethodPost, c.base+action, strings.NewReader(values.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", c.base)
	res, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

// text is a page's text as a person reads it: without its tags, with
// entities decoded and runs of white space made one.
func text(page string) string {
	return strings.Join(strings.Fields(html.UnescapeString(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(page, " "))), " ")
}

// TestConsole drives `kubectl skills ui` for two approvers of a 2-of-2
// policy and a bystander, as their browsers would without script: the
// inbox shows the run and follows the cluster, each approval is the
// person's own request, the API server's refusal of the bystander is shown
// in one line, and the run's page shows the output, as text, and the
// timeline.
func TestConsole(t *testing.T) {
	const ns = "console"
	people := approvalSetup(t, ns)
	alice, bob, erin := people["alice"], people["bob"], people["erin"]
	bind(t, ns, "frank", "ClusterRole", "kubeskills-approver")
	frank := newPerson(t, "frank", ns)
	ctx := context.Background()
	policy := &skillsv1.CommandPolicy{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ops-policy"}, policy); err != nil {
		t.Fatal(err)
	}
	policy.Spec.Approval = &skillsv1.ApprovalRule{Users: []string{"alice", "erin"}, Required: 2}
	if err := env.Client.Update(ctx, policy); err != nil {
		t.Fatal(err)
	}
	waitAdmission(t, bob, ns)

	ac, ec, fc := startConsole(t, alice), startConsole(t, erin), startConsole(t, frank)
	if code, page := ac.get(t, "/"); code != http.StatusOK || !strings.Contains(text(page), "Nothing waits for a person.") {
		t.Fatalf("the empty inbox answered %d: %s", code, text(page))
	}

	// The inbox follows the cluster: its event stream tells the page when
	// a run is filed.
	res, err := ac.http.Get(ac.base + "/events")
	if err != nil || res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %v %v", res, err)
	}
	defer func() { _ = res.Body.Close() }()
	changed := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(res.Body)
		for s.Scan() {
			if s.Text() == "event: change" {
				changed <- s.Text()
				return
			}
		}
	}()
	// What the command prints is hostile: markup and terminal escapes.
	request(t, bob, ns, "restart", "kubectl rollout restart deploy/web")
	select {
	case <-changed:
	case <-time.After(timeout):
		t.Fatal("the event stream told nothing of the new run")
	}
	waitPhase(t, ns, "restart", skillsv1.PhaseAwaitingApproval)
	_, inbox := ac.get(t, "/")
	for _, want := range []string{"console/restart", "Command kubectl rollout restart deploy/web", "Decision Ask, by the default action of CommandPolicy ops-policy",
		"Requested by bob", "Approvers users alice, erin; 2 required", "So far 0 of 2 approvals", "Approve", "Deny"} {
		if !strings.Contains(text(inbox), want) {
			t.Errorf("alice's inbox does not show %q:\n%s", want, text(inbox))
		}
	}

	// The bystander may patch runs, but is not an approver: the API
	// server's refusal, in one line.
	_, franks := fc.get(t, "/")
	code, page := fc.decide(t, franks, ns, "restart", "approve", "looks fine")
	want := "failed to approve commandrun console/restart: refused by admission: frank is not an approver of this command: its policy allows the users alice, erin"
	if code != http.StatusOK || !strings.Contains(text(page), want) {
		t.Fatalf("frank's approval answered %d, want the run's page showing %q:\n%s", code, want, text(page))
	}
	// The URL of the page holds only a random key of the refusal: a link
	// cannot put words of its own on a console page.
	if _, made := fc.get(t, "/runs/"+ns+"/restart?problem=refused+by+admission"); strings.Contains(text(made), "refused") {
		t.Errorf("a made-up problem is shown:\n%s", text(made))
	}

	// Alice approves: 1 of 2.
	code, page = ac.decide(t, inbox, ns, "restart", "approve", "maintenance window")
	if code != http.StatusOK || !strings.Contains(text(page), "Your approval was recorded (1 of 2 approvals).") {
		t.Fatalf("alice's approval answered %d:\n%s", code, text(page))
	}
	if run := getRun(t, ns, "restart"); len(run.AllApprovals()) != 1 || run.AllApprovals()[0].Approver != "alice" ||
		run.AllApprovals()[0].Reason != "maintenance window" || run.Status.Phase != skillsv1.PhaseAwaitingApproval {
		t.Fatalf("after alice: approvals %+v, phase %s", run.AllApprovals(), run.Status.Phase)
	}
	// Her page now says she decided; a second approval is not offered.
	if _, page := ac.get(t, "/runs/"+ns+"/restart"); strings.Contains(page, "/decide") || !strings.Contains(text(page), "it was already approved by alice") {
		t.Errorf("alice's run page after her approval:\n%s", text(page))
	}

	// A denial ends a run at once; its notice counts no approvals.
	request(t, bob, ns, "drain", "kubectl drain node-1")
	waitPhase(t, ns, "drain", skillsv1.PhaseAwaitingApproval)
	_, page = ac.get(t, "/runs/"+ns+"/drain")
	if code, page := ac.decide(t, page, ns, "drain", "deny", "not during business hours"); code != http.StatusOK ||
		!strings.Contains(text(page), "Your denial was recorded.") {
		t.Fatalf("alice's denial answered %d:\n%s", code, text(page))
	}
	waitPhase(t, ns, "drain", skillsv1.PhaseDenied)

	// Erin approves: the run runs.
	_, erins := ec.get(t, "/")
	if code, page := ec.decide(t, erins, ns, "restart", "approve", "second pair of eyes"); code != http.StatusOK {
		t.Fatalf("erin's approval answered %d:\n%s", code, text(page))
	}
	run := waitPhase(t, ns, "restart", skillsv1.PhaseRunning)
	finishJob(t, ns, run.Status.JobName, &runner.Result{ExitCode: 0, Stdout: "<script>alert(1)</script>\x1b[31mrestarted\x1b[0m\n", StdoutBytes: 46, DurationMillis: 1200})
	waitPhase(t, ns, "restart", skillsv1.PhaseSucceeded)

	_, page = ec.get(t, "/runs/"+ns+"/restart")
	for _, want := range []string{"Phase Succeeded", "Exit code 0", "alice Approved maintenance window", "erin Approved second pair of eyes",
		"filed", "judged", "approved", "sandbox made", "recorded"} {
		if !strings.Contains(text(page), want) {
			t.Errorf("the run's page does not show %q:\n%s", want, text(page))
		}
	}
	if !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;restarted\n</pre>") || strings.Contains(page, "<script>alert") ||
		strings.Contains(page, "\x1b") {
		t.Errorf("the output is not shown as plain text without escapes:\n%s", page)
	}
	if !strings.Contains(page, `<svg class="timeline"`) {
		t.Errorf("the run's page draws no timeline:\n%s", page)
	}
	if _, inbox := ac.get(t, "/"); !strings.Contains(text(inbox), "Nothing waits for a person.") {
		t.Errorf("the inbox still lists a run after it ran:\n%s", text(inbox))
	}

	// An approver may not read Skills; the page says what grants it.
	code, page = ac.get(t, "/skills")
	if code != http.StatusForbidden || !strings.Contains(text(page), `User "alice" cannot list resource "skills"`) ||
		!strings.Contains(text(page), "the ClusterRole kubeskills-viewer") {
		t.Errorf("the skills page of an approver who may not read them answered %d:\n%s", code, text(page))
	}
	bind(t, ns, "alice", "ClusterRole", "kubeskills-viewer")

	// A hostile SKILL.md renders as Markdown, and nothing of it can run.
	hostile := &skillsv1.Skill{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hostile"},
		Spec: skillsv1.SkillSpec{Description: "A skill whose body tries to run scripts",
			Instructions: "# Hi\n\n<script>alert(2)</script>\n\n[x](javascript:alert(3))\n\n<img src=x onerror=alert(4)>\n\n**bold**\n"},
	}
	if err := env.Client.Create(ctx, hostile); err != nil {
		t.Fatal(err)
	}
	eventually(t, "alice cannot read the hostile skill once she may", func() error {
		if code, page = ac.get(t, "/skills/"+ns+"/hostile"); code != http.StatusOK {
			return fmt.Errorf("answered %d: %s", code, text(page))
		}
		return nil
	})
	body, _, _ := strings.Cut(page[max(strings.Index(page, `<article class="markdown"`), 0):], "</article>")
	if code != http.StatusOK || !strings.Contains(body, "<strong>bold</strong>") || strings.Contains(strings.ToLower(page), "<script>alert") ||
		strings.Contains(body, "javascript:") || strings.Contains(body, "onerror") {
		t.Errorf("the hostile skill's page answered %d:\n%s", code, page)
	}

	// The policy's try box judges a command with the operator's judge.
	code, page = ac.get(t, "/policies/"+ns+"/ops-policy?command="+url.QueryEscape("kubectl get pods; rm -rf /"))
	if code != http.StatusOK || !strings.Contains(text(page), "Action Never Rule rules[1] \"rm *\"") {
		t.Errorf("the policy's page answered %d:\n%s", code, text(page))
	}

	// The runs, filtered by phase and by agent; the skills, with their
	// Ready state.
	for query, want := range map[string]string{
		"?phase=Succeeded&since=1h": "console/restart ops kubectl rollout restart deploy/web Succeeded Ask",
		"?phase=Denied":             "console/drain ops kubectl drain node-1 Denied Ask",
		"?phase=Expired":            "No runs.",
		"?agent=someone-else":       "No runs.",
	} {
		if code, page := ac.get(t, "/runs"+query); code != http.StatusOK || !strings.Contains(text(page), want) {
			t.Errorf("runs%s answered %d, want it to show %q:\n%s", query, code, want, text(page))
		}
	}
	if code, page := ac.get(t, "/skills"); code != http.StatusOK || !regexp.MustCompile(`console/hostile (True|False|Unknown)`).MatchString(text(page)) {
		t.Errorf("the skills page answered %d:\n%s", code, text(page))
	}

	// A chat with an agent that has no pod to reach says why, in one line.
	_, page = ac.get(t, "/agents/"+ns+"/ops")
	code, page = ac.submit(t, page, "/agents/"+ns+"/ops/chat", url.Values{"message": {"hello"}}, "csrf")
	if code != http.StatusOK || !strings.Contains(text(page), "the agent did not answer: ") {
		t.Errorf("a chat with an agent without pods answered %d:\n%s", code, text(page))
	}
}
