package agent_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/kubeskills/kubeskills/internal/agent"
	"github.com/kubeskills/kubeskills/internal/agent/modeltest"
)

// TestAuthRequiresTheToken: without the token, or with a wrong one, every
// /v1/ route answers 401 and nothing happens: no model call, no
// CommandRun. The token file is read again when it changes.
func TestAuthRequiresTheToken(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, options{},
		modeltest.Tools(modeltest.Call("run_command", map[string]string{"command": "echo hi"})), modeltest.Reply("done"))
	chat := map[string]any{"messages": []map[string]string{{"role": "user", "content": "run echo hi"}}}
	routes := []struct {
		method, path string
		body         any
	}{
		{http.MethodPost, "/v1/chat/completions", chat},
		{http.MethodPost, "/v1/commands", map[string]string{"command": "echo hi"}},
		{http.MethodGet, "/v1/skills", nil},
		{http.MethodGet, "/v1/skills/crash-triage", nil},
		{http.MethodGet, "/v1/models", nil},
		{http.MethodGet, "/v1/unknown", nil},
	}
	for _, token := range []string{"", "wrong-token", f.token + "x", strings.ToUpper(f.token)} {
		for _, r := range routes {
			code, body := f.do(t, r.method, r.path, token, r.body)
			g.Expect(code).To(Equal(http.StatusUnauthorized), "%s %s with token %q", r.method, r.path, token)
			g.Expect(string(body)).To(ContainSubstring("invalid_api_key"))
		}
	}
	g.Expect(f.model.Requests()).To(BeEmpty(), "no model call without the token")
	g.Expect(runs(g, f.ns)).To(BeEmpty(), "no CommandRun without the token")

	code, _ := f.do(t, http.MethodGet, "/v1/skills", f.token, nil)
	g.Expect(code).To(Equal(http.StatusOK))
	for _, path := range []string{"/healthz", "/readyz"} {
		code, _ := f.do(t, http.MethodGet, path, "", nil)
		g.Expect(code).To(Equal(http.StatusOK), path)
	}
	code, _ = f.do(t, http.MethodGet, "/metrics", "", nil)
	g.Expect(code).To(Equal(http.StatusUnauthorized), "/metrics needs a metrics reader's token")

	g.Expect(os.WriteFile(f.tokenFile, []byte("rotated-token"), 0o600)).To(Succeed())
	code, _ = f.do(t, http.MethodGet, "/v1/skills", f.token, nil)
	g.Expect(code).To(Equal(http.StatusUnauthorized), "the old token stops working")
	code, _ = f.do(t, http.MethodGet, "/v1/skills", "rotated-token", nil)
	g.Expect(code).To(Equal(http.StatusOK), "the new token works")
	g.Expect(os.Remove(f.tokenFile)).To(Succeed())
	code, _ = f.do(t, http.MethodGet, "/v1/skills", "rotated-token", nil)
	g.Expect(code).To(Equal(http.StatusUnauthorized), "no token file admits nobody")

	open := newFixture(t, options{config: func(c *agent.Config) { c.TokenFile, c.DisableAuth = "", true }})
	code, _ = open.do(t, http.MethodGet, "/v1/skills", "", nil)
	g.Expect(code).To(Equal(http.StatusOK), "auth can be disabled")
}

// TestStreamingAnswerIsSSE: stream=true answers with chat.completion.chunk
// events (the role, the final content, the finish reason, the usage) and
// data: [DONE]; the tool loop has run before the content comes.
func TestStreamingAnswerIsSSE(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, options{},
		modeltest.Tools(modeltest.Call("use_skill", map[string]string{"name": "crash-triage"})),
		modeltest.Reply("Check the previous logs."))
	body, _ := json.Marshal(map[string]any{
		"model": "ops", "stream": true, "stream_options": map[string]bool{"include_usage": true},
		"messages": []map[string]string{{"role": "user", "content": "web-0 restarts"}},
	})
	req, _ := http.NewRequest(http.MethodPost, f.api.URL+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+f.token)
	res, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer res.Body.Close()
	g.Expect(res.StatusCode).To(Equal(http.StatusOK))
	g.Expect(res.Header.Get("Content-Type")).To(HavePrefix("text/event-stream"))

	var events []string
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, data)
		}
	}
	g.Expect(events[len(events)-1]).To(Equal("[DONE]"))
	type chunk struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Choices []struct {
			Delta struct {
				Role    string  `json:"role"`
				Content *string `json:"content"`
			} `json:"delta"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage *struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	}
	var chunks []chunk
	for _, e := range events[:len(events)-1] {
		var c chunk
		g.Expect(json.Unmarshal([]byte(e), &c)).To(Succeed(), e)
		g.Expect(c.Object).To(Equal("chat.completion.chunk"))
		chunks = append(chunks, c)
	}
	g.Expect(chunks).To(HaveLen(4))
	for _, c := range chunks {
		g.Expect(c.ID).To(Equal(chunks[0].ID), "every chunk has the completion's id")
	}
	g.Expect(chunks[0].Choices[0].Delta.Role).To(Equal("assistant"))
	g.Expect(*chunks[1].Choices[0].Delta.Content).To(Equal("Check the previous logs."))
	g.Expect(*chunks[2].Choices[0].FinishReason).To(Equal("stop"))
	g.Expect(chunks[3].Choices).To(BeEmpty())
	g.Expect(chunks[3].Usage.TotalTokens).To(BeNumerically(">", 0))
	g.Expect(f.model.Requests()).To(HaveLen(2), "the tool loop ran server-side")
}

// TestOfficialSDKIsAClient: the official OpenAI Go SDK talks to the
// runtime's endpoint, streaming and not, and sees a wrong token as 401.
func TestOfficialSDKIsAClient(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, options{},
		modeltest.Tools(modeltest.Call("use_skill", map[string]string{"name": "crash-triage"})),
		modeltest.Reply("First answer."),
		modeltest.Reply("Streamed answer, with ünïcode."))
	sdk := openai.NewClient(option.WithBaseURL(f.api.URL+"/v1"), option.WithAPIKey(f.token), option.WithMaxRetries(0))
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:    "ops",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("web-0 restarts")},
	}

	got, err := sdk.Chat.Completions.New(ctx, params)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Choices).To(HaveLen(1))
	g.Expect(got.Choices[0].Message.Content).To(Equal("First answer."))
	g.Expect(got.Choices[0].FinishReason).To(Equal("stop"))
	g.Expect(got.Model).To(Equal("test-model"))
	g.Expect(got.Usage.TotalTokens).To(BeNumerically(">", 0))

	stream := sdk.Chat.Completions.NewStreaming(ctx, params)
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	g.Expect(stream.Err()).NotTo(HaveOccurred())
	g.Expect(acc.Choices[0].Message.Content).To(Equal("Streamed answer, with ünïcode."))
	g.Expect(string(acc.Choices[0].FinishReason)).To(Equal("stop"))

	wrong := openai.NewClient(option.WithBaseURL(f.api.URL+"/v1"), option.WithAPIKey("nope"), option.WithMaxRetries(0))
	_, err = wrong.Chat.Completions.New(ctx, params)
	var apiErr *openai.Error
	g.Expect(errors.As(err, &apiErr)).To(BeTrue())
	g.Expect(apiErr.StatusCode).To(Equal(http.StatusUnauthorized))
	g.Expect(f.model.Requests()).To(HaveLen(3))
}

// TestSkillsAPI: the catalog lists every skill with its invocation and
// hash, never a body; a body is served by name for Auto and Explicit
// skills, never for Disabled ones.
func TestSkillsAPI(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, options{})
	code, body := f.do(t, http.MethodGet, "/v1/skills", f.token, nil)
	g.Expect(code).To(Equal(http.StatusOK))
	var list struct {
		Agent    string `json:"agent"`
		Revision string `json:"revision"`
		Skills   []struct {
			Name, Description, Invocation, ContentHash string
		} `json:"skills"`
	}
	g.Expect(json.Unmarshal(body, &list)).To(Succeed())
	g.Expect(list.Agent).To(Equal("ops"))
	g.Expect(list.Revision).To(HavePrefix("sha256:"))
	g.Expect(list.Skills).To(HaveLen(2))
	g.Expect(list.Skills[0].Name).To(Equal("crash-triage"))
	g.Expect(list.Skills[0].Invocation).To(Equal("Auto"))
	g.Expect(list.Skills[0].ContentHash).To(HavePrefix("sha256:"))
	g.Expect(list.Skills[1].Invocation).To(Equal("Explicit"))
	g.Expect(string(body)).NotTo(ContainSubstring("BODY-MARKER"))

	for name, want := range map[string]string{"crash-triage": "BODY-MARKER-TRIAGE", "release-notes": "BODY-MARKER-NOTES"} {
		code, body := f.do(t, http.MethodGet, "/v1/skills/"+name, f.token, nil)
		g.Expect(code).To(Equal(http.StatusOK), name)
		var s struct {
			Name, Instructions, ContentHash string
			Files                           []string
		}
		g.Expect(json.Unmarshal(body, &s)).To(Succeed())
		g.Expect(s.Instructions).To(ContainSubstring(want))
	}
	for _, name := range []string{"wipe-cluster", "nope"} {
		code, _ := f.do(t, http.MethodGet, "/v1/skills/"+name, f.token, nil)
		g.Expect(code).To(Equal(http.StatusNotFound), name)
	}
}

// TestMetrics: requests, tool calls, chats, model latency, the GenAI
// token and duration histograms and catalog reloads are exported for
// Prometheus.
func TestMetrics(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, options{},
		modeltest.Tools(modeltest.Call("use_skill", map[string]string{"name": "crash-triage"})), modeltest.Reply("ok"))
	f.chat(t, "hi")
	f.do(t, http.MethodGet, "/v1/skills", "", nil)
	code, body := f.do(t, http.MethodGet, "/metrics", metricsToken(t), nil)
	g.Expect(code).To(Equal(http.StatusOK))
	text := string(body)
	for _, want := range []string{
		`kubeskills_agent_http_requests_total{code="200",path="/v1/chat/completions"} 1`,
		`kubeskills_agent_http_requests_total{code="401",path="/v1/skills"} 1`,
		`kubeskills_agent_tool_calls_total{tool="use_skill"} 1`,
		`kubeskills_agent_model_request_duration_seconds_count{outcome="ok"} 2`,
		`kubeskills_agent_catalog_reloads_total{result="ok"} 0`,
		`kubeskills_agent_catalog_reloads_total{result="failed"} 0`,
		`kubeskills_agent_catalog_skills 2`,
		`kubeskills_agent_chats_total{outcome="answered"} 1`,
		`gen_ai_client_operation_duration_seconds_count{error_type="",gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="test-model"} 2`,
		`gen_ai_client_token_usage_count{gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="test-model",gen_ai_token_type="input"} 2`,
		`gen_ai_client_token_usage_count{gen_ai_operation_name="chat",gen_ai_provider_name="openai",gen_ai_request_model="test-model",gen_ai_token_type="output"} 2`,
	} {
		g.Expect(text).To(ContainSubstring(want))
	}
	g.Expect(text).NotTo(ContainSubstring(f.token))
}
