package agent

import "net/http"

// RequestKey is the key of the nth command a chat of messages, sent with
// header, asks for.
func RequestKey(header http.Header, messages []Message, n int, command, skill string) string {
	return requestKey(conversationHash(attemptOf(&http.Request{Header: header}).Key, messages), n, command, skill)
}

// RunName is the name of the CommandRun that key files for agent.
func RunName(agent, key string) string { return runName(agent, key) }
