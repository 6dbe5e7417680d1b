package agent_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/kubeskills/kubeskills/internal/agent"
	"github.com/kubeskills/kubeskills/internal/agent/modeltest"
	"github.com/kubeskills/kubeskills/internal/catalog"
	"github.com/kubeskills/kubeskills/internal/skill"
)

// TestPromptListsSkillsWithoutBodies: the model starts with the Agent's
// instructions and the Auto skills' names and descriptions, never a body,
// never an Explicit or Disabled skill; the Agent's model settings are sent.
func TestPromptListsSkillsWithoutBodies(t *testing.T) {
	g := NewWithT(t)
	temp := 0.2
	f := newFixture(t, options{config: func(c *agent.Config) {
		c.Model.Temperature, c.Model.MaxTokens = &temp, 512
	}}, modeltest.Reply("Hello."))

	g.Expect(f.chat(t, "hi")).To(Equal("Hello."))
	reqs := f.model.Requests()
	g.Expect(reqs).To(HaveLen(1))
	system := reqs[0].System()
	g.Expect(system).To(HavePrefix("You are the ops agent of the shop team."))
	g.Expect(system).To(ContainSubstring("<available_skills>"))
	g.Expect(system).To(ContainSubstring("<name>crash-triage</name>"))
	g.Expect(system).To(ContainSubstring("Diagnose pods in CrashLoopBackOff."))
	g.Expect(reqs[0].Text()).NotTo(ContainSubstring("BODY-MARKER"), "no body before use_skill")
	g.Expect(system).NotTo(ContainSubstring("release-notes"), "Explicit skills are not listed")
	g.Expect(system).NotTo(ContainSubstring("wipe-cluster"), "Disabled skills are never offered")
	g.Expect(reqs[0].ToolNames()).To(ConsistOf("use_skill", "read_skill_file", "run_command", "command_status"))
	g.Expect(reqs[0].Model).To(Equal("test-model"))
	g.Expect(*reqs[0].Temperature).To(Equal(0.2))
	g.Expect(*reqs[0].MaxTokens).To(Equal(int64(512)))
	g.Expect(reqs[0].Authorization).To(BeEmpty(), "no API key file, no key")
}

// TestUseSkillLoadsItsBody: the body enters the conversation only through
// use_skill, with the list of bundled files.
func TestUseSkillLoadsItsBody(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, options{},
		modeltest.Tools(modeltest.Call("use_skill", map[string]string{"name": "crash-triage"})),
		modeltest.Reply("Read the previous logs."))

	g.Expect(f.chat(t, "web-0 keeps restarting")).To(Equal("Read the previous logs."))
	reqs := f.model.Requests()
	g.Expect(reqs).To(HaveLen(2))
	result := reqs[1].LastToolResult()
	g.Expect(result).To(ContainSubstring("BODY-MARKER-TRIAGE"))
	g.Expect(result).To(ContainSubstring("references/guide.md"))
	// The assistant's call precedes its result, as the API requires.
	msgs := reqs[1].Messages
	g.Expect(msgs[len(msgs)-2].Role).To(Equal("assistant"))
	g.Expect(msgs[len(msgs)-2].ToolCalls[0].Function.Name).To(Equal("use_skill"))
}

// TestReadSkillFileIsConfined: a bundled text file is read; paths out of
// the skill, other skills, binary and oversized files are refused.
func TestReadSkillFileIsConfined(t *testing.T) {
	g := NewWithT(t)
	read := func(id, name, path string) modeltest.ToolCall {
		c := modeltest.Call("read_skill_file", map[string]string{"name": name, "path": path})
		c.ID = id
		return c
	}
	f := newFixture(t, options{},
		modeltest.Tools(
			read("guide", "crash-triage", "references/guide.md"),
			read("dotdot", "crash-triage", "../release-notes/SKILL.md"),
			read("inner-dotdot", "crash-triage", "references/../../release-notes/template.md"),
			read("absolute", "crash-triage", "/etc/passwd"),
			read("missing", "crash-triage", "references/none.md"),
			read("huge", "crash-triage", "references/huge.txt"),
			read("binary", "crash-triage", "bin/tool"),
			read("explicit", "release-notes", "template.md"),
			read("disabled", "wipe-cluster", "SKILL.md"),
		),
		modeltest.Reply("done"))

	g.Expect(f.chat(t, "read")).To(Equal("done"))
	results := f.model.Requests()[1].ToolResults()
	g.Expect(results["guide"]).To(Equal(guideText))
	for _, id := range []string{"dotdot", "inner-dotdot", "absolute", "missing", "huge", "binary", "explicit", "disabled"} {
		g.Expect(toolResult(t, results[id])).To(HaveKey("error"), "read %s must be refused", id)
	}
	g.Expect(results["explicit"]).To(ContainSubstring("/release-notes"), "the model is told how the user can ask for it")
	g.Expect(results["huge"]).To(ContainSubstring("too large"))
	g.Expect(results["binary"]).To(ContainSubstring("binary"))
}

// TestSlashNameUsesExplicitSkill: `/name` loads an Explicit skill up front
// and opens its files; the model cannot load it on its own; a Disabled
// skill is never loaded.
func TestSlashNameUsesExplicitSkill(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, options{},
		modeltest.Tools(modeltest.Call("read_skill_file", map[string]string{"name": "release-notes", "path": "template.md"})),
		modeltest.Reply("Notes written."),
		modeltest.Tools(modeltest.Call("use_skill", map[string]string{"name": "release-notes"})),
		modeltest.Reply("I cannot."),
		modeltest.Reply("No."))

	g.Expect(f.chat(t, "/release-notes for v1.2")).To(Equal("Notes written."))
	reqs := f.model.Requests()
	g.Expect(reqs[0].Text()).To(ContainSubstring("BODY-MARKER-NOTES"), "the named skill's body comes up front")
	g.Expect(reqs[0].Messages[1].Text()).To(Equal("/release-notes for v1.2"))
	g.Expect(reqs[0].Messages[2].ToolCalls[0].Function.Name).To(Equal("use_skill"))
	g.Expect(reqs[1].LastToolResult()).To(Equal("## Changes\n"))

	g.Expect(f.chat(t, "write release notes")).To(Equal("I cannot."))
	reqs = f.model.Requests()
	g.Expect(reqs[3].LastToolResult()).To(ContainSubstring("only when the user names it"))
	g.Expect(reqs[3].Text()).NotTo(ContainSubstring("BODY-MARKER-NOTES"))

	g.Expect(f.chat(t, "/wipe-cluster now")).To(Equal("No."))
	g.Expect(f.model.Requests()[4].Text()).NotTo(ContainSubstring("BODY-MARKER-WIPE"))
}

// TestToolCallLimit: the loop stops at maxToolCalls with a clear answer and
// calls the model no more.
func TestToolCallLimit(t *testing.T) {
	g := NewWithT(t)
	use := modeltest.Tools(modeltest.Call("use_skill", map[string]string{"name": "crash-triage"}))
	f := newFixture(t, options{config: func(c *agent.Config) { c.MaxToolCalls = 2 }},
		use, use, modeltest.Step{Content: "Still looking.", ToolCalls: use.ToolCalls}, modeltest.Reply("never sent"))

	answer := f.chat(t, "loop")
	g.Expect(answer).To(HavePrefix("Still looking."))
	g.Expect(answer).To(ContainSubstring("limit of 2 tool calls"))
	g.Expect(f.model.Requests()).To(HaveLen(3))
	g.Expect(f.model.Remaining()).To(Equal(1))
}

// TestModelRetries: 429 and 500 are retried with backoff; a model that
// keeps failing gives 502 with a request id, and nothing of the prompt
// or of the endpoint's answer.
func TestModelRetries(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, options{},
		modeltest.Fail(http.StatusTooManyRequests), modeltest.Fail(http.StatusInternalServerError), modeltest.Reply("ok"),
		modeltest.Fail(http.StatusTooManyRequests), modeltest.Fail(http.StatusTooManyRequests), modeltest.Fail(http.StatusTooManyRequests))

	g.Expect(f.chat(t, "hi")).To(Equal("ok"))
	g.Expect(f.model.Requests()).To(HaveLen(3))

	code, body := f.do(t, http.MethodPost, "/v1/chat/completions", f.token,
		map[string]any{"messages": []map[string]string{{"role": "user", "content": "secret question"}}})
	g.Expect(code).To(Equal(http.StatusBadGateway))
	// All of it: neither the prompt nor the endpoint's answer (429 Too
	// Many Requests, rate_limit_exceeded) reaches the caller. A bare "429"
	// would also match the random request id now and then.
	g.Expect(string(body)).To(MatchRegexp(`^\{"error":\{"message":"the model could not answer \(request id req_[0-9a-f]+\)","type":"model_error"\}\}\n?$`))
	g.Expect(f.model.Requests()).To(HaveLen(6), "two retries after the first attempt")
}

// TestChatRequestsAreChecked: the runtime runs tools itself, so tool
// messages are refused, as are empty and non-text requests.
func TestChatRequestsAreChecked(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, options{})
	for name, body := range map[string]any{
		"no messages":  map[string]any{"messages": []any{}},
		"tool message": map[string]any{"messages": []map[string]string{{"role": "tool", "content": "x"}}},
		"image": map[string]any{"messages": []map[string]any{{"role": "user", "content": []map[string]any{
			{"type": "image_url", "image_url": map[string]string{"url": "http://x"}}}}}},
		"not json": "nope",
	} {
		code, data := f.do(t, http.MethodPost, "/v1/chat/completions", f.token, body)
		g.Expect(code).To(Equal(http.StatusBadRequest), name)
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		g.Expect(json.Unmarshal(data, &e)).To(Succeed())
		g.Expect(e.Error.Message).NotTo(BeEmpty(), name)
	}
	g.Expect(f.model.Requests()).To(BeEmpty())

	parts := map[string]any{"messages": []map[string]any{
		{"role": "system", "content": "Answer in French."},
		{"role": "user", "content": []map[string]string{{"type": "text", "text": "bon"}, {"type": "text", "text": "jour"}}},
	}}
	f.model.Add(modeltest.Reply("Bonjour."))
	code, _ := f.do(t, http.MethodPost, "/v1/chat/completions", f.token, parts)
	g.Expect(code).To(Equal(http.StatusOK))
	msgs := f.model.Requests()[0].Messages
	roles := make([]string, 0, len(msgs))
	for _, m := range msgs {
		roles = append(roles, m.Role)
	}
	g.Expect(roles).To(Equal([]string{"system", "system", "user"}))
	g.Expect(msgs[2].Text()).To(Equal("bonjour"))
	g.Expect(slices.ContainsFunc(msgs, func(m modeltest.Message) bool { return strings.Contains(m.Text(), "French") })).To(BeTrue())
}

// TestCatalogReloadsReachTheModel: a catalog change on disk reaches the
// next chat without a restart; a broken catalog keeps the last good one
// served and counts a failed reload.
func TestCatalogReloadsReachTheModel(t *testing.T) {
	g := NewWithT(t)
	base := t.TempDir()
	writeMount(t, base, "First instructions.", testSkills()[0])
	store, err := catalog.Open(filepath.Join(base, "catalog"), filepath.Join(base, "skills"), nil)
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go store.Watch(ctx, 20*time.Millisecond)
	f := newFixture(t, options{store: store}, modeltest.Reply("one"), modeltest.Reply("two"), modeltest.Reply("three"))
	f.chat(t, "hi")
	g.Expect(f.model.Requests()[0].System()).NotTo(ContainSubstring("kube-upgrade"))

	upgrade := &skill.Skill{Name: "kube-upgrade", Description: "Plan a Kubernetes minor upgrade.", Body: "# Upgrade\n"}
	writeMount(t, base, "Second instructions.", testSkills()[0], upgrade)
	g.Eventually(func() string { _, body := f.do(t, http.MethodGet, "/v1/skills", f.token, nil); return string(body) },
		timeout, interval).Should(ContainSubstring("kube-upgrade"))
	f.chat(t, "hi")
	system := f.model.Requests()[1].System()
	g.Expect(system).To(HavePrefix("Second instructions."))
	g.Expect(system).To(ContainSubstring("Plan a Kubernetes minor upgrade."))

	writeKeys(t, filepath.Join(base, "catalog", "0"), map[string][]byte{catalog.CatalogKey: []byte("{broken")})
	reader := metricsToken(t)
	g.Eventually(func() string { _, body := f.do(t, http.MethodGet, "/metrics", reader, nil); return string(body) },
		timeout, interval).Should(ContainSubstring(`kubeskills_agent_catalog_reloads_total{result="failed"} 1`))
	f.chat(t, "hi")
	g.Expect(f.model.Requests()[2].System()).To(ContainSubstring("Plan a Kubernetes minor upgrade."), "the last good catalog stays")
}

// TestAPIKeyFromFile: the model's API key comes from its file, read again
// when the Secret behind it changes, and never from the environment.
func TestAPIKeyFromFile(t *testing.T) {
	g := NewWithT(t)
	t.Setenv("OPENAI_API_KEY", "from-the-environment")
	keyFile := filepath.Join(t.TempDir(), "apiKey")
	g.Expect(os.WriteFile(keyFile, []byte("sk-one\n"), 0o600)).To(Succeed())
	f := newFixture(t, options{config: func(c *agent.Config) { c.Model.APIKeyFile = keyFile }},
		modeltest.Reply("one"), modeltest.Reply("two"))

	f.chat(t, "hi")
	g.Expect(os.WriteFile(keyFile, []byte("sk-two-rotated"), 0o600)).To(Succeed())
	f.chat(t, "hi")
	reqs := f.model.Requests()
	g.Expect(reqs[0].Authorization).To(Equal("Bearer sk-one"))
	g.Expect(reqs[1].Authorization).To(Equal("Bearer sk-two-rotated"))
}
