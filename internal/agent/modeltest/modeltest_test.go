package modeltest_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/kubeskills/kubeskills/internal/agent/modeltest"
)

func client(s *modeltest.Server, opts ...option.RequestOption) openai.Client {
	base := []option.RequestOption{option.WithBaseURL(s.URL()), option.WithAPIKey("sk-test"), option.WithMaxRetryDelay(time.Millisecond)}
	return openai.NewClient(append(base, opts...)...)
}

func params() openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("hi")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name: "use_skill", Parameters: openai.FunctionParameters{"type": "object"},
		})},
	}
}

// TestOfficialClientReadsScriptedAnswers: the SDK parses tool calls and text
// the server replays, and the server records what it was sent.
func TestOfficialClientReadsScriptedAnswers(t *testing.T) {
	s := modeltest.New(modeltest.Tools(modeltest.Call("use_skill", map[string]string{"name": "triage"})), modeltest.Reply("done"))
	defer s.Close()
	c := client(s)
	ctx := context.Background()

	first, err := c.Chat.Completions.New(ctx, params())
	if err != nil {
		t.Fatal(err)
	}
	calls := first.Choices[0].Message.ToolCalls
	if len(calls) != 1 || calls[0].Function.Name != "use_skill" || calls[0].Function.Arguments != `{"name":"triage"}` || calls[0].ID == "" {
		t.Fatalf("tool calls = %+v", calls)
	}
	if first.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("finish reason = %q", first.Choices[0].FinishReason)
	}
	second, err := c.Chat.Completions.New(ctx, params())
	if err != nil {
		t.Fatal(err)
	}
	if got := second.Choices[0].Message.Content; got != "done" {
		t.Fatalf("content = %q", got)
	}
	reqs := s.Requests()
	if len(reqs) != 2 || reqs[0].System() != "be brief\n" || reqs[0].ToolNames()[0] != "use_skill" || reqs[0].Authorization != "Bearer sk-test" {
		t.Fatalf("requests = %+v", reqs)
	}
	if _, err := c.Chat.Completions.New(ctx, params()); err == nil {
		t.Fatal("an exhausted script must answer with an error")
	}
}

// TestStreamedAnswersAccumulate: streamed chunks add up to the same message.
func TestStreamedAnswersAccumulate(t *testing.T) {
	s := modeltest.New(
		modeltest.Step{Content: "Looking at the pods, ünïcode included.", ToolCalls: []modeltest.ToolCall{
			modeltest.Call("run_command", map[string]string{"command": "kubectl get pods -A"}),
		}},
	)
	defer s.Close()
	c := client(s)
	stream := c.Chat.Completions.NewStreaming(context.Background(), params())
	acc := openai.ChatCompletionAccumulator{}
	chunks := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	msg := acc.Choices[0].Message
	if msg.Content != "Looking at the pods, ünïcode included." || chunks < 5 {
		t.Fatalf("content = %q after %d chunks", msg.Content, chunks)
	}
	if len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Arguments != `{"command":"kubectl get pods -A"}` {
		t.Fatalf("tool calls = %+v", msg.ToolCalls)
	}
}

// TestErrorStepsAreRetried: 429 and 500 answers are OpenAI-shaped errors the
// SDK retries.
func TestErrorStepsAreRetried(t *testing.T) {
	s := modeltest.New(modeltest.Fail(http.StatusTooManyRequests), modeltest.Fail(http.StatusInternalServerError), modeltest.Reply("ok"))
	defer s.Close()
	retrying := client(s, option.WithMaxRetries(2))
	got, err := retrying.Chat.Completions.New(context.Background(), params())
	if err != nil {
		t.Fatal(err)
	}
	if got.Choices[0].Message.Content != "ok" || len(s.Requests()) != 3 {
		t.Fatalf("content %q after %d requests", got.Choices[0].Message.Content, len(s.Requests()))
	}

	s.Add(modeltest.Step{Status: http.StatusTooManyRequests, Message: "slow down"})
	once := client(s, option.WithMaxRetries(0))
	_, err = once.Chat.Completions.New(context.Background(), params())
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("err = %v", err)
	}
}

// TestLoadSteps reads a script from a fixture file.
func TestLoadSteps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "steps.json")
	fixture := `[{"toolCalls":[{"name":"use_skill","arguments":"{\"name\":\"x\"}"}]},{"content":"bye"},{"status":503}]`
	if err := os.WriteFile(path, []byte(fixture), 0o600); err != nil {
		t.Fatal(err)
	}
	steps, err := modeltest.LoadSteps(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 3 || steps[0].ToolCalls[0].Name != "use_skill" || steps[1].Content != "bye" || steps[2].Status != 503 {
		t.Fatalf("steps = %+v", steps)
	}
}

// TestLoopReplaysTheScript: a looping script answers again from its first
// step once it runs out, instead of failing.
func TestLoopReplaysTheScript(t *testing.T) {
	s := modeltest.New(modeltest.Reply("one"), modeltest.Reply("two"))
	defer s.Close()
	s.Loop()
	c := client(s)
	var got []string
	for range 5 {
		resp, err := c.Chat.Completions.New(context.Background(), params())
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, resp.Choices[0].Message.Content)
	}
	if want := "one two one two one"; strings.Join(got, " ") != want {
		t.Fatalf("answers = %q, want %q", got, want)
	}
}
