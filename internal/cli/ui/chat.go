package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeskills/kubeskills/internal/cli/cmdline"
	"github.com/kubeskills/kubeskills/internal/cli/mcpbridge"
	"github.com/kubeskills/kubeskills/internal/cli/ui/render"
)

// Bounds of a chat with an agent through the console.
const (
	// maxChatMessage is the longest message a person sends, in characters.
	maxChatMessage = 16 << 10
	// maxChatTurns is how many messages a conversation keeps; older ones
	// are dropped.
	maxChatTurns = 40
	// chatTimeout bounds one answer, which may wait for a person's
	// approval of a command.
	chatTimeout = 15 * time.Minute
	// maxAnswerBytes is the largest answer read.
	maxAnswerBytes = 1 << 20
)

// chatMessage is one message of a conversation.
type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// chats are the conversations of this console, by Agent, in memory only.
type chats struct {
	mu    sync.Mutex
	turns map[client.ObjectKey][]chatMessage
}

func (c *chats) get(key client.ObjectKey) []chatMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]chatMessage(nil), c.turns[key]...)
}

func (c *chats) add(key client.ObjectKey, m ...chatMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.turns == nil {
		c.turns = map[client.ObjectKey][]chatMessage{}
	}
	t := append(c.turns[key], m...)
	c.turns[key] = t[max(len(t)-maxChatTurns, 0):]
}

// chat sends the person's message, with the conversation so far, to the
// agent's /v1/chat/completions, the way `kubectl skills mcp` reaches an
// agent: through a tunnel to its pod opened with the person's rights, and
// the agent's token, which stays in this process's memory. The answer, as
// text, joins the conversation the agent's page shows.
func (s *server) chat(w http.ResponseWriter, r *http.Request) {
	key := client.ObjectKey{Namespace: r.PathValue("ns"), Name: r.PathValue("name")}
	message := strings.TrimSpace(r.PostForm.Get("message"))
	problem := ""
	switch {
	case !s.inScope(key.Namespace):
		problem = "namespace " + key.Namespace + " is not shown by this console"
	case message == "":
		problem = "write a message first"
	case utf8.RuneCountInString(message) > maxChatMessage:
		problem = fmt.Sprintf("the message is %d characters long, at most %d are sent", utf8.RuneCountInString(message), maxChatMessage)
	}
	if problem == "" {
		answer, err := s.ask(r.Context(), key, append(s.chats.get(key), chatMessage{Role: "user", Content: message}))
		if err == nil {
			s.chats.add(key, chatMessage{Role: "user", Content: message}, chatMessage{Role: "assistant", Content: answer})
			http.Redirect(w, r, "/agents/"+key.Namespace+"/"+key.Name+"#chat", http.StatusSeeOther)
			return
		}
		problem = "the agent did not answer: " + cmdline.OneLine(err.Error())
	}
	s.redirect(w, r, "/agents/"+key.Namespace+"/"+key.Name, problem)
}

// ask sends a conversation to the agent and returns its answer.
func (s *server) ask(ctx context.Context, key client.ObjectKey, messages []chatMessage) (string, error) {
	api, err := mcpbridge.Connect(ctx, s.cfg, s.c, key.Namespace, key.Name)
	if err != nil {
		return "", err
	}
	defer func() { _ = api.Close() }()
	// An agent serves one model, named after it.
	body, err := json.Marshal(map[string]any{"model": key.Name, "messages": messages})
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, chatTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, api.URL+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	if api.Token != "" {
		req.Header.Set("Authorization", "Bearer "+api.Token)
	}
	res, err := api.Client.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = res.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(res.Body, maxAnswerBytes))
	if err != nil {
		return "", err
	}
	var answer struct {
		Choices []struct {
			Message chatMessage `json:"message"`
		} `json:"choices"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	switch err := json.Unmarshal(data, &answer); {
	case res.StatusCode != http.StatusOK && answer.Error != nil:
		return "", fmt.Errorf("%s: %s", res.Status, answer.Error.Message)
	case res.StatusCode != http.StatusOK:
		return "", fmt.Errorf("%s", res.Status)
	case err != nil || len(answer.Choices) == 0:
		return "", fmt.Errorf("the answer is not a chat completion: %s", render.Text(string(data[:min(len(data), 200)])))
	}
	return answer.Choices[0].Message.Content, nil
}
