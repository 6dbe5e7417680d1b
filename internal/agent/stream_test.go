package agent_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/openai/openai-go/v3"

	"github.com/kubeskills/kubeskills/internal/agent/modeltest"
)

// maxEventBytes is the most one server-sent event of a streamed chat may
// take, its `data: ` and blank line included.
const maxEventBytes = 64 << 10

// streamEvents sends a streamed chat with the given messages and returns
// its events, each as written.
func (f *fixture) streamEvents(t *testing.T, messages []map[string]string) []string {
	t.Helper()
	res, body := f.post(t, "/v1/chat/completions", map[string]any{"model": "ops", "stream": true, "messages": messages})
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("streamed chat answered %d %s: %.200s", res.StatusCode, res.Header.Get("Content-Type"), body)
	}
	var events []string
	for _, ev := range strings.SplitAfter(string(body), "\n\n") {
		if ev != "" {
			events = append(events, ev)
		}
	}
	return events
}

// TestStreamedChatEventsAreBounded: a streamed reply of 300 KiB, of text
// JSON escapes and runes of several bytes, reaches the caller whole, in
// events of at most 64 KiB, which the official client joins back; an
// error quoting 200 KiB the caller sent is one event of bounded size, its
// message cut with a marker. No event sets `retry:`.
func TestStreamedChatEventsAreBounded(t *testing.T) {
	g := NewWithT(t)
	reply := strings.Repeat("<b>é 日本\x01 & more\n", 300<<10/24)
	f := newFixture(t, options{}, modeltest.Reply(reply), modeltest.Reply(reply))

	var got strings.Builder
	for _, ev := range f.streamEvents(t, []map[string]string{{"role": "user", "content": "write a lot"}}) {
		g.Expect(len(ev)).To(BeNumerically("<=", maxEventBytes), "an event of %d bytes", len(ev))
		g.Expect(ev).NotTo(MatchRegexp(`(?m)^retry:`))
		data, ok := strings.CutPrefix(strings.TrimSuffix(ev, "\n\n"), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		g.Expect(json.Unmarshal([]byte(data), &chunk)).To(Succeed())
		for _, c := range chunk.Choices {
			got.WriteString(c.Delta.Content)
		}
	}
	g.Expect(got.String() == reply).To(BeTrue(), "the deltas joined are the reply")

	sdk := f.sdk()
	stream := sdk.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: "ops", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("write a lot")},
	})
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	g.Expect(stream.Err()).NotTo(HaveOccurred())
	g.Expect(acc.Choices).To(HaveLen(1))
	g.Expect(acc.Choices[0].Message.Content == reply).To(BeTrue(), "the official client joins the deltas into the reply")

	role := strings.Repeat("x", 200<<10)
	events := f.streamEvents(t, []map[string]string{{"role": role, "content": "hi"}})
	last := events[len(events)-1]
	g.Expect(len(last)).To(BeNumerically("<=", maxEventBytes))
	var e apiErrorBody
	g.Expect(json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(last), "data: ")), &e)).To(Succeed())
	g.Expect(e.Error.Type).To(Equal("invalid_request_error"))
	g.Expect(e.Error.Message).To(HavePrefix(`messages[0] has role "xxx`))
	g.Expect(e.Error.Message).To(HaveSuffix("… [truncated]"))
}
