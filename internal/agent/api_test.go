package agent_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	skillsv1 "github.com/kubeskills/kubeskills/api/v1alpha1"
	"github.com/kubeskills/kubeskills/internal/agent"
	"github.com/kubeskills/kubeskills/internal/agent/modeltest"
)

// logBuffer collects a runtime's log lines.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *logBuffer) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.lines = append(b.lines, prefix+" "+args)
	}, funcr.Options{})
}

func (b *logBuffer) text() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

// apiErrorBody is an OpenAI-shaped error answer.
type apiErrorBody struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Param   string `json:"param"`
		Code    string `json:"code"`
	} `json:"error"`
}

// post sends a chat body, with header's name and value pairs, and returns
// the answer, its headers included.
func (f *fixture) post(t *testing.T, path string, body any, header ...string) (*http.Response, []byte) {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, f.api.URL+path, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+f.token)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, out
}

func chatBody(model, msg string) map[string]any {
	return map[string]any{"model": model, "messages": []map[string]string{{"role": "user", "content": msg}}}
}

// sdk is the official OpenAI client, with its default retries, calling
// the runtime.
func (f *fixture) sdk() openai.Client {
	return openai.NewClient(option.WithBaseURL(f.api.URL+"/v1"), option.WithAPIKey(f.token),
		option.WithMaxRetryDelay(10*time.Millisecond))
}

// closedWithin reads conn until the server closes it, and fails if that
// takes longer than limit.
func closedWithin(t *testing.T, conn net.Conn, limit time.Duration) string {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(limit))
	data, err := io.ReadAll(conn)
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		t.Fatalf("the server still held the connection after %s (read %q)", limit, data)
	}
	return string(data)
}

// TestAPI_SlowBodyIsCutOffByReadTimeout: a caller that sends its headers
// and then trickles its body, or never finishes its headers, holds the
// connection no longer than the read timeouts; the unauthenticated one is
// never read at all. Nothing reaches the model.
func TestAPI_SlowBodyIsCutOffByReadTimeout(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, options{config: func(c *agent.Config) {
		c.Server.ReadHeaderTimeout, c.Server.ReadTimeout = 300*time.Millisecond, 500*time.Millisecond
	}}, modeltest.Reply("never"))
	dial := func() net.Conn {
		conn, err := net.Dial("tcp", strings.TrimPrefix(f.api.URL, "http://"))
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = conn.Close() })
		return conn
	}

	slow := dial()
	_, err := fmt.Fprintf(slow, "POST /v1/chat/completions HTTP/1.1\r\nHost: agent\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: 4096\r\n\r\n{\"model\":", f.token)
	g.Expect(err).NotTo(HaveOccurred())
	answer := closedWithin(t, slow, 5*time.Second)
	g.Expect(answer).To(Or(BeEmpty(), HavePrefix("HTTP/1.1 408")), "a body that does not arrive in time is 408, or the connection closes")

	headers := dial()
	_, err = fmt.Fprint(headers, "POST /v1/chat/completions HTTP/1.1\r\nHost: agent\r\n")
	g.Expect(err).NotTo(HaveOccurred())
	closedWithin(t, headers, 5*time.Second)

	anonymous := dial()
	_, err = fmt.Fprint(anonymous, "POST /v1/chat/completions HTTP/1.1\r\nHost: agent\r\nContent-Length: 4096\r\n\r\n{")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(closedWithin(t, anonymous, 5*time.Second)).To(HavePrefix("HTTP/1.1 401"))

	g.Expect(f.model.Requests()).To(BeEmpty())
}

// TestAPI_LongChatOutlivesReadTimeout: the read timeout bounds reading the
// request, not the chat: a tool loop that runs longer still answers.
func TestAPI_LongChatOutlivesReadTimeout(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, options{config: func(c *agent.Config) {
		c.Server.ReadTimeout, c.Server.WriteTimeout = 200*time.Millisecond, 200*time.Millisecond
	}}, modeltest.Step{Content: "took a while", DelayMillis: 1200})
	g.Expect(f.chat(t, "think hard")).To(Equal("took a while"))
}

// TestAPI_BodyTooLargeIs413: a body over the route's limit is refused
// before any of it is used.
func TestAPI_BodyTooLargeIs413(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, options{})
	res, body := f.post(t, "/v1/commands", map[string]string{"command": strings.Repeat("x", 70<<10)})
	g.Expect(res.StatusCode).To(Equal(http.StatusRequestEntityTooLarge), string(body))
	g.Expect(runs(g, f.ns)).To(BeEmpty())
}

// TestAPI_ModelFailureIsNotRetried_NoDuplicateRuns: when the model fails
// after the chat filed a CommandRun, the answer says x-should-retry:
// false, so the official OpenAI client (which retries 5xx twice by
// default) does not run the chat, tool loop included, again: one run, one
// chat's worth of model calls.
func TestAPI_ModelFailureIsNotRetried_NoDuplicateRuns(t *testing.T) {
	g := NewWithT(t)
	attempt := []modeltest.Step{
		modeltest.Tools(modeltest.Call("run_command", map[string]string{"command": "rm -rf /data"})),
		modeltest.Fail(http.StatusInternalServerError), modeltest.Fail(http.StatusInternalServerError),
		modeltest.Fail(http.StatusInternalServerError),
	}
	var script []modeltest.Step
	for range 3 {
		script = append(script, attempt...)
	}
	f, _ := commandFixture(t, nil, nil, script...)

	var raw *http.Response
	sdk := f.sdk()
	_, err := sdk.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "ops",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("wipe the data")},
	}, option.WithResponseInto(&raw))
	var apiErr *openai.Error
	g.Expect(errors.As(err, &apiErr)).To(BeTrue(), "%v", err)
	g.Expect(apiErr.StatusCode).To(Equal(http.StatusBadGateway))
	g.Expect(raw.Header.Get("X-Should-Retry")).To(Equal("false"))
	g.Expect(raw.Header.Get("X-Stainless-Retry-Count")).To(BeEmpty())
	g.Expect(f.model.Requests()).To(HaveLen(4), "one chat: a tool call, then the model's three failed attempts")
	g.Expect(f.model.Remaining()).To(Equal(8))
	g.Expect(runs(g, f.ns)).To(HaveLen(1), "one CommandRun, not one per retry")
}

// TestAPI_RetriedChatDoesNotFileASecondRun: a client that retries a chat
// after a failure, as the official OpenAI clients do
// (X-Stainless-Retry-Count above 0), gets the CommandRun the first attempt
// filed, followed, not a second one; a different conversation asking for
// the same command files its own run.
func TestAPI_RetriedChatDoesNotFileASecondRun(t *testing.T) {
	g := NewWithT(t)
	wipe := modeltest.Tools(modeltest.Call("run_command", map[string]string{"command": "rm -rf /data"}))
	f, _ := commandFixture(t, nil, func(c *agent.Config) { c.Model.MaxRetries = 0 },
		wipe, modeltest.Fail(http.StatusInternalServerError),
		wipe, answerWithOutput(),
		wipe, answerWithOutput())

	res, body := f.post(t, "/v1/chat/completions", chatBody("ops", "wipe the data"), "X-Stainless-Retry-Count", "0")
	g.Expect(res.StatusCode).To(Equal(http.StatusBadGateway), string(body))
	first := runs(g, f.ns)
	g.Expect(first).To(HaveLen(1))

	res, body = f.post(t, "/v1/chat/completions", chatBody("ops", "wipe the data"), "X-Stainless-Retry-Count", "1")
	g.Expect(res.StatusCode).To(Equal(http.StatusOK), string(body))
	g.Expect(string(body)).To(ContainSubstring("Output: denied:"))
	g.Expect(runs(g, f.ns)).To(HaveLen(1), "the retry follows the first attempt's run")
	g.Expect(toolResult(t, f.model.Requests()[3].LastToolResult())).To(HaveKeyWithValue("run", first[0].Name))

	g.Expect(f.chat(t, "wipe the data, again")).To(HavePrefix("Output: denied:"))
	all := runs(g, f.ns)
	g.Expect(all).To(HaveLen(2), "another conversation is another request")
	for _, r := range all {
		g.Expect(r.Spec.Command).To(Equal("rm -rf /data"))
		g.Expect(r.Status.Phase).To(Equal(skillsv1.PhaseDenied))
	}
}

// TestAPI_ErrorsCarryNoInternals: a model failure and a Kubernetes error
// reach the caller as a short message with a request id, whether the
// answer is streamed or not; the details go to the log under that id.
func TestAPI_ErrorsCarryNoInternals(t *testing.T) {
	g := NewWithT(t)
	logs := &logBuffer{}
	const leak = "upstream-detail-4f2a"
	fail := modeltest.Step{Status: http.StatusInternalServerError, Message: leak}
	// The agent's ServiceAccount, serving a namespace it may not file runs
	// in: creating a CommandRun is forbidden.
	ns, kube, _ := commandSetup(t, nil)
	other := newFixture(t, options{ns: ns, kube: kube, log: logs.logger(), config: func(c *agent.Config) {
		c.Namespace, c.Model.MaxRetries = "default", 0
		c.Identity = "system:serviceaccount:" + ns + ":ops-agent"
	}}, fail, fail,
		modeltest.Tools(modeltest.Call("run_command", map[string]string{"command": "echo hi"})),
		modeltest.Step{Content: "I got:", EchoToolResults: true})

	res, body := other.post(t, "/v1/chat/completions", chatBody("ops", "hi"))
	g.Expect(res.StatusCode).To(Equal(http.StatusBadGateway))
	id := res.Header.Get("X-Request-Id")
	g.Expect(id).To(HavePrefix("req_"))
	var e apiErrorBody
	g.Expect(json.Unmarshal(body, &e)).To(Succeed(), string(body))
	g.Expect(e.Error.Message).To(Equal("the model could not answer (request id " + id + ")"))
	g.Expect(e.Error.Type).To(Equal("model_error"))
	g.Expect(string(body)).NotTo(ContainSubstring(leak))
	// The random request id may hold "500" itself.
	g.Expect(strings.ReplaceAll(string(body), id, "")).NotTo(ContainSubstring("500"))
	g.Expect(logs.text()).To(ContainSubstring(id), "the log has the details under the request id")

	res, body = other.post(t, "/v1/commands", map[string]string{"command": "echo hi"})
	g.Expect(res.StatusCode).To(Equal(http.StatusBadGateway))
	id = res.Header.Get("X-Request-Id")
	g.Expect(json.Unmarshal(body, &e)).To(Succeed(), string(body))
	g.Expect(e.Error.Message).To(Equal("failed to run the command (request id " + id + ")"))
	for _, internal := range []string{"forbidden", "serviceaccount", "commandruns", "kubeskills.io", "default"} {
		g.Expect(strings.ToLower(string(body))).NotTo(ContainSubstring(internal))
	}
	g.Expect(res.Header.Get("X-Should-Retry")).To(Equal("false"))
	g.Expect(logs.text()).To(And(ContainSubstring(id), ContainSubstring("forbidden")))

	sdk := other.sdk()
	stream := sdk.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: "ops", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	for stream.Next() {
	}
	g.Expect(stream.Err()).To(HaveOccurred())
	g.Expect(stream.Err().Error()).To(ContainSubstring("the model could not answer (request id req_"))
	g.Expect(stream.Err().Error()).NotTo(ContainSubstring(leak))

	// What the model reads of a refused CommandRun, and may repeat, is
	// the reason and the request id.
	answer := other.chat(t, "say hi")
	g.Expect(answer).To(ContainSubstring("the Kubernetes API refused run_command (Forbidden)"))
	g.Expect(answer).To(MatchRegexp(`request id req_[0-9a-f]{24}`))
	for _, internal := range []string{"serviceaccount", "commandruns", "kubeskills.io", "cannot create"} {
		g.Expect(strings.ToLower(answer)).NotTo(ContainSubstring(internal))
	}
}

// TestAPI_UnknownModelIs404: a chat naming a model other than the agent is
// answered 404 model_not_found in OpenAI's error shape, before the model
// is called; naming the agent, or no model, is served.
func TestAPI_UnknownModelIs404(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, options{}, modeltest.Reply("named"), modeltest.Reply("unnamed"))

	res, body := f.post(t, "/v1/chat/completions", chatBody("gpt-4o", "hi"))
	g.Expect(res.StatusCode).To(Equal(http.StatusNotFound))
	var e apiErrorBody
	g.Expect(json.Unmarshal(body, &e)).To(Succeed(), string(body))
	g.Expect(e.Error.Type).To(Equal("invalid_request_error"))
	g.Expect(e.Error.Code).To(Equal("model_not_found"))
	g.Expect(e.Error.Param).To(Equal("model"))
	g.Expect(e.Error.Message).To(ContainSubstring(`"gpt-4o" does not exist`))

	sdk := f.sdk()
	_, err := sdk.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var apiErr *openai.Error
	g.Expect(errors.As(err, &apiErr)).To(BeTrue())
	g.Expect(apiErr.StatusCode).To(Equal(http.StatusNotFound))
	g.Expect(apiErr.Code).To(Equal("model_not_found"))
	g.Expect(f.model.Requests()).To(BeEmpty(), "an unknown model calls no model")

	g.Expect(f.chat(t, "hi")).To(Equal("named"))
	res, body = f.post(t, "/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}})
	g.Expect(res.StatusCode).To(Equal(http.StatusOK), string(body))
}

// TestAPI_GetModel: GET /v1/models lists the agent as the one model and
// GET /v1/models/{id} serves it, as the official client reads them; any
// other id is 404.
func TestAPI_GetModel(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, options{})
	ctx := context.Background()
	sdk := f.sdk()

	m, err := sdk.Models.Get(ctx, "ops")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.ID).To(Equal("ops"))
	g.Expect(string(m.Object)).To(Equal("model"))
	g.Expect(m.OwnedBy).To(Equal("kubeskills"))

	page, err := sdk.Models.List(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(page.Data).To(HaveLen(1))
	g.Expect(page.Data[0].ID).To(Equal("ops"))

	_, err = sdk.Models.Get(ctx, "gpt-4o")
	var apiErr *openai.Error
	g.Expect(errors.As(err, &apiErr)).To(BeTrue())
	g.Expect(apiErr.StatusCode).To(Equal(http.StatusNotFound))
	g.Expect(apiErr.Code).To(Equal("model_not_found"))
}

// TestAPI_ConcurrencyLimitAnswers429: past MaxConcurrentRequests requests
// in flight, the next is answered 429 in OpenAI's error shape with a
// Retry-After, and nothing happens for it; probes are still served; once a
// request ends, its slot serves the next.
func TestAPI_ConcurrencyLimitAnswers429(t *testing.T) {
	g := NewWithT(t)
	release := make(chan struct{})
	f := newFixture(t, options{config: func(c *agent.Config) { c.Server.MaxConcurrentRequests = 1 }},
		modeltest.Step{Respond: func(modeltest.Request) modeltest.Step {
			<-release
			return modeltest.Reply("first")
		}},
		modeltest.Reply("third"))
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)

	first := f.chatAsync("hold the slot")
	g.Eventually(f.model.Requests, timeout, interval).Should(HaveLen(1))

	res, body := f.post(t, "/v1/chat/completions", chatBody("ops", "second"))
	g.Expect(res.StatusCode).To(Equal(http.StatusTooManyRequests), string(body))
	g.Expect(res.Header.Get("Retry-After")).To(Equal("1"))
	var e apiErrorBody
	g.Expect(json.Unmarshal(body, &e)).To(Succeed(), string(body))
	g.Expect(e.Error.Type).To(Equal("rate_limit_error"))
	g.Expect(e.Error.Code).To(Equal("rate_limit_exceeded"))
	code, _ := f.do(t, http.MethodGet, "/v1/skills", f.token, nil)
	g.Expect(code).To(Equal(http.StatusTooManyRequests))
	code, _ = f.do(t, http.MethodGet, "/healthz", "", nil)
	g.Expect(code).To(Equal(http.StatusOK), "probes are not limited")
	g.Expect(f.model.Requests()).To(HaveLen(1), "the refused request called no model")

	free()
	g.Eventually(first, timeout).Should(Receive(Equal("first")))
	g.Expect(f.chat(t, "third")).To(Equal("third"))
}

// TestAPI_EveryAnswerHasARequestID: answers, good or not, carry their
// request id, a new one each time.
func TestAPI_EveryAnswerHasARequestID(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t, options{})
	seen := map[string]bool{}
	for _, path := range []string{"/v1/skills", "/v1/nope", "/healthz"} {
		req, _ := http.NewRequest(http.MethodGet, f.api.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+f.token)
		res, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		_, _ = io.Copy(io.Discard, bufio.NewReader(res.Body))
		_ = res.Body.Close()
		id := res.Header.Get("X-Request-Id")
		g.Expect(id).To(MatchRegexp(`^req_[0-9a-f]{24}$`), path)
		g.Expect(seen).NotTo(HaveKey(id))
		seen[id] = true
	}
}

// TestAPI_RetryNeverFollowsAnotherIdentitysRun: a CommandRun that someone
// else filed under the name a retried chat's command would take, even with
// the same command and request key, is not followed: the chat files its
// own run, as its own identity, and reports that one.
func TestAPI_RetryNeverFollowsAnotherIdentitysRun(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f, _ := commandFixture(t, nil, nil,
		modeltest.Tools(modeltest.Call("run_command", map[string]string{"command": "rm -rf /data"})), answerWithOutput())
	header := http.Header{"Authorization": {"Bearer " + f.token}, "Idempotency-Key": {"k1"}}
	key := agent.RequestKey(header, []agent.Message{{Role: "user", Content: "wipe the data"}}, 1, "rm -rf /data", "")
	admin, err := agent.WhoAmI(ctx, k8s)
	g.Expect(err).NotTo(HaveOccurred())
	squatter := &skillsv1.CommandRun{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: agent.RunName("ops", key),
			Annotations: map[string]string{agent.AnnotationRequestKey: key}},
		Spec: skillsv1.CommandRunSpec{Agent: "ops", Command: "rm -rf /data", RequestedBy: admin},
	}
	g.Expect(k8s.Create(ctx, squatter)).To(Succeed())

	res, body := f.post(t, "/v1/chat/completions", chatBody("ops", "wipe the data"), "Idempotency-Key", "k1")
	g.Expect(res.StatusCode).To(Equal(http.StatusOK), string(body))
	g.Expect(string(body)).To(ContainSubstring("Output: denied:"))
	all := runs(g, f.ns)
	g.Expect(all).To(HaveLen(2))
	reported := toolResult(t, f.model.Requests()[1].LastToolResult())["run"]
	g.Expect(reported).NotTo(Equal(squatter.Name))
	for _, r := range all {
		if r.Name == reported {
			g.Expect(r.Spec.RequestedBy).To(Equal("system:serviceaccount:" + f.ns + ":ops-agent"))
			g.Expect(r.GenerateName).To(Equal("ops-"))
		}
	}
}
