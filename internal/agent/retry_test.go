package agent_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/kubeskills/kubeskills/internal/agent"
	"github.com/kubeskills/kubeskills/internal/agent/modeltest"
)

// wipeAndAnswer is the model's part of one chat that runs `rm -rf /data`.
func wipeAndAnswer() []modeltest.Step {
	return []modeltest.Step{
		modeltest.Tools(modeltest.Call("run_command", map[string]string{"command": "rm -rf /data"})),
		answerWithOutput(),
	}
}

// script is the model's part of n chats that each run `rm -rf /data`.
func script(n int) []modeltest.Step {
	var steps []modeltest.Step
	for range n {
		steps = append(steps, wipeAndAnswer()...)
	}
	return steps
}

// reportedRuns lists, in order, the run each run_command result the model
// read names.
func reportedRuns(t *testing.T, f *fixture) []string {
	t.Helper()
	var out []string
	for _, req := range f.model.Requests() {
		if res := req.LastToolResult(); res != "" {
			out = append(out, toolResult(t, res)["run"].(string))
		}
	}
	return out
}

// TestFinding_SameQuestionIsANewQuestion: the same chat sent twice, by a
// caller that does not say the second is a retry, is two questions: each
// files its own CommandRun and reports it.
func TestFinding_SameQuestionIsANewQuestion(t *testing.T) {
	g := NewWithT(t)
	f, _ := commandFixture(t, nil, nil, script(2)...)

	g.Expect(f.chat(t, "wipe the data")).To(HavePrefix("Output: denied:"))
	g.Expect(f.chat(t, "wipe the data")).To(HavePrefix("Output: denied:"))

	g.Expect(runs(g, f.ns)).To(HaveLen(2), "a question asked again is a new question")
	reported := reportedRuns(t, f)
	g.Expect(reported).To(HaveLen(2))
	g.Expect(reported[1]).NotTo(Equal(reported[0]))
}

// dropFirstAnswer serves next, but loses the answer to the first request:
// the handler runs to its end, then the connection is closed before
// anything reaches the caller, as when a proxy or the network drops it.
// It records the X-Stainless-Retry-Count of every request.
func dropFirstAnswer(next http.Handler) (http.Handler, func() []string) {
	var mu sync.Mutex
	var counts []string
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		counts = append(counts, req.Header.Get("X-Stainless-Retry-Count"))
		first := len(counts) == 1
		mu.Unlock()
		if !first {
			next.ServeHTTP(w, req)
			return
		}
		next.ServeHTTP(httptest.NewRecorder(), req)
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close()
		}
	})
	return h, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), counts...)
	}
}

// TestFinding_OfficialClientRetryFollowsTheRun: the official OpenAI client
// whose first attempt's answer is lost retries on its own, and the retry
// follows the CommandRun the first attempt filed instead of filing a
// second; the same question asked again afterwards, a new call of the
// client, is a new question and files its own run.
func TestFinding_OfficialClientRetryFollowsTheRun(t *testing.T) {
	g := NewWithT(t)
	f, _ := commandFixture(t, nil, nil, script(3)...)
	h, counts := dropFirstAnswer(f.rt.Handler())
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	sdk := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey(f.token),
		option.WithMaxRetryDelay(10*time.Millisecond))
	ask := func() string {
		c, err := sdk.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model:    "ops",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("wipe the data")},
		})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(c.Choices).To(HaveLen(1))
		return c.Choices[0].Message.Content
	}

	g.Expect(ask()).To(HavePrefix("Output: denied:"))
	g.Expect(counts()).To(Equal([]string{"0", "1"}), "the client retried the lost answer on its own")
	first := runs(g, f.ns)
	g.Expect(first).To(HaveLen(1), "the retry follows the first attempt's run")
	g.Expect(reportedRuns(t, f)).To(Equal([]string{first[0].Name, first[0].Name}))

	g.Expect(ask()).To(HavePrefix("Output: denied:"))
	g.Expect(counts()).To(Equal([]string{"0", "1", "0"}))
	g.Expect(runs(g, f.ns)).To(HaveLen(2), "a new call with the same messages is a new question")
	g.Expect(reportedRuns(t, f)[2]).NotTo(Equal(first[0].Name))
}

// TestFinding_IdempotencyKeyRetryFollowsTheRun: a chat sent again with the
// same Idempotency-Key follows the run the first one filed; with another
// key it is a new question and files its own.
func TestFinding_IdempotencyKeyRetryFollowsTheRun(t *testing.T) {
	g := NewWithT(t)
	f, _ := commandFixture(t, nil, nil, script(3)...)
	send := func(key string) {
		res, body := f.post(t, "/v1/chat/completions", chatBody("ops", "wipe the data"), "Idempotency-Key", key)
		g.Expect(res.StatusCode).To(Equal(http.StatusOK), string(body))
		g.Expect(string(body)).To(ContainSubstring("Output: denied:"))
	}

	send("k1")
	send("k1")
	first := runs(g, f.ns)
	g.Expect(first).To(HaveLen(1), "the same key is the same request")
	g.Expect(first[0].Name).To(MatchRegexp(`^ops-[a-z2-7]{10}$`), "the run is named after its request")
	g.Expect(first[0].Annotations).To(HaveKeyWithValue(agent.AnnotationRequestKey, MatchRegexp(`^[0-9a-f]{64}$`)))
	send("k2")
	g.Expect(runs(g, f.ns)).To(HaveLen(2), "another key is another request")
	reported := reportedRuns(t, f)
	g.Expect(reported[1]).To(Equal(reported[0]))
	g.Expect(reported[2]).NotTo(Equal(reported[0]))
}
