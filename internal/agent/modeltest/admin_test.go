package modeltest_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/kubeskills/kubeskills/internal/agent/modeltest"
)

func admin(s *modeltest.Server) modeltest.Admin {
	return modeltest.Admin{URL: strings.TrimSuffix(s.URL(), "/v1")}
}

// post sends body to the server at path and returns the status and answer.
func post(t *testing.T, s *modeltest.Server, path, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(strings.TrimSuffix(s.URL(), "/v1")+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(data)
}

// TestAdminScriptsTheServer: a harness adds steps over HTTP, reads what the
// model was sent, and resets the script.
func TestAdminScriptsTheServer(t *testing.T) {
	s := modeltest.New()
	defer s.Close()
	a := admin(s)
	ctx := context.Background()
	if err := a.Healthy(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := a.AddSteps(ctx, modeltest.Tools(modeltest.Call("use_skill", map[string]string{"name": "triage"})), modeltest.Reply("done"))
	if err != nil || st != (modeltest.Status{Remaining: 2}) {
		t.Fatalf("status %+v, err %v", st, err)
	}

	c := client(s)
	first, err := c.Chat.Completions.New(ctx, params())
	if err != nil {
		t.Fatal(err)
	}
	if calls := first.Choices[0].Message.ToolCalls; len(calls) != 1 || calls[0].Function.Arguments != `{"name":"triage"}` {
		t.Fatalf("tool calls = %+v", calls)
	}
	if st, err := a.Status(ctx); err != nil || st != (modeltest.Status{Remaining: 1, Requests: 1}) {
		t.Fatalf("status %+v, err %v", st, err)
	}

	reqs, err := a.Requests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 1 || reqs[0].Model != "m" || reqs[0].System() != "be brief\n" || reqs[0].ToolNames()[0] != "use_skill" {
		t.Fatalf("requests = %+v", reqs)
	}
	if reqs[0].Authorization != "Bearer sk-test" || !json.Valid(reqs[0].Raw) || !strings.Contains(string(reqs[0].Raw), `"be brief"`) {
		t.Fatalf("authorization %q, raw %s", reqs[0].Authorization, reqs[0].Raw)
	}

	if err := a.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if st, err := a.Status(ctx); err != nil || st != (modeltest.Status{}) {
		t.Fatalf("status after reset %+v, err %v", st, err)
	}
	if _, err := c.Chat.Completions.New(ctx, params()); err == nil {
		t.Fatal("the step left before the reset must be gone")
	}
	if reqs, err := a.Requests(ctx); err != nil || len(reqs) != 1 {
		t.Fatalf("requests after reset = %d, err %v", len(reqs), err)
	}
}

// TestAdminRefusesBadSteps: a body that is not an array of steps, or names a
// field no step has, is refused and adds nothing; Respond cannot be sent.
func TestAdminRefusesBadSteps(t *testing.T) {
	s := modeltest.New()
	defer s.Close()
	for _, body := range []string{`{"content":"x"}`, `[{"content":"x","echoToolResult":true}]`, `[`} {
		if code, answer := post(t, s, "/admin/steps", body); code != http.StatusBadRequest || !strings.Contains(answer, "failed to decode the steps") {
			t.Errorf("%s: %d %s", body, code, answer)
		}
	}
	if s.Remaining() != 0 {
		t.Fatalf("remaining = %d", s.Remaining())
	}
	respond := modeltest.Step{Respond: func(modeltest.Request) modeltest.Step { return modeltest.Reply("x") }}
	if _, err := admin(s).AddSteps(context.Background(), respond); err == nil {
		t.Fatal("a step with Respond must not be sent")
	}
	if code, _ := post(t, s, "/admin/requests", ""); code != http.StatusMethodNotAllowed {
		t.Fatalf("POST /admin/requests: %d", code)
	}
}

// conversation is a chat completion request in the middle of a second turn:
// the tools of the first turn answered, then the user spoke, the model
// called two tools, and both answered.
const conversation = `{"model":"m","messages":[
	{"role":"system","content":"be brief"},
	{"role":"user","content":"first"},
	{"role":"assistant","content":null,"tool_calls":[{"id":"c0","type":"function","function":{"name":"run_command","arguments":"{}"}}]},
	{"role":"tool","tool_call_id":"c0","content":"old result"},
	{"role":"assistant","content":"ok"},
	{"role":"user","content":[{"type":"text","text":"second"}]},
	{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"run_command","arguments":"{}"}},{"id":"c2","type":"function","function":{"name":"run_command","arguments":"{}"}}]},
	{"role":"tool","tool_call_id":"c1","content":"{\"exitCode\":0,\"stdout\":\"hello\\n\"}"},
	{"role":"tool","tool_call_id":"c2","content":[{"type":"text","text":"{\"exitCode\":3,"},{"type":"text","text":"\"stdout\":\"\"}"}]}
]}`

// TestEchoToolResults: a step sent as JSON answers with its content and the
// tool results of the current turn, in order, streamed or not.
func TestEchoToolResults(t *testing.T) {
	s := modeltest.New()
	defer s.Close()
	if code, answer := post(t, s, "/admin/steps", `[{"content":"The command said:","echoToolResults":true},{"echoToolResults":true},{"echoToolResults":true}]`); code != http.StatusOK {
		t.Fatalf("%d %s", code, answer)
	}

	want := "The command said:\n" + `{"exitCode":0,"stdout":"hello\n"}` + "\n" + `{"exitCode":3,"stdout":""}`
	code, answer := post(t, s, "/v1/chat/completions", conversation)
	var completion struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(answer), &completion) != nil {
		t.Fatalf("%d %s", code, answer)
	}
	if got := completion.Choices[0].Message.Content; got != want || completion.Choices[0].FinishReason != "stop" {
		t.Fatalf("content = %q, want %q", got, want)
	}

	streamed := strings.Replace(conversation, `{"model":"m",`, `{"model":"m","stream":true,`, 1)
	code, answer = post(t, s, "/v1/chat/completions", streamed)
	var content strings.Builder
	for line := range strings.Lines(answer) {
		data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
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
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatalf("chunk %s: %v", data, err)
		}
		for _, c := range chunk.Choices {
			content.WriteString(c.Delta.Content)
		}
	}
	if code != http.StatusOK || content.String() != strings.TrimPrefix(want, "The command said:\n") {
		t.Fatalf("%d: streamed content = %q", code, content.String())
	}

	// A turn without tool results echoes only the content, here none.
	code, answer = post(t, s, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if code != http.StatusOK || !strings.Contains(answer, `"content":null`) {
		t.Fatalf("%d %s", code, answer)
	}
}

// TestRecentToolResults: only the tool messages after the last user
// message count.
func TestRecentToolResults(t *testing.T) {
	var req modeltest.Request
	if err := json.Unmarshal([]byte(conversation), &req); err != nil {
		t.Fatal(err)
	}
	got := req.RecentToolResults()
	if len(got) != 2 || got[0] != `{"exitCode":0,"stdout":"hello\n"}` || got[1] != `{"exitCode":3,"stdout":""}` {
		t.Fatalf("recent tool results = %q", got)
	}
	req.Messages = append(req.Messages, modeltest.Message{Role: "user", Content: json.RawMessage(`"next"`)})
	if got := req.RecentToolResults(); len(got) != 0 {
		t.Fatalf("after a user message: %q", got)
	}
}

// TestSkipToolResults: a step can leave out the first tool results, such as
// a skill's instructions, and echo only the command results after them;
// skipping more than there are echoes none.
func TestSkipToolResults(t *testing.T) {
	s := modeltest.New()
	defer s.Close()
	if code, answer := post(t, s, "/admin/steps", `[{"content":"Then:","echoToolResults":true,"skipToolResults":1},{"content":"none","echoToolResults":true,"skipToolResults":9}]`); code != http.StatusOK {
		t.Fatalf("%d %s", code, answer)
	}
	for _, want := range []string{"Then:\n" + `{"exitCode":3,"stdout":""}`, "none"} {
		code, answer := post(t, s, "/v1/chat/completions", conversation)
		var completion struct {
			Choices []struct {
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if code != http.StatusOK || json.Unmarshal([]byte(answer), &completion) != nil {
			t.Fatalf("%d %s", code, answer)
		}
		if got := completion.Choices[0].Message.Content; got != want {
			t.Fatalf("content = %q, want %q", got, want)
		}
	}
}
