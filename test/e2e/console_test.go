//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/agent/modeltest"
)

// hostileOutput is a command whose output is markup and terminal escapes:
// the console must show it as text, and run none of it.
const hostileOutput = `printf '<img src=x onerror=alert(1)><script>alert(2)</script>\033[31mred\033]0;title\007\n'`

// hostileSkill is a SKILL.md body that tries every way to run a script.
const hostileSkill = "# Hostile\n\n<script>alert('skill')</script>\n\n[click me](javascript:alert(3))\n\n" +
	"<img src=x onerror=\"alert(4)\">\n\n<a href=\"javascript:alert(5)\">raw link</a>\n\nPlain **text** stays.\n"

// browserTab is one person's tab: the console they started, and what the
// browser reported that no page of ours should cause.
type browserTab struct {
	ctx  context.Context
	url  string
	mu   sync.Mutex
	bad  []string
	name string
}

// problems returns the dialogs, exceptions and console errors seen.
func (b *browserTab) problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.bad...)
}

// consoleInABrowser drives `kubectl skills ui` in headless Chromium for
// two approvers of a 2-of-2 policy and a bystander: the inbox shows the
// run within 2 s of its creation; the first approval is 1 of 2; the
// bystander's page shows the API server's refusal; the second approver,
// by keyboard alone, approves, and the run's page shows its output, as
// text, and its timeline; the first approver chats with the agent. A
// hostile SKILL.md, the hostile output and a hostile model answer run no
// script: no dialog opens and the browser reports no error on any page.
// Screenshots of each page are written to bin/ui/.
func consoleInABrowser(t *testing.T, s *state) {
	g := NewWithT(t)
	first, second, bystander := "e2e-console-1", "e2e-console-2", "e2e-console-bystander"
	configs := bindApprovers(t, "e2e-console", []string{first, second, bystander})
	requireApprovals(t, 2, serviceAccountUser(first), serviceAccountUser(second))
	// The first approver also reads the skills, as a viewer.
	createForTest(t, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-console-viewer", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "kubeskills-viewer"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: first, Namespace: ns}},
	})
	createForTest(t, &skillsv1.Skill{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hostile-markup"},
		Spec:       skillsv1.SkillSpec{Description: "A skill whose body tries to run scripts in the console", Instructions: hostileSkill},
	})
	shots := filepath.Join(c.root, "bin", "ui")
	g.Expect(os.MkdirAll(shots, 0o755)).To(Succeed())

	browser := startBrowser(t)
	tabA, tabB, tabX := openConsole(t, browser, first, configs[first]), openConsole(t, browser, second, configs[second]),
		openConsole(t, browser, bystander, configs[bystander])

	// The inbox shows the run within 2 s of its creation.
	tabA.do(t, chromedp.Navigate(tabA.url+"/"), chromedp.WaitVisible(chromedp.ID("inbox")))
	var before skillsv1.CommandRunList
	g.Expect(c.client.List(context.Background(), &before, client.InNamespace(ns))).To(Succeed())
	pending := runAsync(s, hostileOutput)
	var run skillsv1.CommandRun
	g.Eventually(func(g Gomega) {
		run = latestRun(g, hostileOutput)
		for _, r := range before.Items {
			g.Expect(r.Name).NotTo(Equal(run.Name), "the run is not filed yet")
		}
	}).WithTimeout(time.Minute).WithPolling(20 * time.Millisecond).Should(Succeed())
	created := time.Now()
	article := fmt.Sprintf(`article[aria-labelledby="h-%s-%s"]`, ns, run.Name)
	within, cancel := context.WithTimeout(tabA.ctx, 2*time.Second)
	err := chromedp.Do(within, chromedp.WaitVisible(chromedp.CSS(article)))
	cancel()
	g.Expect(err).NotTo(HaveOccurred(), "the inbox did not show run %s within 2 s of its creation", run.Name)
	t.Logf("the inbox showed run %s %v after it was seen created", run.Name, time.Since(created).Round(time.Millisecond))
	tabA.checkPage(t)
	tabA.screenshot(t, filepath.Join(shots, "inbox.png"))

	reason := chromedp.ID(fmt.Sprintf("reason-%s-%s", ns, run.Name))
	approve := chromedp.CSS(article + ` button[value="approve"]`)
	problem, notice := chromedp.ID("problem"), chromedp.ID("notice")

	// The bystander holds the approver role but is not named: the API
	// server refuses, and the page says so in one line.
	tabX.do(t, chromedp.Navigate(tabX.url+"/"), chromedp.WaitVisible(approve),
		chromedp.SendKeys(reason, "not mine to approve"), chromedp.Click(approve), chromedp.WaitVisible(problem))
	refusal := read(t, tabX, chromedp.Text(problem))
	g.Expect(refusal).To(ContainSubstring("refused by admission: " + serviceAccountUser(bystander) + " is not an approver of this command"))
	g.Expect(refusal).NotTo(ContainSubstring("\n"))
	tabX.checkPage(t)
	tabX.screenshot(t, filepath.Join(shots, "refusal.png"))

	// The first approver: 1 of 2.
	tabA.do(t, chromedp.SendKeys(reason, "first of two"), chromedp.Click(approve), chromedp.WaitVisible(notice))
	g.Expect(read(t, tabA, chromedp.Text(notice))).To(Equal("Your approval was recorded (1 of 2 approvals)."))
	tabA.checkPage(t)

	// The second, by keyboard alone: type the reason, Tab to Approve, Enter.
	tabB.do(t, chromedp.Navigate(tabB.url+"/"), chromedp.WaitVisible(approve), chromedp.Focus(reason),
		chromedp.KeyEvent("second of two"), chromedp.KeyEvent("\t"), chromedp.KeyEvent("\r"), chromedp.WaitVisible(notice))
	g.Expect(read(t, tabB, chromedp.Text(notice))).To(Equal("Your approval was recorded (2 of 2 approvals)."))
	res := <-pending
	g.Expect(res.Phase).To(Equal(string(skillsv1.PhaseSucceeded)), res.Message)

	// The run's page follows the run to its end, and shows the output as
	// text and the timeline.
	tabB.do(t, chromedp.WaitVisible(chromedp.ID("exit-code")))
	stdout := read(t, tabB, chromedp.TextContent(chromedp.ID("stdout")))
	scripts := read(t, tabB, chromedp.Evaluate[string](`String(document.scripts.length) + " " + document.scripts[0].src`))
	marks := read(t, tabB, chromedp.Evaluate[string](`String(document.querySelectorAll("svg.timeline .mark").length)`))
	g.Expect(stdout).To(Equal("<img src=x onerror=alert(1)><script>alert(2)</script>red\n"))
	g.Expect(scripts).To(MatchRegexp(`^1 http://127\.0\.0\.1:\d+/static/ui\.js$`), "the page runs a script that is not its own")
	g.Expect(marks).To(Equal("7"), "the timeline: filed, judged, approved, sandbox made, started, ended, recorded (pod scheduled too when the pod is read)")
	tabB.checkPage(t)
	tabB.screenshot(t, filepath.Join(shots, "run.png"))

	// The chat panel, as the first approver, who may also port-forward to
	// the agent here: the model's answer is markup and escapes, shown as
	// text.
	createForTest(t, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-console-chat", Namespace: ns},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "secrets"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
			{APIGroups: []string{""}, Resources: []string{"pods/portforward"}, Verbs: []string{"get", "create"}},
		},
	})
	createForTest(t, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-console-chat", Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "e2e-console-chat"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: first, Namespace: ns}},
	})
	s.model.script(t, modeltest.Reply("<script>alert(7)</script>Six times seven is \x1b[1m42\x1b[0m."))
	g.Eventually(func() string {
		tabA.do(t, chromedp.Navigate(tabA.url+"/agents/"+ns+"/"+agentName), chromedp.WaitVisible(chromedp.ID("message")),
			chromedp.SendKeys(chromedp.ID("message"), "What is six times seven?"), chromedp.Click(chromedp.CSS(`#chat button[type="submit"]`)),
			chromedp.WaitVisible(chromedp.CSS("#transcript, #problem")))
		return read(t, tabA, chromedp.Evaluate[string](`document.getElementById("transcript") ? "" : document.body.innerText`))
	}).WithTimeout(time.Minute).WithPolling(2*time.Second).Should(BeEmpty(), "the chat")
	g.Expect(read(t, tabA, chromedp.TextContent(chromedp.ID("transcript")))).To(
		Equal("YouWhat is six times seven?" + agentName + "<script>alert(7)</script>Six times seven is 42."))
	tabA.checkPage(t)
	tabA.screenshot(t, filepath.Join(shots, "agent.png"))

	// The hostile skill renders, and runs nothing. (The viewer's binding
	// may take a moment to reach the API server's authorizer.)
	g.Eventually(func() string {
		tabA.do(t, chromedp.Navigate(tabA.url+"/skills/"+ns+"/hostile-markup"), chromedp.WaitVisible(chromedp.ID("main")))
		return read(t, tabA, chromedp.Evaluate[string](`document.getElementById("skill-body") ? "" : document.body.innerText`))
	}).WithTimeout(30*time.Second).WithPolling(time.Second).Should(BeEmpty(), "the skill's page")
	skillHTML := read(t, tabA, chromedp.InnerHTML(chromedp.ID("skill-body")))
	g.Expect(skillHTML).To(ContainSubstring("<strong>text</strong>"))
	g.Expect(strings.ToLower(skillHTML)).NotTo(Or(ContainSubstring("<script"), ContainSubstring("onerror"), ContainSubstring("javascript:")))
	tabA.checkPage(t)
	tabA.screenshot(t, filepath.Join(shots, "skill.png"))

	for _, tab := range []*browserTab{tabA, tabB, tabX} {
		g.Expect(tab.problems()).To(BeEmpty(), "the browser of %s reported problems", tab.name)
	}
}

// startBrowser starts headless Chromium until the test ends.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("the console's test needs Chromium (apt-get install chromium, or make test-tools): %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1280, 1000))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	browser, cancel := chromedp.NewContext(alloc)
	if err := chromedp.Do(browser); err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("Chromium did not start: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	return browser
}

// openConsole starts `kubectl skills ui` as the user of kubeconfig until
// the test ends, and opens the URL it prints in a tab of its own, which
// reports any dialog, exception or console error.
func openConsole(t *testing.T, browser context.Context, name, kubeconfig string) *browserTab {
	t.Helper()
	cmd := exec.Command(filepath.Join(c.pluginDir, "kubectl-skills"), "ui", "--no-browser", "-n", ns, "--kubeconfig", kubeconfig)
	cmd.Dir = c.root
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	printed := make(chan string, 1)
	go func() {
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			if m := regexp.MustCompile(`http://127\.0\.0\.1:\d+/\?token=\S+`).FindString(lines.Text()); m != "" {
				printed <- m
			}
		}
	}()
	var url string
	select {
	case url = <-printed:
	case <-time.After(30 * time.Second):
		t.Fatalf("the console of %s printed no URL: %s", name, stderr.String())
	}
	ctx, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	tab := &browserTab{ctx: ctx, name: name, url: strings.TrimSuffix(url[:strings.Index(url, "/?token=")], "/")}
	// Open the tab first, so that the listener sees every page.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatal(err)
	}
	dialogs := make(chan struct{}, 16)
	err = chromedp.Listen(ctx, func(ev any) {
		var bad string
		switch ev := ev.(type) {
		case *page.EventJavascriptDialogOpening:
			bad = "a dialog opened: " + ev.Message
			select {
			case dialogs <- struct{}{}:
			default:
			}
		case *cdpruntime.EventExceptionThrown:
			bad = "an exception: " + ev.ExceptionDetails.Text
		case *cdpruntime.EventConsoleAPICalled:
			if ev.Type == cdpruntime.ConsoleAPICalledTypeError || ev.Type == cdpruntime.ConsoleAPICalledTypeWarning {
				bad = "console " + string(ev.Type)
			}
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.EntryLevelError || ev.Entry.Level == cdplog.EntryLevelWarning {
				bad = fmt.Sprintf("%s: %s (%s)", ev.Entry.Level, ev.Entry.Text, ev.Entry.URL)
			}
		}
		if bad != "" {
			tab.mu.Lock()
			tab.bad = append(tab.bad, bad)
			tab.mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	// A dialog would block the page: close each, once it is recorded.
	go func() {
		for {
			select {
			case <-dialogs:
				_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{})
			case <-ctx.Done():
				return
			}
		}
	}()
	tab.do(t, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.ID("main")))
	return tab
}

// do runs browser actions in the tab, failing the test on an error.
func (b *browserTab) do(t *testing.T, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.fail(t, err)
	}
}

// fail fails the test with an error of the tab's browser, and where it was.
func (b *browserTab) fail(t *testing.T, err error) {
	t.Helper()
	where, _ := chromedp.Run(b.ctx, chromedp.Location())
	text, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	t.Fatalf("in the browser of %s, at %s: %v (reported: %v); the page says:\n%s", b.name, where, err, b.problems(), text)
}

// read runs a browser action that reads a value in the tab.
func read[T any](t *testing.T, b *browserTab, action chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, action)
	if err != nil {
		b.fail(t, err)
	}
	return v
}

// checkPage checks the page the tab shows: it holds no script but the
// console's own, and every control has a label a screen reader reads.
func (b *browserTab) checkPage(t *testing.T) {
	t.Helper()
	unlabelled := read(t, b, chromedp.Evaluate[string](`[...document.querySelectorAll("input:not([type=hidden]), select, textarea, button")]
		.filter(e => (e.labels ? e.labels.length === 0 : true) && !e.getAttribute("aria-label") && !(e.tagName === "BUTTON" && e.textContent.trim()))
		.map(e => e.outerHTML).join(" ")`))
	scripts := read(t, b, chromedp.Evaluate[string](`[...document.querySelectorAll("script, iframe, object, embed, [onerror], [onload], [onclick], a[href^='javascript:']")]
		.filter(e => !(e.tagName === "SCRIPT" && e.getAttribute("src") === "/static/ui.js")).map(e => e.outerHTML).join(" ")`))
	if unlabelled != "" {
		t.Errorf("controls without a label: %s", unlabelled)
	}
	if scripts != "" {
		t.Errorf("the page holds what could run a script: %s", scripts)
	}
}

// screenshot writes a PNG of the whole page.
func (b *browserTab) screenshot(t *testing.T, path string) {
	t.Helper()
	png := read(t, b, chromedp.FullScreenshot(100))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}
